#pragma once
// The agent's control protocol (docs/xfer.md): the application and `ferry agent`
// exchange frames over a Unix stream socket (local) or TCP (the reference's
// fallback mode). The data itself never crosses this socket: the agent moves it
// between the application's exported memory and its tiers.
//
//   0        4        8
//   +--------+--------+---------------------------+
//   |size    |type    | body (size - 8 bytes)      |   size and type big-endian uint32
//   +--------+--------+---------------------------+
//
// Bodies are little-endian fixed-width fields and length-prefixed strings,
// written by Encoder and read by Decoder, which checks every bound: a short or
// oversized body is a ProtocolError, never an out-of-bounds read.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::xfer::proto {

// 2: memory over TCP is proven by the owner's pid and fd (no paths), HelloOk
// names the agent's pid, List pages.
inline constexpr std::uint32_t kVersion = 4;
inline constexpr std::size_t kFrameHeader = 8;
inline constexpr std::size_t kMaxFrame = 64u << 20;  // a request of ~500k descriptors
inline constexpr std::size_t kMaxKey = 4096;

enum class Type : std::uint32_t {
  Hello = 1,         // app -> agent: version, app name
  HelloOk = 2,       // agent -> app: session id, backends, tiers
  Register = 3,      // app -> agent: call id, memory type, dev, length, how to reach it (+ fd)
  RegisterOk = 4,    // agent -> app: call id, region id
  Deregister = 5,    // app -> agent: region id (no reply)
  Transfer = 6,      // app -> agent: request id, op, notification, descriptors
  TransferDone = 7,  // agent -> app: request id, status, per-descriptor results
  List = 8,          // app -> agent: call id, key prefix
  ListReply = 9,     // agent -> app: call id, objects
  Remove = 10,       // app -> agent: call id, keys
  RemoveReply = 11,  // agent -> app: call id, per-key found flags
  Stats = 12,        // app -> agent: call id
  StatsReply = 13,   // agent -> app: call id, JSON text
  CallError = 14,    // agent -> app: call id, status, message (a set-up call failed)
  Exists = 15,       // app -> agent: call id, keys
  ExistsReply = 16,  // agent -> app: call id, per-key found flags
};
inline constexpr Type kLastType = Type::ExistsReply;

const char* to_string(Type t) noexcept;

// How the agent reaches a registered region.
enum class Reach : std::uint8_t {
  Memfd = 0,     // sealed shared host memory: the fd travels with SCM_RIGHTS (Unix), or the agent takes
                 // it from the owner's process with pidfd_getfd (TCP, docs/security.md)
  CudaIpc = 1,   // a cudaIpcMemHandle_t (64 bytes) plus the offset of the region in its allocation
  ProcessMemory = 2,  // plain host memory of the application's process, at `offset` there: the agent
                      // copies it with process_vm_readv/writev (agent/process_memory.h)
  SharedFile = 3,     // host memory mapped from a shared file (POSIX shm), `offset` in the file; the fd
                      // travels as a memfd's does; the agent uses pread/pwrite (agent/shared_file_memory.h)
};

class Encoder {
 public:
  // The frame header's room is kept at the front, so that frame() fills it in
  // place instead of copying the body behind a new header.
  Encoder() : bytes_(kFrameHeader, '\0') {}
  // Room for `body_bytes` more: a message of thousands of descriptors is then
  // written without reallocations.
  void reserve(std::size_t body_bytes) { bytes_.reserve(bytes_.size() + body_bytes); }
  void u8(std::uint8_t v) { bytes_.push_back(static_cast<char>(v)); }
  void u32(std::uint32_t v);
  void u64(std::uint64_t v);
  void i32(std::int32_t v) { u32(static_cast<std::uint32_t>(v)); }
  void str(std::string_view s);
  // The whole frame: header then body. Hands the bytes over: the encoder is
  // empty afterwards.
  std::string frame(Type type);

 private:
  std::string bytes_;
};

class Decoder {
 public:
  explicit Decoder(std::string_view body) : body_(body) {}
  // Each getter sets failed() instead of reading past the end.
  std::uint8_t u8();
  std::uint32_t u32();
  std::uint64_t u64();
  std::int32_t i32() { return static_cast<std::int32_t>(u32()); }
  std::string str(std::size_t max_len = kMaxFrame);
  // Like str(), without a copy: the view lives as long as the body does.
  std::string_view view(std::size_t max_len = kMaxFrame);
  bool failed() const noexcept { return failed_; }
  bool at_end() const noexcept { return pos_ == body_.size(); }

 private:
  bool take(std::size_t n);
  std::string_view body_;
  std::size_t pos_ = 0;
  bool failed_ = false;
};

// Checks a frame header's size and type; returns the body's length. Throws
// ferry::Error naming what is wrong (an oversized frame is refused from its
// header alone, before any of its body is read).
std::size_t check_frame_header(const std::uint8_t* header, Type* type);

struct Frame {
  Type type{};
  std::string body;
  int fd = -1;  // a descriptor that came with the frame (the receiver owns it)
};

// A connected stream socket carrying frames. Blocking; one sender at a time
// (callers serialise sends), one receiver at a time.
class FrameSocket {
 public:
  FrameSocket() = default;
  explicit FrameSocket(int fd) : fd_(fd) {}
  ~FrameSocket();
  FrameSocket(FrameSocket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FrameSocket& operator=(FrameSocket&& other) noexcept;
  FrameSocket(const FrameSocket&) = delete;
  FrameSocket& operator=(const FrameSocket&) = delete;

  // Sends one frame, with pass_fd over SCM_RIGHTS when >= 0 (Unix sockets only).
  // Returns false when the peer is gone.
  bool send(const std::string& frame, int pass_fd = -1);
  // Receives one frame. std::nullopt when the peer closed cleanly between frames;
  // throws ferry::Error on a malformed or oversized frame or a connection cut
  // mid-frame.
  std::optional<Frame> recv();
  // Unblocks a recv() in another thread (shutdown(2)); the fd stays open.
  void shutdown() noexcept;
  int fd() const noexcept { return fd_; }

 private:
  int fd_ = -1;
};

// Endpoints: "unix:NAME" (abstract socket "@NAME"), "tcp:HOST:PORT".
struct Endpoint {
  bool tcp = false;
  std::string name;  // abstract socket name, or host
  std::uint16_t port = 0;

  static Endpoint parse(const std::string& text);  // throws ferry::Error with the accepted forms
  std::string to_string() const;
};

// A non-blocking listening socket for the endpoint (TCP port 0 picks one; *bound_port gets it).
int listen_on(const Endpoint& ep, std::uint16_t* bound_port = nullptr);
// Connects, retrying until timeout_ms while nobody listens. Throws ferry::Error.
FrameSocket connect_to(const Endpoint& ep, int timeout_ms);

}  // namespace ferry::xfer::proto
