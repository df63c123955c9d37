#pragma once
// Starts `ferry server` and `ferry orchestrator` as real processes for the
// end-to-end tests, on loopback with a free port and a unique control channel.

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/subprocess.h"

namespace ferry::test {

// The backend and launch method the e2e binary was asked to test
// (--backend=cpu|cuda --launch=...), set by the test's main().
struct BackendUnderTest {
  std::string backend = "cpu";
  std::string launch = "cpu";
};
BackendUnderTest& backend_under_test();

std::string ferry_bin();

class FerryServer {
 public:
  // Extra flags go after the defaults (-p 0 --cpu 0 ...), so they win. With
  // as_user, it runs as that uid (see can_run_as_other_users()).
  explicit FerryServer(std::vector<std::string> extra = {}, int threads = 1,
                       std::optional<uid_t> as_user = std::nullopt);
  ~FerryServer();
  std::uint16_t port() const { return port_; }
  const std::string& channel() const { return channel_; }
  Subprocess& process() { return proc_; }
  std::string log() const;  // what it wrote to stderr so far

 private:
  std::string channel_;
  std::string dir_;
  std::uint16_t port_ = 0;
  Subprocess proc_;
};

class FerryOrchestrator {
 public:
  FerryOrchestrator(const std::string& channel, std::vector<std::string> extra = {}, int threads = 1,
                    std::optional<uid_t> as_user = std::nullopt);
  ~FerryOrchestrator();
  Subprocess& process() { return proc_; }
  std::string log() const;

 private:
  std::string log_path_;
  Subprocess proc_;
};

// `ferry http` on a free port with the backend under test (cpu, or cuda with
// its launch method), unpinned; extra flags go last, so they win. The
// constructor returns once it serves.
class FerryHttp {
 public:
  explicit FerryHttp(std::vector<std::string> extra = {}, int threads = 1);
  ~FerryHttp();
  std::uint16_t port() const { return port_; }
  Subprocess& process() { return proc_; }
  std::string log() const;

 private:
  std::string dir_;
  std::uint16_t port_ = 0;
  Subprocess proc_;
};

// Flags every FerryAgent gets after its defaults (the xfer e2e binary's
// --copy=kernel becomes {"--copy", "kernel"}), set by the test's main().
std::vector<std::string>& agent_flags_under_test();

// `ferry agent` on a unique abstract socket, with the given --tier flags (and
// any extra flags); the constructor returns once it accepts applications.
class FerryAgent {
 public:
  explicit FerryAgent(std::vector<std::string> tiers, std::vector<std::string> extra = {});
  ~FerryAgent();
  const std::string& endpoint() const { return endpoint_; }
  Subprocess& process() { return proc_; }
  std::string log() const;
  // Stops it with SIGTERM (a clean shutdown) and starts it again with the same flags.
  void restart();

 private:
  void start();
  std::vector<std::string> argv_;
  std::string endpoint_;
  std::string dir_;
  Subprocess proc_;
};

// Polls done() every 5 ms until it is true; false after timeout_s.
bool wait_until(const std::function<bool()>& done, double timeout_s = 10);

// Polls log() until it contains text; false after timeout_s.
bool wait_for_log(const std::function<std::string()>& log, const std::string& text, double timeout_s = 10);

// Runs `ferry ARGS...` to completion; returns its exit status and combined output.
int run_ferry(const std::vector<std::string>& args, std::string* output, double timeout_s = 120);

// Whether this test may act as other users (it runs as root, and setpriv exists).
bool can_run_as_other_users();
// run_ferry as another user (uid and gid `uid`, no groups), from a copy of the
// binary that user can execute. Throws unless can_run_as_other_users().
int run_ferry_as(uid_t uid, const std::vector<std::string>& args, std::string* output, double timeout_s = 120);

}  // namespace ferry::test
