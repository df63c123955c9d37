#pragma once
// The optional access log, one line a response in the common log format:
//   127.0.0.1 - - [24/Nov/2026:22:45:36 +0000] "GET /index.html HTTP/1.1" 200 217
// (the last field is the body's bytes). Proxy threads write lines into a
// buffer under a lock; a full buffer, or one a second old, goes to the file.

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>
#include <string_view>

namespace ferry::http {

class AccessLog {
 public:
  // Appends to path ("-" for stdout). Throws ferry::Error when it cannot be opened.
  explicit AccessLog(const std::string& path);
  ~AccessLog();
  AccessLog(const AccessLog&) = delete;
  AccessLog& operator=(const AccessLog&) = delete;

  void write(std::string_view peer, std::string_view request_line, std::uint16_t status,
             std::uint64_t body_bytes) noexcept;
  void flush() noexcept;

 private:
  void flush_locked() noexcept;

  std::FILE* file_ = nullptr;
  bool owned_ = false;
  std::mutex mutex_;
  std::string buffer_;
  std::time_t flushed_at_ = 0;
};

}  // namespace ferry::http
