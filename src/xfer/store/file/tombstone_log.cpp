#include "xfer/store/file/tombstone_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>

#include "core/log.h"
#include "ferry/core/status.h"
#include "xfer/store/file/file_format.h"
#include "xfer/store/file/file_names.h"

namespace ferry::xfer::store {
namespace {

constexpr std::uint32_t kTombstoneMagic = 0x424d5446;  // "FTMB"
constexpr std::size_t kFixed = 16;

void encode(std::string_view key, std::uint64_t seq, std::string* out) {
  const std::size_t at = out->size();
  out->resize(at + kFixed + key.size() + 8);
  char* p = out->data() + at;
  const std::uint32_t magic = kTombstoneMagic;
  const auto len = static_cast<std::uint32_t>(key.size());
  std::memcpy(p, &magic, 4);
  std::memcpy(p + 4, &len, 4);
  std::memcpy(p + 8, &seq, 8);
  std::memcpy(p + kFixed, key.data(), key.size());
  const std::uint64_t sum = XXH3_64bits(p, kFixed + key.size());
  std::memcpy(p + kFixed + key.size(), &sum, 8);
}

// Writes all of data at the file's end (O_APPEND); returns 0 or errno.
int write_all(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    done += static_cast<std::size_t>(n);
  }
  return 0;
}

}  // namespace

std::vector<Tombstone> TombstoneLog::load(int dir_fd, const std::string& dir) {
  std::vector<Tombstone> out;
  const int fd = openat(dir_fd, kTombstoneLogName, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return out;
    throw_errno("file tier: cannot open " + dir + "/" + kTombstoneLogName);
  }
  std::string data;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      errno = err;
      throw_errno("file tier: cannot read " + dir + "/" + kTombstoneLogName);
    }
    if (n == 0) break;
    data.append(buf, static_cast<std::size_t>(n));
  }
  close(fd);
  std::size_t at = 0;
  while (at < data.size()) {
    const char* p = data.data() + at;
    const std::size_t left = data.size() - at;
    std::uint32_t magic = 0, len = 0;
    std::uint64_t seq = 0, sum = 0;
    if (left >= kFixed) {
      std::memcpy(&magic, p, 4);
      std::memcpy(&len, p + 4, 4);
      std::memcpy(&seq, p + 8, 8);
    }
    const bool fits = left >= kFixed && len >= 1 && len <= kMaxFileKeyLength && left >= kFixed + len + 8;
    if (fits) std::memcpy(&sum, p + kFixed + len, 8);
    if (magic != kTombstoneMagic || !fits || sum != XXH3_64bits(p, kFixed + len)) {
      log::app().warn("file tier {}: {} has a bad record at byte {}; ignoring its last {} bytes (removals of "
                      "packed objects recorded there are lost: those objects come back)",
                      dir, kTombstoneLogName, at, left);
      break;
    }
    out.push_back({std::string(p + kFixed, len), seq});
    at += kFixed + len + 8;
  }
  return out;
}

TombstoneLog::TombstoneLog(int dir_fd, std::string dir, bool fsync, const std::vector<Tombstone>& keep)
    : dir_fd_(dir_fd), dir_(std::move(dir)), fsync_(fsync) {
  std::lock_guard lock(mu_);
  if (auto why = write_new(keep); !why.empty()) throw Error(why);
}

TombstoneLog::~TombstoneLog() {
  if (fd_ >= 0) close(fd_);
}

std::string TombstoneLog::write_new(std::vector<Tombstone> keep) {
  const std::string tmp = temp_file_name(kTombstoneLogName);
  const std::string what = "file tier " + dir_ + ": rewriting " + kTombstoneLogName + ": ";
  const int fd = openat(dir_fd_, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return what + std::strerror(errno);
  std::string data;
  for (const auto& t : keep) encode(t.key, t.seq, &data);
  int err = write_all(fd, data);
  if (err == 0 && fsync_ && ::fsync(fd) != 0) err = errno;
  if (err == 0 && renameat(dir_fd_, tmp.c_str(), dir_fd_, kTombstoneLogName) != 0) err = errno;
  if (err != 0) {
    close(fd);
    unlinkat(dir_fd_, tmp.c_str(), 0);
    return what + std::strerror(err);
  }
  if (fsync_) ::fsync(dir_fd_);
  if (fd_ >= 0) close(fd_);
  fd_ = fd;  // still appends to the renamed file
  records_ = std::move(keep);
  return {};
}

int TombstoneLog::append(std::string_view key, std::uint64_t seq) noexcept {
  std::string rec;
  encode(key, seq, &rec);
  std::lock_guard lock(mu_);
  // A record written in part (a disk that filled mid-write) would end the log
  // for the start-up scan, and every later tombstone with it: cut it off again.
  const off_t end = ::lseek(fd_, 0, SEEK_END);
  int err = end < 0 ? errno : write_all(fd_, rec);
  if (err == 0 && fsync_ && ::fsync(fd_) != 0) err = errno;
  if (err != 0) {
    if (end >= 0 && ::ftruncate(fd_, end) != 0)
      log::app().error("file tier {}: cannot cut a torn record off {} ({}); removes after it are lost at the next "
                       "restart", dir_, kTombstoneLogName, std::strerror(errno));
    return err;
  }
  records_.push_back({std::string(key), seq});
  return 0;
}

std::string TombstoneLog::rewrite(const std::function<bool(const Tombstone&)>& needed) {
  std::lock_guard lock(mu_);
  std::vector<Tombstone> keep;
  for (const auto& t : records_)
    if (needed(t)) keep.push_back(t);
  return write_new(std::move(keep));
}

std::uint64_t TombstoneLog::records() const {
  std::lock_guard lock(mu_);
  return records_.size();
}

}  // namespace ferry::xfer::store
