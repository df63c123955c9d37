#include "infer/model/openblas.h"

#include <dlfcn.h>

#include <string>

#include "ferry/core/status.h"

namespace ferry::infer {

const OpenBlas& openblas() {
  static const OpenBlas blas = [] {
    void* lib = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr)
      throw Error(std::string("the CPU model needs OpenBLAS (libopenblas.so.0; Debian and Ubuntu: apt-get install "
                              "libopenblas0): ") +
                  dlerror());
    OpenBlas b;
    b.sgemm = reinterpret_cast<decltype(b.sgemm)>(dlsym(lib, "cblas_sgemm"));
    b.set_num_threads = reinterpret_cast<decltype(b.set_num_threads)>(dlsym(lib, "openblas_set_num_threads"));
    b.get_num_threads = reinterpret_cast<decltype(b.get_num_threads)>(dlsym(lib, "openblas_get_num_threads"));
    b.get_parallel = reinterpret_cast<decltype(b.get_parallel)>(dlsym(lib, "openblas_get_parallel"));
    if (b.sgemm == nullptr || b.set_num_threads == nullptr || b.get_num_threads == nullptr ||
        b.get_parallel == nullptr)
      throw Error("libopenblas.so.0 lacks cblas_sgemm or OpenBLAS's thread functions");
    return b;  // the library stays loaded for the life of the process
  }();
  return blas;
}

}  // namespace ferry::infer
