#pragma once
// A real full disk for the store's tests: a small tmpfs mounted in a child
// process's private mount namespace (needs root or CAP_SYS_ADMIN; 77, the
// skip code, otherwise), and a file that fills it.

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <vector>

namespace ferry::xfer::store::test {

// Runs body in a child process (it changes process-wide limits or namespaces) and
// returns its exit status: 0 passed, 77 cannot run here, anything else failed.
template <class F>
int in_child(F body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// Runs body() in a child with a tmpfs of `size` (mount's "size=" text) over dir.
template <class F>
int in_small_tmpfs(const std::string& dir, const char* size, F body) {
  return in_child([&] {
    if (unshare(CLONE_NEWNS) != 0) return 77;
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 77;
    const std::string opts = std::string("size=") + size;
    if (mount("tmpfs", dir.c_str(), "tmpfs", 0, opts.c_str()) != 0) return 77;
    return body();
  });
}

// Fills the file system under dir: a file that grows until a write fails with
// ENOSPC. Returns its path, or "" when the disk never filled.
inline std::string fill_the_disk(const std::string& dir) {
  const std::string path = dir + "/filler";
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return "";
  const std::vector<char> page(4096, 'x');
  for (std::uint64_t written = 0; written < (1ull << 30);) {
    const ssize_t n = write(fd, page.data(), page.size());
    if (n < 0) {
      const int err = errno;
      close(fd);
      return err == ENOSPC ? path : "";
    }
    written += static_cast<std::uint64_t>(n);
  }
  close(fd);
  return "";
}

}  // namespace ferry::xfer::store::test
