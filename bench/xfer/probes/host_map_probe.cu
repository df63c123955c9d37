// A one-off probe (not part of the build): does the kind of pinned host memory, or
// where the 64 KiB blocks land in it, limit SM stores into mapped host memory?
// It copies 256 MiB of 64 KiB blocks from device memory into a 4 GiB mapped host
// region, contiguous or scattered at random, for cudaHostAlloc memory, an mmap
// with transparent huge pages registered by cudaHostRegister (the agent's dram
// pool), and the same with 4 KiB pages. Results: docs/bench/xfer.md.
//   nvcc -O2 -arch=sm_90 -o host_map_probe bench/xfer/probes/host_map_probe.cu && ./host_map_probe
#include <cuda_runtime.h>
#include <sys/mman.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <random>
#include <algorithm>
__global__ void copy_blocks(const uint4* src, uint4* const* dst, int nblocks, int block_vecs) {
  const int warps = gridDim.x * blockDim.x / 32, lane = threadIdx.x & 31;
  for (int b = (blockIdx.x * blockDim.x + threadIdx.x) / 32; b < nblocks; b += warps) {
    const uint4* s = src + (size_t)b * block_vecs; uint4* d = dst[b];
    for (int i = lane; i < block_vecs; i += 32) __stcs(d + i, __ldcs(s + i));
  }
}
int main() {
  const size_t block = 64 << 10, total = 256 << 20, pool = size_t(4) << 30;
  const int nb = total / block;
  uint4* src; cudaMalloc(&src, total); cudaMemset(src, 1, total);
  uint4** dst_d; cudaMalloc(&dst_d, nb * sizeof(void*));
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  auto run = [&](const char* what, char* host, bool scattered) {
    std::vector<uint4*> d(nb);
    std::vector<size_t> slots(pool / block); for (size_t i = 0; i < slots.size(); ++i) slots[i] = i;
    if (scattered) { std::mt19937 r(1); std::shuffle(slots.begin(), slots.end(), r); }
    for (int b = 0; b < nb; ++b) { char* p = host + slots[b] * block; uint4* dp; cudaHostGetDevicePointer((void**)&dp, p, 0); d[b] = dp; }
    cudaMemcpy(dst_d, d.data(), nb * sizeof(void*), cudaMemcpyHostToDevice);
    cudaEvent_t a, e; cudaEventCreate(&a); cudaEventCreate(&e);
    copy_blocks<<<2 * sms, 256>>>(src, dst_d, nb, block / 16); cudaDeviceSynchronize();
    cudaEventRecord(a);
    for (int it = 0; it < 10; ++it) copy_blocks<<<2 * sms, 256>>>(src, dst_d, nb, block / 16);
    cudaEventRecord(e); cudaEventSynchronize(e); float ms; cudaEventElapsedTime(&ms, a, e);
    printf("%-40s %s: %.1f GB/s (%s)\n", what, scattered ? "scattered" : "contiguous", 10.0 * total / ms / 1e6, cudaGetErrorString(cudaGetLastError()));
  };
  char* ha; cudaHostAlloc((void**)&ha, pool, cudaHostAllocMapped | cudaHostAllocPortable);
  run("cudaHostAlloc 4 GiB", ha, false); run("cudaHostAlloc 4 GiB", ha, true);
  cudaFreeHost(ha);
  char* hm = (char*)mmap(nullptr, pool, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  madvise(hm, pool, MADV_HUGEPAGE);
  cudaHostRegister(hm, pool, cudaHostRegisterMapped | cudaHostRegisterPortable);
  run("mmap+THP+cudaHostRegister 4 GiB", hm, false); run("mmap+THP+cudaHostRegister 4 GiB", hm, true);
  cudaHostUnregister(hm); munmap(hm, pool);
  char* h4 = (char*)mmap(nullptr, pool, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  madvise(h4, pool, MADV_NOHUGEPAGE);
  cudaHostRegister(h4, pool, cudaHostRegisterMapped | cudaHostRegisterPortable);
  run("mmap 4K pages+cudaHostRegister 4 GiB", h4, false); run("mmap 4K pages+cudaHostRegister 4 GiB", h4, true);
}
