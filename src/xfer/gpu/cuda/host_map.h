#pragma once
// Where the GPU's own loads and stores reach pinned host memory. The copy
// kernel (copy_kernel.cu) dereferences the dram tier's pool and the staging
// buffer directly; on 64-bit Linux with UVA the host address usually works
// as is (cudaDevAttrCanUseHostPointerForRegisteredMem), otherwise the
// runtime hands out a different device address for each mapped range.

#include <cstddef>

namespace ferry::xfer::gpu::cuda {

// After cudaHostRegister(..., Mapped) or cudaHostAlloc(..., Mapped): records the
// range's device address (on the current device) when it differs from the host one. Throws ferry::Error
// when the runtime has no device address for it. Call before the copy threads start.
void note_mapped(void* host, std::size_t size);
void forget_mapped(void* host) noexcept;

// The address a kernel uses for `host` (host itself unless a mapped range says otherwise).
void* device_view(const void* host) noexcept;

}  // namespace ferry::xfer::gpu::cuda
