#include "support/redis_cluster.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "core/subprocess.h"
#include "support/read_file.h"

namespace ferry::test {
namespace {

// Runs argv with stdout and stderr into one file; the output. Throws when it
// does not end within timeout_s.
std::string run_capture(const std::vector<std::string>& args, double timeout_s) {
  char tmpl[] = "/tmp/ferry-cli-XXXXXX";
  const int fd = mkstemp(tmpl);
  if (fd < 0) throw std::runtime_error("mkstemp failed");
  close(fd);
  std::vector<std::string> argv = {"/bin/sh", "-c", "exec \"$@\" 2>&1", "sh"};
  argv.insert(argv.end(), args.begin(), args.end());
  Subprocess p = Subprocess::spawn(argv, tmpl);
  const bool ended = p.wait(timeout_s).has_value();
  if (!ended) p.kill();
  std::string out = read_file(tmpl);
  std::filesystem::remove(tmpl);
  if (!ended) throw std::runtime_error(args[0] + " did not end within the time given:\n" + out);
  return out;
}

bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

}  // namespace

std::string RedisCluster::find_cli() {
  if (const char* env = std::getenv("FERRY_REDIS_CLI")) return env;
  const std::string server = RedisServer::find_binary();
  if (!server.empty()) {
    const auto beside = std::filesystem::path(server).parent_path() / "redis-cli";
    if (access(beside.c_str(), X_OK) == 0) return beside.string();
  }
  return "redis-cli";
}

RedisCluster::RedisCluster(RedisClusterOptions options) : opts_(std::move(options)), cli_bin_(find_cli()) {
  const int n = opts_.primaries * (1 + opts_.replicas);
  for (int i = 0; i < n; ++i) {
    // Replicas sync at once (no diskless delay), so that one can take over soon.
    std::vector<std::string> o = {"--cluster-enabled",
                                  "yes",
                                  "--cluster-node-timeout",
                                  "1000",
                                  "--cluster-port",
                                  std::to_string(free_loopback_port()),
                                  "--repl-diskless-sync-delay",
                                  "0"};
    std::uint16_t tls_port = 0;
    if (opts_.tls) {
      tls_port = free_loopback_port();
      const std::string& d = opts_.tls_dir;
      o.insert(o.end(), {"--tls-port", std::to_string(tls_port), "--tls-cert-file", d + "/server.crt",
                         "--tls-key-file", d + "/server.key", "--tls-ca-cert-file", d + "/ca.crt",
                         "--tls-cluster", "yes", "--tls-replication", "yes", "--tls-auth-clients", "no"});
    }
    o.insert(o.end(), opts_.server_options.begin(), opts_.server_options.end());
    nodes_.push_back(std::make_unique<RedisServer>(o));
    tls_ports_.push_back(tls_port);
  }
  std::vector<std::string> create = {"--cluster", "create"};
  for (int i = 0; i < n; ++i) create.push_back("127.0.0.1:" + std::to_string(client_port(i)));
  create.insert(create.end(), {"--cluster-replicas", std::to_string(opts_.replicas), "--cluster-yes"});
  const std::string out = cli(create);
  if (!contains(out, "[OK] All 16384 slots covered"))
    throw std::runtime_error("redis-cli --cluster create failed:\n" + out);
  if (!wait_ok())
    throw std::runtime_error("the cluster did not settle within 20 s:\n" + cli({"cluster", "nodes"}));
}

RedisCluster::~RedisCluster() = default;

std::uint16_t RedisCluster::client_port(std::size_t i) const {
  return opts_.tls ? tls_ports_[i] : nodes_[i]->port();
}

std::string RedisCluster::seeds(std::size_t n) const {
  std::string s;
  for (std::size_t i = 0; i < (n == 0 ? nodes_.size() : n); ++i)
    s += (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(client_port(i));
  return s;
}

std::string RedisCluster::cli(const std::vector<std::string>& args, double timeout_s) const {
  std::vector<std::string> argv = {cli_bin_};
  argv.insert(argv.end(), opts_.cli_options.begin(), opts_.cli_options.end());
  // A command for one node goes to the first running one, unless args name one.
  if (!args.empty() && args[0] != "--cluster" && args[0] != "-p") {
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (!nodes_[i]->running()) continue;
      argv.insert(argv.end(), {"-p", std::to_string(client_port(i))});
      break;
    }
  }
  argv.insert(argv.end(), args.begin(), args.end());
  return run_capture(argv, timeout_s);
}

int RedisCluster::index_of(std::uint16_t port) const {
  for (std::size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i]->port() == port || (opts_.tls && tls_ports_[i] == port)) return static_cast<int>(i);
  return -1;
}

int RedisCluster::primary_of(unsigned slot) const {
  // CLUSTER NODES: "<id> <ip:port@bus> <flags> <primary> <ping> <pong> <epoch> <link> <slots>..."
  std::istringstream lines(cli({"cluster", "nodes"}));
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    std::string id, addr, flags, primary, ping, pong, epoch, link, range;
    f >> id >> addr >> flags >> primary >> ping >> pong >> epoch >> link;
    if (!contains(flags, "master") || contains(flags, "fail")) continue;
    while (f >> range) {
      if (range[0] == '[') continue;  // a slot being migrated or imported
      const std::size_t dash = range.find('-');
      const unsigned first = std::stoul(range.substr(0, dash));
      const unsigned last = dash == std::string::npos ? first : std::stoul(range.substr(dash + 1));
      if (slot < first || slot > last) continue;
      const std::size_t colon = addr.rfind(':'), at = addr.find('@');
      return index_of(static_cast<std::uint16_t>(std::stoul(addr.substr(colon + 1, at - colon - 1))));
    }
  }
  return -1;
}

bool RedisCluster::wait_ok(double timeout_s) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    bool ok = true;
    std::size_t first = nodes_.size();
    for (std::size_t i = 0; i < nodes_.size() && ok; ++i) {
      if (!nodes_[i]->running()) continue;
      if (first == nodes_.size()) first = i;
      const std::string port = std::to_string(client_port(i));
      ok = contains(cli({"-p", port, "cluster", "info"}), "cluster_state:ok");
      // A replica must have its primary's data: only then can it take over.
      const std::string repl = cli({"-p", port, "info", "replication"});
      ok = ok && (contains(repl, "role:master") || contains(repl, "master_link_status:up"));
    }
    if (ok && first < nodes_.size()) {
      const std::string check =
          cli({"--cluster", "check", "127.0.0.1:" + std::to_string(client_port(first))});
      if (contains(check, "[OK] All nodes agree") && contains(check, "[OK] All 16384 slots covered"))
        return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

void make_test_certificates(const std::string& dir) {
  const std::string script =
      "set -e; cd \"$0\"; "
      "ec='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes'; "
      "openssl req -x509 -new $ec -keyout ca.key -out ca.crt -days 2 -subj '/CN=Ferry test CA'; "
      "openssl req -x509 -new $ec -keyout other-ca.key -out other-ca.crt -days 2 -subj '/CN=Another CA'; "
      "openssl req -new $ec -keyout server.key -out server.csr -subj '/CN=localhost'; "
      "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > server.ext; "
      "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 "
      "-extfile server.ext; "
      "openssl req -new $ec -keyout client.key -out client.csr -subj '/CN=ferry'; "
      "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out client.crt -days 2; "
      "echo certificates-made";
  const std::string out = run_capture({"/bin/sh", "-c", script, dir}, 30);
  if (!contains(out, "certificates-made"))
    throw std::runtime_error("openssl could not make certificates:\n" + out);
}

}  // namespace ferry::test
