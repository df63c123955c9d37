#include "core/sealed_memfd.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ferry/core/status.h"

namespace ferry {

int create_sealed_memfd(const char* name, std::size_t size) {
  const int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) throw_errno(std::string("memfd_create for ") + name);
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    throw_errno("sizing " + std::string(name) + " to " + std::to_string(size) + " bytes");
  }
  // F_SEAL_SEAL last: nobody, this process included, can change the size again.
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    throw_errno(std::string("sealing ") + name);
  }
  return fd;
}

std::size_t require_sealed_memfd(int fd, const std::string& what) {
  struct stat st {};
  if (fstat(fd, &st) != 0) throw_errno("fstat of " + what);
  if (!S_ISREG(st.st_mode)) throw Error(what + " is not shared memory (a memfd), refused");
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0)
    throw Error(what + " is not a sealable memfd (F_GET_SEALS: " + std::strerror(errno) +
                "); create it with memfd_create(MFD_ALLOW_SEALING) and seal it with F_SEAL_SHRINK");
  if ((seals & F_SEAL_SHRINK) == 0)
    throw Error(what + " is not sealed against shrinking: a peer could truncate it under this process's mapping "
                       "(SIGBUS); add F_SEAL_SHRINK with fcntl(F_ADD_SEALS) before handing it over");
  return static_cast<std::size_t>(st.st_size);
}

}  // namespace ferry
