#pragma once
// Open descriptors of the file tier's packs, at most `limit` at a time.
//
// A pack is read through a descriptor (an O_DIRECT one with direct), and opening
// it per get would cost an openat and a close per object, which is what packs
// are there to avoid. Keeping every pack open, as the tier first did, held a
// descriptor per pack for its whole life, and the chain's evictions (a few
// objects per put call, so a pack each) ran into the open-files limit. Here a
// pack's descriptor is opened on first use and closed, least recently used
// first, when more than `limit` are open and nobody is reading through it.
//
// A reader that holds a Lease keeps the descriptor open: a pack unlinked
// meanwhile (emptied by removes or compaction) still reads its immutable bytes.
// Opening a pack that was unlinked before the lease fails with ENOENT: the
// object moved (compaction) or died, and the caller looks the key up again.

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace ferry::xfer::store {

class PackFds;

// A published pack: immutable once renamed into place. Shared (shared_ptr) by
// the index entries that live in it and by reads in flight.
class PackFile {
 public:
  // fd: the descriptor its writer or the start-up scan has open, handed to the
  // cache (-1: none). fds must outlive the pack.
  PackFile(PackFds* fds, std::uint64_t seq, std::string name, int fd, std::uint64_t size);
  ~PackFile();  // closes the descriptor, if open
  PackFile(const PackFile&) = delete;
  PackFile& operator=(const PackFile&) = delete;

  const std::uint64_t seq;
  const std::string name;
  const std::uint64_t size;

 private:
  friend class PackFds;
  PackFds* const fds_;
  // Under fds_->mu_: the descriptor (-1: closed), the leases on it, and its
  // place in the cache's LRU list while open.
  int fd_ = -1;
  unsigned users_ = 0;
  std::list<PackFile*>::iterator lru_;
};

class PackFds {
 public:
  // Packs live in dir_fd's directory; they are opened read-only, with O_DIRECT
  // when direct. limit >= 1.
  PackFds(int dir_fd, bool direct, std::size_t limit);
  PackFds(const PackFds&) = delete;
  PackFds& operator=(const PackFds&) = delete;

  // The pack's descriptor, open while the lease lives.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& o) noexcept : pack_(std::exchange(o.pack_, nullptr)), fd_(o.fd_), err_(o.err_) {}
    Lease& operator=(Lease&& o) noexcept;
    ~Lease() { reset(); }
    int fd() const { return fd_; }    // -1 when the open failed
    int error() const { return err_; }  // errno of the failed open (ENOENT: the pack was unlinked)
    void reset();

   private:
    friend class PackFds;
    PackFile* pack_ = nullptr;  // set while it holds a use of pack_'s descriptor
    int fd_ = -1;
    int err_ = 0;
  };

  // Opens the pack's descriptor if it is closed (closing the least recently
  // used idle ones beyond the limit). The caller keeps a reference to the pack
  // for the lease's life.
  Lease acquire(PackFile& pack);

  std::size_t open_count() const;   // descriptors open now
  std::uint64_t reopens() const;    // opens on demand so far (not counting adopted ones)
  std::size_t limit() const { return limit_; }

 private:
  friend class PackFile;
  void adopt(PackFile& pack, int fd);  // from PackFile's constructor
  void forget(PackFile& pack);         // from PackFile's destructor
  void release(PackFile& pack);        // from Lease
  void make_open(PackFile& pack, int fd);  // under mu_
  void trim(std::vector<int>* closing);    // under mu_: idle packs beyond the limit, to close after it

  const int dir_fd_;
  const bool direct_;
  const std::size_t limit_;
  mutable std::mutex mu_;
  std::list<PackFile*> lru_;  // open packs, most recently used first
  std::uint64_t reopens_ = 0;
};

}  // namespace ferry::xfer::store
