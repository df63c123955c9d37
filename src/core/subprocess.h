#pragma once
// Child processes for `ferry demo`, the benchmarks and the end-to-end tests:
// spawned with a clean signal mask, waited for with a timeout, never leaked
// (the destructor kills and reaps a child that is still running).

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace ferry {

class Subprocess {
 public:
  Subprocess() = default;
  ~Subprocess();
  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  // Starts argv[0] (a path) with argv. stdout_path, when set, receives the
  // child's standard output. Throws ferry::Error.
  static Subprocess spawn(const std::vector<std::string>& argv, const std::string& stdout_path = "");

  // The path of the running executable (/proc/self/exe).
  static std::string self_exe();

  void signal(int sig) const;
  // Exit status (128 + signal when killed), or nullopt if still running after timeout_s.
  std::optional<int> wait(double timeout_s);
  // SIGKILL and reap.
  void kill();

  pid_t pid() const noexcept { return pid_; }
  bool running() const noexcept { return pid_ > 0 && !status_; }

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

}  // namespace ferry
