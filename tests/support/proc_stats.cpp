#include "support/proc_stats.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace ferry::test {

std::uint64_t cpu_ticks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Fields after the command name, which may itself hold spaces and parentheses.
  std::istringstream fields(s.substr(s.rfind(')') + 2));
  std::string f;
  std::uint64_t utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::stoull(f);
    if (i == 15) stime = std::stoull(f);
  }
  return utime + stime;
}

namespace {

std::uint64_t status_kib(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field, 0) == 0) return std::stoull(line.substr(field.size()));
  return 0;
}

}  // namespace

std::uint64_t peak_rss_kib(pid_t pid) { return status_kib(pid, "VmHWM:"); }

std::uint64_t rss_kib(pid_t pid) { return status_kib(pid, "VmRSS:"); }

std::size_t open_fds(pid_t pid) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) ++n;
  return n;
}

}  // namespace ferry::test
