#include "xfer/agent/owner_credentials.h"

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace ferry::xfer::agent {
namespace {

bool has_effective(int cap) noexcept {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  return (data[cap / 32].effective & (1u << (cap % 32))) != 0;
}

// The raw system calls: they change the calling thread's credentials only.
long set_thread_uids(uid_t ruid, uid_t euid) noexcept { return ::syscall(SYS_setresuid, ruid, euid, -1); }
long set_thread_gids(gid_t rgid, gid_t egid) noexcept { return ::syscall(SYS_setresgid, rgid, egid, -1); }

}  // namespace

bool agent_traces_anyone() noexcept { return has_effective(CAP_SYS_PTRACE); }

bool agent_may_act_as_others() noexcept { return has_effective(CAP_SETUID) && has_effective(CAP_SETGID); }

AsOwner::AsOwner(uid_t uid, gid_t gid) noexcept {
  uid_t suid;
  gid_t sgid;
  if (getresuid(&ruid_, &euid_, &suid) != 0 || getresgid(&rgid_, &egid_, &sgid) != 0) return;
  // Gids first, while the thread may still change them. The saved ids stay
  // the agent's: they are what lets the thread change back.
  if (set_thread_gids(gid, gid) != 0) return;
  if (set_thread_uids(uid, uid) != 0) {
    if (set_thread_gids(rgid_, egid_) != 0) std::abort();
    return;
  }
  ok_ = true;
}

AsOwner::~AsOwner() {
  if (!ok_) return;
  if (set_thread_uids(ruid_, euid_) != 0 || set_thread_gids(rgid_, egid_) != 0) {
    std::fputs("ferry agent: a copy thread could not take the agent's credentials back; stopping\n", stderr);
    std::abort();
  }
}

}  // namespace ferry::xfer::agent
