#include "support/ferry_processes.h"

#include <unistd.h>

#include <csignal>

#include <atomic>
#include <cstdlib>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "support/read_file.h"

namespace ferry::test {
namespace {

std::string unique_suffix() {
  static std::atomic<int> counter{0};
  return std::to_string(getpid()) + "-" + std::to_string(counter++);
}

// Children inherit the test's stderr; redirect it through a shell-free trick:
// spawn `sh -c 'exec "$@" 2>LOG' -- argv...` so each log is readable by tests.
Subprocess spawn_logged(std::vector<std::string> argv, const std::string& log_path) {
  std::vector<std::string> wrapped = {"/bin/sh", "-c", "exec \"$@\" 2>\"$0\"", log_path};
  wrapped.insert(wrapped.end(), argv.begin(), argv.end());
  return Subprocess::spawn(wrapped);
}

}  // namespace

BackendUnderTest& backend_under_test() {
  static BackendUnderTest b;
  return b;
}

// FERRY_BIN in the environment overrides the build path (binaries carried to another machine).
std::string ferry_bin() {
  const char* env = std::getenv("FERRY_BIN");
  return env != nullptr ? env : FERRY_BIN;
}

bool can_run_as_other_users() { return geteuid() == 0 && std::filesystem::exists("/usr/bin/setpriv"); }

namespace {

// The build tree may lie where other users cannot reach (a clone under /root):
// they run a copy in a directory everyone can read, removed when the test exits.
class BinaryForEveryone {
 public:
  BinaryForEveryone() : dir_(std::filesystem::temp_directory_path() / ("ferry-shared-bin-" + unique_suffix())) {
    std::filesystem::create_directories(dir_);
    std::filesystem::permissions(dir_, std::filesystem::perms::all & ~std::filesystem::perms::group_write &
                                           ~std::filesystem::perms::others_write);
    std::filesystem::copy_file(ferry_bin(), path(), std::filesystem::copy_options::overwrite_existing);
    std::filesystem::permissions(path(), std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                             std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                                             std::filesystem::perms::others_exec);
  }
  BinaryForEveryone(const BinaryForEveryone&) = delete;
  BinaryForEveryone& operator=(const BinaryForEveryone&) = delete;
  ~BinaryForEveryone() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::string path() const { return (dir_ / "ferry").string(); }

 private:
  std::filesystem::path dir_;
};

const std::string& ferry_bin_for_everyone() {
  static const BinaryForEveryone copy;
  static const std::string bin = copy.path();
  return bin;
}

// The argv that runs ferry: as this process's user, or as uid and gid
// `as_user` with no groups (a copy of the binary that user can execute).
std::vector<std::string> ferry_command(std::optional<uid_t> as_user) {
  if (!as_user) return {ferry_bin()};
  if (!can_run_as_other_users()) throw std::runtime_error("running ferry as another user needs root and setpriv");
  const std::string id = std::to_string(*as_user);
  return {"/usr/bin/setpriv", "--reuid=" + id, "--regid=" + id, "--clear-groups", ferry_bin_for_everyone()};
}

// --cpu flags for `threads` data-path threads, spread over this machine's cores.
void add_cpu_flags(std::vector<std::string>& argv, int threads) {
  for (int i = 0; i < threads; ++i) {
    argv.push_back("--cpu");
    argv.push_back(std::to_string(i % std::max(1u, std::thread::hardware_concurrency())));
  }
}

// The port `proc` writes to port_file once it listens; throws with its log
// when it exits first or takes longer than timeout_s.
std::uint16_t wait_for_port_file(const std::string& port_file, Subprocess& proc, const std::string& what,
                                 const std::function<std::string()>& log, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(port_file);
    unsigned p = 0;
    if (in >> p && p != 0) return static_cast<std::uint16_t>(p);
    if (proc.wait(0.0)) throw std::runtime_error(what + " exited at start-up:\n" + log());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  throw std::runtime_error(what + " did not start:\n" + log());
}

}  // namespace

FerryServer::FerryServer(std::vector<std::string> extra, int threads, std::optional<uid_t> as_user) {
  channel_ = "e2e-" + unique_suffix();
  dir_ = (std::filesystem::temp_directory_path() / ("ferry-test-" + channel_)).string();
  std::filesystem::create_directories(dir_);
  if (as_user) std::filesystem::permissions(dir_, std::filesystem::perms::all);  // it writes the port file
  const std::string port_file = dir_ + "/port";
  std::vector<std::string> argv = ferry_command(as_user);
  for (const char* a : {"server", "-p", "0", "--listen-address", "127.0.0.1"}) argv.push_back(a);
  for (const std::string& a : {std::string("--port-file"), port_file, std::string("-c"), channel_}) argv.push_back(a);
  argv.push_back("--no-pin");
  add_cpu_flags(argv, threads);
  argv.insert(argv.end(), extra.begin(), extra.end());
  proc_ = spawn_logged(argv, dir_ + "/server.log");
  port_ = wait_for_port_file(port_file, proc_, "ferry server", [this] { return log(); }, 20);
}

FerryServer::~FerryServer() {
  proc_.kill();
  std::filesystem::remove_all(dir_);
}

std::string FerryServer::log() const { return read_file(dir_ + "/server.log"); }

FerryHttp::FerryHttp(std::vector<std::string> extra, int threads) {
  dir_ = (std::filesystem::temp_directory_path() / ("ferry-http-test-" + unique_suffix())).string();
  std::filesystem::create_directories(dir_);
  const std::string port_file = dir_ + "/port";
  const auto& b = backend_under_test();
  std::vector<std::string> argv = {ferry_bin(), "http", "-p", "0", "--listen-address", "127.0.0.1",
                                   "--port-file", port_file, "--no-pin", "--backend", b.backend};
  if (b.backend == "cuda") {
    argv.push_back("--launch");
    argv.push_back(b.launch);
  }
  add_cpu_flags(argv, threads);
  argv.insert(argv.end(), extra.begin(), extra.end());
  proc_ = spawn_logged(argv, dir_ + "/http.log");
  // Longer than the server's: a GPU backend starts before it serves.
  port_ = wait_for_port_file(port_file, proc_, "ferry http", [this] { return log(); }, 60);
}

FerryHttp::~FerryHttp() {
  proc_.kill();
  std::filesystem::remove_all(dir_);
}

std::string FerryHttp::log() const { return read_file(dir_ + "/http.log"); }

FerryOrchestrator::FerryOrchestrator(const std::string& channel, std::vector<std::string> extra, int threads,
                                     std::optional<uid_t> as_user) {
  log_path_ = (std::filesystem::temp_directory_path() / ("ferry-test-" + channel + "-orch-" + unique_suffix() + ".log"))
                  .string();
  const auto& b = backend_under_test();
  std::vector<std::string> argv = ferry_command(as_user);
  for (const std::string& a : {std::string("orchestrator"), std::string("-c"), channel, std::string("-t"),
                               std::to_string(threads), std::string("--backend"), b.backend, std::string("--launch"),
                               b.launch, std::string("--connect-timeout"), std::string("20")})
    argv.push_back(a);
  argv.insert(argv.end(), extra.begin(), extra.end());
  proc_ = spawn_logged(argv, log_path_);
}

FerryOrchestrator::~FerryOrchestrator() {
  proc_.kill();
  std::filesystem::remove(log_path_);
}

std::string FerryOrchestrator::log() const { return read_file(log_path_); }

std::vector<std::string>& agent_flags_under_test() {
  static std::vector<std::string> flags;
  return flags;
}

FerryAgent::FerryAgent(std::vector<std::string> tiers, std::vector<std::string> extra) {
  const std::string name = "xfer-test-" + unique_suffix();
  endpoint_ = "unix:" + name;
  dir_ = (std::filesystem::temp_directory_path() / ("ferry-test-" + name)).string();
  std::filesystem::create_directories(dir_);
  argv_ = {ferry_bin(), "agent", "--endpoint", endpoint_, "--ready-file", dir_ + "/ready", "--staging-mib", "64",
           "--queue-depth", "4", "--chunk-kib", "1024"};
  for (const auto& t : tiers) {
    argv_.push_back("--tier");
    argv_.push_back(t);
  }
  const auto& common = agent_flags_under_test();
  argv_.insert(argv_.end(), common.begin(), common.end());
  argv_.insert(argv_.end(), extra.begin(), extra.end());
  start();
}

void FerryAgent::start() {
  std::filesystem::remove(dir_ + "/ready");
  proc_ = spawn_logged(argv_, dir_ + "/agent.log");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::filesystem::exists(dir_ + "/ready")) {
      // The ready file names the endpoint as bound (a TCP port 0 becomes the real port).
      std::ifstream in(dir_ + "/ready");
      std::getline(in, endpoint_);
      return;
    }
    if (proc_.wait(0.0)) throw std::runtime_error("ferry agent exited at start-up:\n" + log());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  throw std::runtime_error("ferry agent did not start:\n" + log());
}

void FerryAgent::restart() {
  proc_.signal(SIGTERM);
  if (!proc_.wait(20)) throw std::runtime_error("ferry agent did not stop on SIGTERM:\n" + log());
  start();
}

FerryAgent::~FerryAgent() {
  proc_.kill();
  std::filesystem::remove_all(dir_);
}

std::string FerryAgent::log() const { return read_file(dir_ + "/agent.log"); }

namespace {

// Runs `ferry ARGS...` (as ferry_command(as_user)) to completion with its output in a file.
int run_to_completion(std::optional<uid_t> as_user, const std::vector<std::string>& args, std::string* output,
                      double timeout_s) {
  const std::string out_path =
      (std::filesystem::temp_directory_path() / ("ferry-run-" + unique_suffix() + ".out")).string();
  std::vector<std::string> argv;
  for (const char* a : {"/bin/sh", "-c", "exec \"$@\" >\"$0\" 2>&1"}) argv.push_back(a);
  argv.push_back(out_path);
  const std::vector<std::string> ferry = ferry_command(as_user);
  argv.insert(argv.end(), ferry.begin(), ferry.end());
  argv.insert(argv.end(), args.begin(), args.end());
  Subprocess p = Subprocess::spawn(argv);
  auto st = p.wait(timeout_s);
  if (!st) p.kill();
  if (output != nullptr) *output = read_file(out_path);
  std::filesystem::remove(out_path);
  return st ? *st : -1;
}

}  // namespace

bool wait_until(const std::function<bool()>& done, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

bool wait_for_log(const std::function<std::string()>& log, const std::string& text, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    if (log().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

int run_ferry(const std::vector<std::string>& args, std::string* output, double timeout_s) {
  return run_to_completion(std::nullopt, args, output, timeout_s);
}

int run_ferry_as(uid_t uid, const std::vector<std::string>& args, std::string* output, double timeout_s) {
  return run_to_completion(uid, args, output, timeout_s);
}

}  // namespace ferry::test
