#include "ferry/packet/cuda/packet_backend.cuh"

namespace ferry::packet::cuda {

WorkerMemory allocate_gpu_memory(std::size_t bytes, MemoryKind kind) {
  // 64 KiB: the GPU's page, which GPUDirect RDMA pins and a NIC maps in whole pages.
  constexpr std::size_t kAlign = 64 * 1024;
  const std::size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  WorkerMemory m;
  m.bytes = rounded;
  if (kind == MemoryKind::Host) {
    // Pinned, so a NIC may DMA into it, and mapped, so kernels reach it over PCIe.
    FERRY_CUDA_CHECK(cudaHostAlloc(&m.host, rounded, cudaHostAllocMapped | cudaHostAllocPortable));
    FERRY_CUDA_CHECK(cudaHostGetDevicePointer(&m.worker, m.host, 0));
    m.owner = std::shared_ptr<void>(m.host, [](void* p) { cudaFreeHost(p); });
  } else {
    FERRY_CUDA_CHECK(cudaMalloc(&m.worker, rounded));
    m.owner = std::shared_ptr<void>(m.worker, [](void* p) { cudaFree(p); });
  }
  return m;
}

}  // namespace ferry::packet::cuda
