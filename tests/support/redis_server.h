#pragma once
// A real redis-server for tests: on a free loopback port, in its own temporary
// directory, with persistence off (--save '' --appendonly no). The constructor
// returns once PING answers; the destructor kills it and removes the directory.
// stop() and start() let a test take Redis away and bring it back on the same
// port.

#include <cstdint>
#include <string>
#include <vector>

#include "core/subprocess.h"

namespace ferry::test {

class RedisServer {
 public:
  // Throws std::runtime_error when redis-server cannot be found or does not start.
  // FERRY_REDIS_SERVER in the environment names the binary; else it is looked up
  // on PATH.
  // `options`: more redis-server flags, e.g. {"--maxmemory", "64mb"}.
  explicit RedisServer(std::vector<std::string> options = {});
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  std::uint16_t port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  bool running() const { return proc_.running(); }

  void stop();   // kills redis-server with SIGKILL: as abrupt as a crash
  void start();  // on the same port; waits for PING
  std::string log() const;

  // Whether redis-server can be found (tests may skip with a clear message).
  static std::string find_binary();

 private:
  void launch();

  std::string bin_;
  std::vector<std::string> options_;
  std::string dir_;
  std::uint16_t port_ = 0;
  Subprocess proc_;
};

// A loopback TCP port that was free a moment ago.
std::uint16_t free_loopback_port();
// Sends PING to 127.0.0.1:port; true when +PONG (or -NOAUTH, from a server that
// wants a password: it is up all the same) comes back within timeout_ms.
bool redis_ping(std::uint16_t port, int timeout_ms = 200);

}  // namespace ferry::test
