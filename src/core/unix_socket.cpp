#include "core/unix_socket.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include "ferry/core/status.h"

namespace ferry::unix_socket {
namespace {

socklen_t make_address(const std::string& name, sockaddr_un* addr) {
  if (name.empty() || name.size() + 1 > sizeof(addr->sun_path))
    throw Error("socket name '" + name + "' must be 1 to " + std::to_string(sizeof(addr->sun_path) - 1) +
                " bytes");
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  std::memcpy(addr->sun_path + 1, name.data(), name.size());  // leading NUL: abstract namespace
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
}

}  // namespace

int listen_abstract(const std::string& name, int backlog, const std::string& what_in_use) {
  sockaddr_un addr{};
  const socklen_t len = make_address(name, &addr);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw_errno("unix socket");
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EADDRINUSE) throw Error("@" + name + " is already in use: " + what_in_use);
    errno = err;
    throw_errno("binding @" + name);
  }
  if (::listen(fd, backlog) != 0) {
    ::close(fd);
    throw_errno("listening on @" + name);
  }
  return fd;
}

int try_connect_abstract(const std::string& name) {
  sockaddr_un addr{};
  const socklen_t len = make_address(name, &addr);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw_errno("unix socket");
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == ECONNREFUSED || err == ENOENT) return -1;
    errno = err;
    throw_errno("connecting to @" + name);
  }
  return fd;
}

int accept_blocking(int listen_fd) {
  for (;;) {
    const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) return fd;
    if (errno != EINTR) throw_errno("accept");
  }
}

long receive(int fd, void* p, std::size_t n, int flags, int* passed_fd) {
  iovec iov{p, n};
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = cbuf;
  msg.msg_controllen = sizeof(cbuf);
  const ssize_t r = recvmsg(fd, &msg, flags | MSG_CMSG_CLOEXEC);
  if (r < 0) return -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int in = -1;
      std::memcpy(&in, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (passed_fd != nullptr && *passed_fd < 0)
        *passed_fd = in;
      else
        ::close(in);  // a descriptor nobody asked for must not leak
    }
  }
  return r;
}

void read_exact(int fd, std::uint8_t* p, std::size_t n, int* passed_fd, int stall_ms, const char* what) {
  std::size_t got = 0;
  while (got < n) {
    pollfd pf{fd, POLLIN, 0};
    const int ready = poll(&pf, 1, stall_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) throw_errno(std::string(what) + " poll");
    if (ready == 0) throw Error(std::string(what) + ": the peer sent part of a message and stalled");
    const long r = receive(fd, p + got, n - got, 0, passed_fd);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw_errno(std::string(what) + " read");
    }
    if (r == 0) throw Error(std::string(what) + " closed by the peer");
    got += static_cast<std::size_t>(r);
  }
}

bool write_all(int fd, const void* data, std::size_t n, int pass_fd, const char* what) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  std::size_t sent = 0;
  alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))];
  while (sent < n) {
    iovec iov{const_cast<std::uint8_t*>(p + sent), n - sent};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (pass_fd >= 0 && sent == 0) {  // the descriptor rides with the first byte only
      msg.msg_control = cbuf;
      msg.msg_controllen = sizeof(cbuf);
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
    }
    const ssize_t r = sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EPIPE || errno == ECONNRESET) return false;
      throw_errno(std::string(what) + " send");
    }
    sent += static_cast<std::size_t>(r);
  }
  return true;
}

}  // namespace ferry::unix_socket
