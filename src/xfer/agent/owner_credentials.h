#pragma once
// An agent that may trace any process (root, or CAP_SYS_PTRACE) gets no check
// from the kernel when it copies an application's memory: a process that ran
// a setuid program after registering would be read and written as if it were
// still the application. So such an agent makes each copy as the memory's
// owner: the calling thread takes the owner's uid and gid, the kernel checks
// the copy exactly as it would for that user (against the process as it is at
// that instant, under the kernel's own lock against exec), and the thread
// takes the agent's back. Only the calling thread changes: the system calls are
// made directly, not through glibc, which would change every thread.
//
// Side effect: a credential change leaves the agent's process non-dumpable
// (no core dumps, as the kernel's fs.suid_dumpable decides).

#include <sys/types.h>

namespace ferry::xfer::agent {

// Whether the kernel lets this process trace every other one (CAP_SYS_PTRACE
// in its effective set).
bool agent_traces_anyone() noexcept;
// Whether this process may take another user's uid and gid on a thread
// (CAP_SETUID and CAP_SETGID in its effective set).
bool agent_may_act_as_others() noexcept;

class AsOwner {
 public:
  // Switches the calling thread to (uid, gid); ok() tells whether it did.
  AsOwner(uid_t uid, gid_t gid) noexcept;
  // Switches back, and terminates the process if that fails: a thread left
  // with a user's credentials would go on writing the agent's files as them.
  ~AsOwner();
  AsOwner(const AsOwner&) = delete;
  AsOwner& operator=(const AsOwner&) = delete;
  bool ok() const noexcept { return ok_; }

 private:
  uid_t ruid_, euid_;
  gid_t rgid_, egid_;
  bool ok_ = false;
};

}  // namespace ferry::xfer::agent
