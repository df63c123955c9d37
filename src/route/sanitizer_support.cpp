// Linked into the route's MPI executables (an object library, so it is never
// dropped). Under AddressSanitizer only: OpenMPI and PMIx dlclose() their
// plugins at MPI_Finalize, and LeakSanitizer then sees their deliberate
// one-time allocations with "<unknown module>" frames that no suppression can
// name. Keeping the plugins mapped until exit lets tests/route/lsan.supp
// suppress exactly OpenMPI's libraries, while leaks in our own code still fail
// the run.
#include "core/sanitizers.h"

#if defined(FERRY_ASAN)
extern "C" int dlclose(void*) {
  return 0;
}
#endif
