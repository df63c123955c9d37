#pragma once
// The optional access log, one line a response in the common log format:
//   127.0.0.1 - - [24/Nov/2026:22:45:36 +0000] "GET /index.html HTTP/1.1" 200 217
// (the last field is the body's bytes). Proxy threads write lines into a
// buffer under a lock; a full buffer goes to the file at once, and a thread of
// its own writes the rest every second, traffic or not, and at close().

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

namespace ferry::http {

class AccessLog {
 public:
  // Appends to path ("-" for stdout). Throws ferry::Error when it cannot be opened.
  explicit AccessLog(const std::string& path);
  ~AccessLog();  // close()
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  void write(std::string_view peer, std::string_view request_line, std::uint16_t status,
             std::uint64_t body_bytes) noexcept;
  void flush() noexcept;
  // Writes what is buffered and stops the flushing thread; a line written
  // after it goes to the file at once. The owner calls it once its server has
  // stopped, on every way out (a signal, an error), since the log may outlive
  // the server in whatever still holds it. Idempotent.
  void close() noexcept;

 private:
  void flush_locked() noexcept;
  void flush_every_second();

  std::FILE* file_ = nullptr;
  bool owned_ = false;
  std::mutex mutex_;  // guards buffer_, closed_ and writes to file_
  std::condition_variable closing_;
  std::string buffer_;
  bool closed_ = false;
  std::thread flusher_;
};

}  // namespace ferry::http
