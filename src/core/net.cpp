#include "core/net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ferry/core/status.h"

namespace ferry::net {
namespace {

sockaddr_in make_addr(const std::string& address, std::uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  const std::string a = (address == "localhost") ? "127.0.0.1" : address;
  if (inet_pton(AF_INET, a.c_str(), &sa.sin_addr) != 1)
    throw Error("'" + address + "' is not an IPv4 address");
  return sa;
}

}  // namespace

int listen_tcp(const std::string& address, std::uint16_t port, std::uint16_t* bound_port,
               int backlog) {
  const sockaddr_in sa = make_addr(address, port);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) throw_errno("socket");
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    throw_errno("binding " + address + ":" + std::to_string(port));
  }
  if (::listen(fd, backlog) != 0) {
    ::close(fd);
    throw_errno("listen");
  }
  sockaddr_in got{};
  socklen_t len = sizeof(got);
  getsockname(fd, reinterpret_cast<sockaddr*>(&got), &len);
  if (bound_port != nullptr) *bound_port = ntohs(got.sin_port);
  return fd;
}

int connect_tcp(const std::string& address, std::uint16_t port) {
  const sockaddr_in sa = make_addr(address, port);
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw_errno("socket");
  for (;;) {
    if (connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) == 0) break;
    if (errno == EINTR) continue;
    const int err = errno;
    ::close(fd);
    errno = err;
    if (err == ECONNREFUSED) return -1;
    throw_errno("connecting to " + address + ":" + std::to_string(port));
  }
  set_nodelay(fd);
  return fd;
}

void set_nonblocking(int fd) {
  const int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) throw_errno("O_NONBLOCK");
}

void set_nodelay(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

std::uint64_t raise_fd_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  return rl.rlim_cur;
}

void pin_current_thread(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  const int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  if (rc != 0)
    throw Error("cannot pin a thread to CPU " + std::to_string(cpu) + ": " + std::strerror(rc) +
                " (is the core online and in this process's cpuset?)");
}

std::string peer_name(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof(sa);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return "?";
  char buf[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &sa.sin_addr, buf, sizeof(buf));
  return std::string(buf) + ":" + std::to_string(ntohs(sa.sin_port));
}

bool write_all(int fd, const void* data, std::size_t len) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  while (len > 0) {
    const ssize_t r = ::send(fd, p, len, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    len -= static_cast<std::size_t>(r);
  }
  return true;
}

}  // namespace ferry::net
