#include "xfer/agent/guarded_access.h"

#include <atomic>
#include <csetjmp>
#include <csignal>
#include <mutex>

namespace ferry::xfer::agent::detail {
namespace {

thread_local sigjmp_buf* t_jump = nullptr;
struct sigaction g_previous {};

void on_sigbus(int sig, siginfo_t* info, void* /*context*/) {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  // A fault (si_code > 0, not a SIGBUS someone sent) inside a guarded access.
  if (sigjmp_buf* jump = t_jump; jump != nullptr && info != nullptr && info->si_code > 0) siglongjmp(*jump, 1);
  // Anything else gets the previous action, as without us: a fault runs its
  // instruction again and meets it; a sent signal is sent again.
  sigaction(SIGBUS, &g_previous, nullptr);
  if (info == nullptr || info->si_code <= 0) raise(sig);
}

void install() {
  struct sigaction sa {};
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, &g_previous);
}

}  // namespace

bool run_guarded(void (*fn)(void*), void* arg) noexcept {
  static std::once_flag installed;
  std::call_once(installed, install);
  sigjmp_buf jump;
  // 1: the signal mask is saved and restored by the jump. The kernel (or a
  // sanitizer's wrapper of the handler) may block signals while the handler
  // runs, and the jump leaves it without sigreturn.
  if (sigsetjmp(jump, 1) != 0) {
    t_jump = nullptr;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    return false;
  }
  t_jump = &jump;
  std::atomic_signal_fence(std::memory_order_seq_cst);
  fn(arg);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_jump = nullptr;
  return true;
}

}  // namespace ferry::xfer::agent::detail
