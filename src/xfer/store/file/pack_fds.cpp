#include "xfer/store/file/pack_fds.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>
#include <vector>

namespace ferry::xfer::store {

PackFile::PackFile(PackFds* fds, std::uint64_t seq, std::string name, int fd, std::uint64_t size)
    : seq(seq), name(std::move(name)), size(size), fds_(fds) {
  if (fd >= 0) fds_->adopt(*this, fd);
}

PackFile::~PackFile() {
  fds_->forget(*this);
}

PackFds::PackFds(int dir_fd, bool direct, std::size_t limit)
    : dir_fd_(dir_fd), direct_(direct), limit_(limit < 1 ? 1 : limit) {}

PackFds::Lease& PackFds::Lease::operator=(Lease&& o) noexcept {
  if (this != &o) {
    reset();
    pack_ = std::exchange(o.pack_, nullptr);
    fd_ = o.fd_;
    err_ = o.err_;
  }
  return *this;
}

void PackFds::Lease::reset() {
  if (pack_ != nullptr) pack_->fds_->release(*pack_);
  pack_ = nullptr;
  fd_ = -1;
}

// Why the descriptors are closed outside mu_: closing one that wrote with
// O_DIRECT may wait on the file system (ext4 flushes on close), and every get's
// acquire takes mu_.
namespace {
void close_all(const std::vector<int>& fds) {
  for (int fd : fds) close(fd);
}
}  // namespace

PackFds::Lease PackFds::acquire(PackFile& pack) {
  Lease lease;
  std::vector<int> closing;
  {
    std::lock_guard lock(mu_);
    if (pack.fd_ >= 0) {
      lru_.splice(lru_.begin(), lru_, pack.lru_);
      ++pack.users_;
      lease.pack_ = &pack;
      lease.fd_ = pack.fd_;
      return lease;
    }
  }
  // Opened outside mu_ (an openat may wait for the journal); a reader that
  // raced us may have opened it meanwhile, and then ours is closed again.
  const int fd = openat(dir_fd_, pack.name.c_str(), O_RDONLY | O_CLOEXEC | (direct_ ? O_DIRECT : 0));
  if (fd < 0) {
    lease.err_ = errno;
    return lease;
  }
  {
    std::lock_guard lock(mu_);
    if (pack.fd_ >= 0) {
      closing.push_back(fd);
      lru_.splice(lru_.begin(), lru_, pack.lru_);
    } else {
      make_open(pack, fd);
      ++reopens_;
    }
    ++pack.users_;
    lease.pack_ = &pack;
    lease.fd_ = pack.fd_;
    trim(&closing);
  }
  close_all(closing);
  return lease;
}

void PackFds::adopt(PackFile& pack, int fd) {
  std::vector<int> closing;
  {
    std::lock_guard lock(mu_);
    make_open(pack, fd);
    trim(&closing);
  }
  close_all(closing);
}

void PackFds::forget(PackFile& pack) {
  int fd = -1;
  {
    std::lock_guard lock(mu_);
    if (pack.fd_ >= 0) {
      lru_.erase(pack.lru_);
      fd = std::exchange(pack.fd_, -1);
    }
  }
  if (fd >= 0) close(fd);
}

void PackFds::release(PackFile& pack) {
  std::vector<int> closing;
  {
    std::lock_guard lock(mu_);
    --pack.users_;
    trim(&closing);
  }
  close_all(closing);
}

void PackFds::make_open(PackFile& pack, int fd) {
  pack.fd_ = fd;
  lru_.push_front(&pack);
  pack.lru_ = lru_.begin();
}

// Closes idle packs from the least recently used end while more than limit_
// are open. Packs with readers stay open: the limit may be exceeded by as many
// packs as are being read at once.
void PackFds::trim(std::vector<int>* closing) {
  if (lru_.size() <= limit_) return;
  for (auto it = lru_.end(); it != lru_.begin() && lru_.size() > limit_;) {
    --it;
    PackFile* p = *it;
    if (p->users_ > 0) continue;
    closing->push_back(std::exchange(p->fd_, -1));
    it = lru_.erase(it);
  }
}

std::size_t PackFds::open_count() const {
  std::lock_guard lock(mu_);
  return lru_.size();
}

std::uint64_t PackFds::reopens() const {
  std::lock_guard lock(mu_);
  return reopens_;
}

}  // namespace ferry::xfer::store
