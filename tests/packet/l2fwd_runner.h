#pragma once
// Runs `ferry l2fwd` as a child process, as a user would, and reads back what it
// wrote: its statistics JSON and, with net_pcap, the frames it sent.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "core/subprocess.h"
#include "pcap_file.h"

namespace ferry::test {

struct L2fwdRun {
  int exit_code = -1;
  std::string output;    // stdout and stderr
  nlohmann::json stats;  // --json-out; null when it wrote none
};

class L2fwdRunner {
 public:
  L2fwdRunner();   // a fresh scratch folder
  ~L2fwdRunner();  // removes it

  const std::filesystem::path& dir() const { return dir_; }
  // ferry l2fwd <EAL args for `lcores` lcores on this machine> <eal> -- <flags> --json-out F
  L2fwdRun run(const std::vector<std::string>& eal, const std::vector<std::string>& flags, unsigned lcores = 3,
               double timeout_s = 120);
  // The same, in two steps: start it, then (after a SIGINT, say) collect what it did.
  Subprocess start(const std::vector<std::string>& eal, const std::vector<std::string>& flags, unsigned lcores = 3);
  // As run(), but with exactly these flags: no --stats-interval or --json-out added.
  L2fwdRun run_as_given(const std::vector<std::string>& eal, const std::vector<std::string>& flags,
                        double timeout_s = 120);
  L2fwdRun collect(Subprocess& child, double timeout_s);
  // Waits until the started child's output holds `text`; false after timeout_s.
  bool wait_for_output(const std::string& text, double timeout_s) const;
  // net_pcap from in.pcap to out.pcap, both in dir().
  std::vector<std::string> pcap_vdev() const;
  // The flags every pcap check adds: RX waits while the list is full rather than
  // dropping (net_pcap reads its file only as fast as it is polled), so every
  // frame comes out however slow the worker, a sanitizer or a loaded machine is.
  static std::vector<std::string> lossless(std::vector<std::string> flags);
  std::string in_pcap() const { return (dir_ / "in.pcap").string(); }
  std::string out_pcap() const { return (dir_ / "out.pcap").string(); }

 private:
  Subprocess spawn(const std::vector<std::string>& eal, const std::vector<std::string>& flags, unsigned lcores,
                   bool reporting);
  std::filesystem::path dir_;
};

// Checks that out.pcap holds exactly `sent`, in order, each MAC-swapped (or unchanged).
void expect_forwarded(const std::vector<Frame>& sent, const std::vector<Frame>& received, bool swapped);

}  // namespace ferry::test
