#include "route/fatal.h"

#include <unistd.h>

#include "core/log.h"

namespace ferry::route::detail {

void fatal(const std::string& what) {
  int world_rank = -1, initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  ferry::log::app().critical("ferry route: world rank {} (pid {}): {}; aborting the MPI job", world_rank,
                             static_cast<int>(getpid()), what);
  ferry::log::app().flush();
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 70);
  _exit(70);
}

void check_mpi(int rc, const char* call, const char* context) {
  if (rc == MPI_SUCCESS) [[likely]]
    return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  fatal(std::string(call) + " failed (" + std::string(text, static_cast<std::size_t>(len)) + ") while " +
        context);
}

}  // namespace ferry::route::detail
