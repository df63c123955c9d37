#include "http/access_log.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include "ferry/core/status.h"

namespace ferry::http {
namespace {

constexpr std::size_t kFlushBytes = 64 * 1024;
constexpr std::chrono::seconds kFlushEvery{1};  // docs/http.md promises lines within a second

// Request lines come from clients: anything outside printable ASCII, and the
// quote and backslash that delimit the field, are escaped as \xNN.
void append_escaped(std::string& out, std::string_view s) {
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char esc[5];
      std::snprintf(esc, sizeof(esc), "\\x%02x", c);
      out += esc;
    }
  }
}

}  // namespace

AccessLog::AccessLog(const std::string& path) {
  if (path == "-") {
    file_ = stdout;
  } else {
    file_ = std::fopen(path.c_str(), "a");
    if (file_ == nullptr)
      throw Error("cannot open HttpOptions::access_log " + path + ": " + std::strerror(errno));
    owned_ = true;
  }
  buffer_.reserve(kFlushBytes + 1024);
  try {
    flusher_ = std::thread([this] { flush_every_second(); });
  } catch (...) {
    if (owned_) std::fclose(file_);
    throw;
  }
}

AccessLog::~AccessLog() {
  close();
  if (owned_) std::fclose(file_);
}

void AccessLog::flush_every_second() {
  std::unique_lock lock(mutex_);
  while (!closed_) {
    closing_.wait_for(lock, kFlushEvery);
    flush_locked();
  }
}

void AccessLog::close() noexcept {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  closing_.notify_all();
  if (flusher_.joinable()) flusher_.join();  // its last turn writes what is left
  flush();
}

void AccessLog::write(std::string_view peer, std::string_view request_line, std::uint16_t status,
                      std::uint64_t body_bytes) noexcept {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  static const char* const kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                        "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  char date[40];
  std::snprintf(date, sizeof(date), "[%02d/%s/%04d:%02d:%02d:%02d +0000]", tm.tm_mday, kMonths[tm.tm_mon],
                tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
  const std::size_t colon = peer.rfind(':');
  try {
    std::lock_guard lock(mutex_);
    buffer_.append(peer.substr(0, colon));
    buffer_.append(" - - ");
    buffer_.append(date);
    buffer_.append(" \"");
    append_escaped(buffer_, request_line);
    buffer_.append("\" ");
    buffer_.append(std::to_string(status));
    buffer_.append(" ");
    buffer_.append(std::to_string(body_bytes));
    buffer_.append("\n");
    if (buffer_.size() >= kFlushBytes || closed_) flush_locked();
  } catch (...) {
    // Out of memory for a log line: the response matters more than its record.
  }
}

void AccessLog::flush() noexcept {
  std::lock_guard lock(mutex_);
  flush_locked();
}

void AccessLog::flush_locked() noexcept {
  if (buffer_.empty()) return;
  std::fwrite(buffer_.data(), 1, buffer_.size(), file_);
  std::fflush(file_);
  buffer_.clear();
}

}  // namespace ferry::http
