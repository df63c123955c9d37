#pragma once
// Errors the router cannot recover from once messages are moving (a peer died,
// a wait stalled, a run is corrupt, MPI failed): log one clear line naming the
// rank and the cause, then abort the whole MPI job, so that no rank is left
// waiting for a message that will never come.

#include <mpi.h>

#include <cstdint>
#include <ctime>
#include <string>

namespace ferry::route::detail {

// Logs "ferry route: <what>" (with the world rank and pid) at critical level,
// flushes, and calls MPI_Abort(MPI_COMM_WORLD, 70). Never returns.
[[noreturn]] void fatal(const std::string& what);

// Checks an MPI return code (the engine's communicators use MPI_ERRORS_RETURN):
// on failure calls fatal() with the call, the error string and `context`.
void check_mpi(int rc, const char* call, const char* context);

#define FERRY_MPI_CHECK(call, context) ::ferry::route::detail::check_mpi((call), #call, (context))

// "no quiescence round completed" or "last totals: S sent, H handled" (~0 means none yet).
inline std::string totals_text(std::uint64_t sent, std::uint64_t handled) {
  if (sent == ~0ull) return "no quiescence round completed: some rank is not taking part";
  return "last totals: " + std::to_string(sent) + " sent, " + std::to_string(handled) + " handled";
}

// Monotonic nanoseconds (clock_gettime through the vDSO: no system call).
inline std::uint64_t now_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<std::uint64_t>(ts.tv_nsec);
}

// A bounded wait: reports when no progress was made for the stall timeout.
class StallClock {
 public:
  explicit StallClock(std::uint64_t timeout_ns) noexcept : timeout_ns_(timeout_ns), since_(now_ns()) {}
  void progressed() noexcept { since_ = now_ns(); }
  bool stalled() const noexcept { return now_ns() - since_ > timeout_ns_; }
  double seconds() const noexcept { return static_cast<double>(now_ns() - since_) / 1e9; }

 private:
  std::uint64_t timeout_ns_;
  std::uint64_t since_;
};

}  // namespace ferry::route::detail
