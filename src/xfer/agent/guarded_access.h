#pragma once
// Reads and writes of memory that can lose its pages under the agent: a
// mapping of an application's shared file, which the application may shrink
// at any time (POSIX shm cannot be sealed). Touching a page past the file's
// new end raises SIGBUS; inside run_guarded() that ends the call with false
// instead of the agent. Kernel copies (pread/pwrite into or out of such a
// mapping) need no guard: they fail with EFAULT.
//
// What runs guarded must take no lock and allocate nothing (it may be
// abandoned half way, by a jump out of the signal handler): hashing and
// memcpy. A SIGBUS anywhere else, or one that a process sent rather than a
// fault, gets the action it had before. Each call saves and restores the
// signal mask (one system call), which the jump needs.

namespace ferry::xfer::agent {

namespace detail {
bool run_guarded(void (*fn)(void*), void* arg) noexcept;
}

// Runs fn(); false when it touched memory that was gone.
template <class F>
bool run_guarded(F&& fn) noexcept {
  return detail::run_guarded([](void* f) { (*static_cast<F*>(f))(); }, &fn);
}

}  // namespace ferry::xfer::agent
