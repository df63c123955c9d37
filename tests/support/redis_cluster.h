#pragma once
// A real Redis Cluster for tests: redis-servers (support/redis_server.h) in
// cluster mode on free loopback ports, joined by `redis-cli --cluster create`,
// each with a cluster bus port of its own (the default, port + 10000, may not
// exist for a high port). The constructor returns once every node reports
// cluster_state:ok and `redis-cli --cluster check` sees all slots covered and
// agreed, and every replica in sync with its primary. Nodes are killed (SIGKILL) when the object goes.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "support/redis_server.h"

namespace ferry::test {

struct RedisClusterOptions {
  int primaries = 3;
  int replicas = 1;                         // per primary
  std::vector<std::string> server_options;  // more redis-server flags for every node
  std::vector<std::string> cli_options;     // redis-cli's flags to reach the nodes (-a, --user, --tls ...)
  bool tls = false;     // nodes listen on a TLS port too (tls_port()); the cluster is made on those
  std::string tls_dir;  // with tls: ca.crt, server.crt, server.key there
};

class RedisCluster {
 public:
  // Throws std::runtime_error when a node does not start or the cluster does
  // not form within 20 s (with redis-cli's output).
  explicit RedisCluster(RedisClusterOptions options);
  ~RedisCluster();

  std::size_t size() const { return nodes_.size(); }
  RedisServer& node(std::size_t i) { return *nodes_[i]; }
  // The port clients use: the TLS port for a TLS cluster.
  std::uint16_t client_port(std::size_t i) const;
  // "127.0.0.1:p0,127.0.0.1:p1,..." of the first `n` nodes (0: all).
  std::string seeds(std::size_t n = 0) const;
  // Runs redis-cli with the cluster's options and `args`; its output (stdout
  // and stderr). Throws when it does not end within timeout_s.
  std::string cli(const std::vector<std::string>& args, double timeout_s = 30) const;
  // The index of the node whose client port is `port`; -1 when none.
  int index_of(std::uint16_t port) const;
  // The primary (node index) serving `slot`, asked of a running node.
  int primary_of(unsigned slot) const;
  // Waits until every running node says cluster_state:ok, every running replica
  // is in sync, and --cluster check passes; false after timeout_s.
  bool wait_ok(double timeout_s = 20) const;
  // The redis-cli that was found (FERRY_REDIS_CLI, else beside redis-server, else PATH).
  static std::string find_cli();

 private:
  RedisClusterOptions opts_;
  std::string cli_bin_;
  std::vector<std::unique_ptr<RedisServer>> nodes_;
  std::vector<std::uint16_t> tls_ports_;
};

// Writes a CA and a server certificate for 127.0.0.1 and "localhost" into dir
// (ca.crt, ca.key, server.crt, server.key), and a second, unrelated CA
// (other-ca.crt), with openssl. Throws std::runtime_error when openssl fails.
void make_test_certificates(const std::string& dir);

}  // namespace ferry::test
