#pragma once
// Shared memory handed to another process must keep its size while the other
// process maps it: a peer that shrinks a memfd under someone else's mapping
// kills them with SIGBUS on the next access. So every memfd Ferry hands over is
// sealed against shrinking, and every memfd Ferry maps from a peer must carry
// that seal (seals can be added but never removed: F_ADD_SEALS(2)).

#include <cstddef>
#include <string>

namespace ferry {

// A memfd of `size` bytes that can be sealed (MFD_ALLOW_SEALING | MFD_CLOEXEC),
// sized and sealed with F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL. Throws ferry::Error.
int create_sealed_memfd(const char* name, std::size_t size);

// Checks a descriptor received from a peer before it is mapped: it must be a
// memfd that can no longer shrink. Returns its size; throws ferry::Error naming
// `what` and the missing seal otherwise (the caller still owns fd).
std::size_t require_sealed_memfd(int fd, const std::string& what);

}  // namespace ferry
