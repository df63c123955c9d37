#pragma once
// What the kernel says about a process under test (/proc/PID/...): how much CPU
// it used, its peak memory and its open descriptors, for tests that check a
// service neither spins nor grows under abuse.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace ferry::test {

// User plus system time, in clock ticks (sysconf(_SC_CLK_TCK) a second).
std::uint64_t cpu_ticks(pid_t pid);
// Peak resident memory (VmHWM), KiB.
std::uint64_t peak_rss_kib(pid_t pid);
// Resident memory now (VmRSS), KiB; 0 once the process is gone.
std::uint64_t rss_kib(pid_t pid);
std::size_t open_fds(pid_t pid);

}  // namespace ferry::test
