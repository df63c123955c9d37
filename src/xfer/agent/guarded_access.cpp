#include "xfer/agent/guarded_access.h"

#include <csetjmp>
#include <csignal>
#include <mutex>

namespace ferry::xfer::agent::detail {
namespace {

thread_local sigjmp_buf* t_jump = nullptr;
struct sigaction g_previous {};

void on_sigbus(int /*sig*/, siginfo_t* /*info*/, void* /*context*/) {
  if (sigjmp_buf* jump = t_jump) siglongjmp(*jump, 1);
  // Not a guarded access: put the previous action back and return, so that the
  // faulting instruction runs again and gets it (a crash, as without us).
  sigaction(SIGBUS, &g_previous, nullptr);
}

void install() {
  struct sigaction sa {};
  sa.sa_sigaction = on_sigbus;
  // SA_NODEFER: the jump leaves the handler without sigreturn, so SIGBUS must
  // not stay blocked in this thread afterwards.
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, &g_previous);
}

}  // namespace

bool run_guarded(void (*fn)(void*), void* arg) noexcept {
  static std::once_flag installed;
  std::call_once(installed, install);
  sigjmp_buf jump;
  if (sigsetjmp(jump, 0) != 0) {  // 0: no signal mask saved, so no system call here
    t_jump = nullptr;
    return false;
  }
  t_jump = &jump;
  fn(arg);
  t_jump = nullptr;
  return true;
}

}  // namespace ferry::xfer::agent::detail
