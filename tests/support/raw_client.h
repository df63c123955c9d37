#pragma once
// A raw TCP client for end-to-end tests: sends hand-made frames (valid or not)
// and reads whole responses with a timeout.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ferry::test {

struct Frame {
  std::uint32_t msg_id = 0;
  std::uint32_t code_or_len = 0;  // length prefix, or the error code of ferry_error
  std::string payload;            // payload, or the reason of ferry_error
};

class RawClient {
 public:
  // Connects (retrying while refused for up to timeout_s).
  RawClient(std::uint16_t port, double timeout_s = 10.0);
  // A client that reads the way a distant, slow one does: the smallest receive
  // buffer, and Ethernet-sized segments. (Over loopback's 64 KiB segments the
  // kernel gives the server's end a send buffer of megabytes, which would take
  // in what a test means the server to hold.) Throws when it cannot connect.
  static RawClient slow_reader(std::uint16_t port);
  ~RawClient();
  RawClient(RawClient&& o) noexcept;
  RawClient(const RawClient&) = delete;

  static std::string request(const std::string& payload);  // a valid client_request
  static std::string raw_frame(std::uint32_t wire_size, std::uint32_t msg_id, std::uint32_t len,
                               const std::string& body);
  void send_bytes(const std::string& bytes);
  // Sends without blocking; returns bytes accepted by the kernel.
  std::size_t try_send(const std::string& bytes);
  // The next whole frame, or nullopt on EOF; throws on timeout.
  std::optional<Frame> read_frame(double timeout_s = 10.0);
  // Exactly n bytes of whatever the server sends; throws on timeout or EOF first.
  std::string read_bytes(std::size_t n, double timeout_s = 10.0);
  // Everything until the server closes the connection; throws on timeout.
  std::string read_to_end(double timeout_s = 10.0);
  // True once the server has closed the connection (EOF) within timeout_s.
  bool closed_by_peer(double timeout_s = 10.0);
  void close();
  int fd() const { return fd_; }

 private:
  RawClient() = default;
  bool read_exact(std::uint8_t* p, std::size_t n, double timeout_s);
  int fd_ = -1;
};

}  // namespace ferry::test
