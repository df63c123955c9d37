#pragma once
// How a TCP session's memory reaches the agent without a path (docs/security.md).
// TCP cannot carry descriptors, so the application names its process and the
// memfd's number there, and the agent takes that descriptor from the process
// with pidfd_getfd(2), after checking that the process runs, wholly, as the uid
// that owns the TCP connection (which the kernel's socket table told the agent).
// The agent thus gets the very open file the application holds, with its access
// mode, and only from a process of the connection's own user: nothing it could
// not map by SCM_RIGHTS over the Unix endpoint.

#include <sys/types.h>

namespace ferry::xfer::agent {

// The descriptor `fd` of process `pid`, duplicated into the agent, once `pid`'s
// real, effective, saved and filesystem uids are all `uid` (checked before and
// after taking it). Throws ferry::Error with a reason for the application.
int take_owner_fd(pid_t pid, int fd, uid_t uid);

// A pidfd of process `pid` once it is the connection's own: its real,
// effective, saved and filesystem uids are all `uid`, and it is not
// dumpable-restricted (owner_unrestricted()). Throws ferry::Error naming
// `context` and the reason.
int open_owner_process(pid_t pid, uid_t uid, const char* context);
// Whether process `pid` runs wholly as `uid` and the kernel lets its user
// trace it: a process that gained privilege (a setuid or file-capability
// exec) is left non-dumpable, and its /proc entries then belong to root.
bool owner_unrestricted(pid_t pid, uid_t uid);
// Whether the kernel lets this process trace every other one (CAP_SYS_PTRACE
// in its effective set): then it checks none of the agent's copies itself.
bool agent_traces_anyone() noexcept;
// Whether the process behind a pidfd still runs (a pid can be reused; a pidfd
// cannot).
bool process_alive(int pidfd) noexcept;

}  // namespace ferry::xfer::agent
