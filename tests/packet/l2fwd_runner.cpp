#include "l2fwd_runner.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/subprocess.h"

namespace ferry::test {

L2fwdRunner::L2fwdRunner() {
  char tmpl[] = "/tmp/ferry-l2fwd-test-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
}

L2fwdRunner::~L2fwdRunner() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::vector<std::string> L2fwdRunner::pcap_vdev() const {
  return {"--vdev", "net_pcap0,rx_pcap=" + in_pcap() + ",tx_pcap=" + out_pcap()};
}

std::vector<std::string> L2fwdRunner::lossless(std::vector<std::string> flags) {
  flags.insert(flags.end(), {"--when-full", "wait"});
  return flags;
}

L2fwdRun L2fwdRunner::run(const std::vector<std::string>& eal, const std::vector<std::string>& flags, unsigned lcores,
                          double timeout_s) {
  Subprocess child = start(eal, flags, lcores);
  return collect(child, timeout_s);
}

Subprocess L2fwdRunner::start(const std::vector<std::string>& eal, const std::vector<std::string>& flags,
                              unsigned lcores) {
  return spawn(eal, flags, lcores, true);
}

L2fwdRun L2fwdRunner::run_as_given(const std::vector<std::string>& eal, const std::vector<std::string>& flags,
                                   double timeout_s) {
  Subprocess child = spawn(eal, flags, 3, false);
  return collect(child, timeout_s);
}

Subprocess L2fwdRunner::spawn(const std::vector<std::string>& eal, const std::vector<std::string>& flags,
                              unsigned lcores, bool reporting) {
  // EAL lcores over however many CPUs this machine has (CI has 2): lcore i on CPU i mod n.
  const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  std::string map;
  for (unsigned i = 0; i < lcores; ++i) map += (i ? "," : "") + std::to_string(i) + "@" + std::to_string(i % cpus);
  const std::string json = (dir_ / "stats.json").string();
  std::filesystem::remove(json);
  // Through sh, so that stderr (the logs, and any error) lands in the same file as stdout.
  // FERRY_BIN in the environment: the binary where it was carried (the GPU machine).
  const char* bin = std::getenv("FERRY_BIN") != nullptr ? std::getenv("FERRY_BIN") : FERRY_BIN;
  std::vector<std::string> argv{"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>&1", bin, "l2fwd", "--no-huge", "-m", "512", "--no-pci", "--no-shconf",
                                "--file-prefix", "ferry-test-" + std::to_string(getpid()), "--lcores", map};
  argv.insert(argv.end(), eal.begin(), eal.end());
  argv.push_back("--");
  argv.insert(argv.end(), flags.begin(), flags.end());
  if (reporting) argv.insert(argv.end(), {"--stats-interval", "0.2", "--json-out", json});
  return Subprocess::spawn(argv, (dir_ / "stdout.txt").string());
}

L2fwdRun L2fwdRunner::collect(Subprocess& child, double timeout_s) {
  const std::string json = (dir_ / "stats.json").string();
  const std::string out = (dir_ / "stdout.txt").string();
  L2fwdRun r;
  const auto code = child.wait(timeout_s);
  if (!code) {
    child.kill();
    ADD_FAILURE() << "ferry l2fwd did not finish within " << timeout_s << " s";
  }
  r.exit_code = code.value_or(-1);
  std::ifstream o(out);
  std::stringstream ss;
  ss << o.rdbuf();
  r.output = ss.str();
  if (r.exit_code != 0) std::fprintf(stderr, "ferry l2fwd exited %d:\n%s\n", r.exit_code, r.output.c_str());
  std::ifstream j(json);
  if (j) r.stats = nlohmann::json::parse(j, nullptr, false);
  return r;
}

bool L2fwdRunner::wait_for_output(const std::string& text, double timeout_s) const {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream o(dir_ / "stdout.txt");
    std::stringstream ss;
    ss << o.rdbuf();
    if (ss.str().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void expect_forwarded(const std::vector<Frame>& sent, const std::vector<Frame>& received, bool swapped) {
  ASSERT_EQ(received.size(), sent.size()) << "every frame sent must come back, no more";
  std::size_t bad = 0;
  for (std::size_t i = 0; i < sent.size(); ++i) {
    const Frame want = swapped ? mac_swapped(sent[i]) : sent[i];
    if (received[i] != want && ++bad <= 5)
      ADD_FAILURE() << "frame " << i << " (" << sent[i].size() << " bytes) differs from what was expected";
  }
  EXPECT_EQ(bad, 0u);
}

}  // namespace ferry::test
