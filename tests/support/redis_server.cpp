#include "support/redis_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace ferry::test {
namespace {

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

}  // namespace

std::uint16_t free_loopback_port() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("socket failed");
  sockaddr_in a = loopback(0);
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(fd);
    throw std::runtime_error("cannot bind a loopback port");
  }
  close(fd);
  return ntohs(a.sin_port);
}

bool redis_ping(std::uint16_t port, int timeout_ms) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_in a = loopback(port);
  bool ok = false;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      send(fd, "PING\r\n", 6, MSG_NOSIGNAL) == 6) {
    pollfd p{fd, POLLIN, 0};
    char buf[16] = {};
    if (poll(&p, 1, timeout_ms) == 1 && recv(fd, buf, sizeof(buf) - 1, 0) >= 5)
      ok = std::string(buf).rfind("+PONG", 0) == 0 || std::string(buf).rfind("-NOAUTH", 0) == 0;
  }
  close(fd);
  return ok;
}

std::string RedisServer::find_binary() {
  if (const char* env = std::getenv("FERRY_REDIS_SERVER")) return env;
  const char* path = std::getenv("PATH");
  std::stringstream ss(path != nullptr ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    const std::string candidate = dir + "/redis-server";
    if (!dir.empty() && access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

RedisServer::RedisServer(std::vector<std::string> options)
    : bin_(find_binary()), options_(std::move(options)) {
  if (bin_.empty())
    throw std::runtime_error(
        "redis-server not found on PATH (scripts/install-deps.sh installs redis-server)");
  std::string tmpl = (std::filesystem::temp_directory_path() / "ferry-redis-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  // Another process may take the port between our probe and redis's bind: try again.
  for (int attempt = 0;; ++attempt) {
    port_ = free_loopback_port();
    try {
      launch();
      return;
    } catch (const std::runtime_error&) {
      if (attempt == 4) {
        std::filesystem::remove_all(dir_);
        throw;
      }
    }
  }
}

RedisServer::~RedisServer() {
  stop();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void RedisServer::launch() {
  // A shell watches over redis-server: it kills it when stop() sends SIGTERM, and
  // also when this test process dies without running destructors (an ASan abort,
  // a crash), so no orphaned server outlives the test.
  const std::string watchdog =
      "trap 'kill -9 $r 2>/dev/null; wait $r; exit 0' TERM; "
      "\"$@\" >>\"$0\" 2>&1 & r=$!; "
      "while kill -0 " +
      std::to_string(getpid()) +
      " 2>/dev/null && kill -0 $r 2>/dev/null; do sleep 0.1; done; "
      "kill -9 $r 2>/dev/null; wait $r";
  std::vector<std::string> argv = {"/bin/sh",
                                   "-c",
                                   watchdog,
                                   dir_ + "/redis.log",
                                   bin_,
                                   "--port",
                                   std::to_string(port_),
                                   "--bind",
                                   "127.0.0.1",
                                   "--save",
                                   "",
                                   "--appendonly",
                                   "no",
                                   "--dir",
                                   dir_,
                                   "--daemonize",
                                   "no",
                                   "--protected-mode",
                                   "no"};
  argv.insert(argv.end(), options_.begin(), options_.end());
  proc_ = Subprocess::spawn(argv);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (redis_ping(port_)) return;
    if (proc_.wait(0.0)) throw std::runtime_error("redis-server exited at start-up:\n" + log());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  stop();
  throw std::runtime_error("redis-server did not answer PING within 10 s:\n" + log());
}

void RedisServer::stop() {
  if (!proc_.running()) return;
  proc_.signal(SIGTERM);  // the watchdog kills redis-server (SIGKILL: as abrupt as a crash) and waits for it
  if (!proc_.wait(5.0)) proc_.kill();
}

void RedisServer::start() {
  if (proc_.running()) return;
  launch();
}

std::string RedisServer::log() const {
  std::ifstream in(dir_ + "/redis.log");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace ferry::test
