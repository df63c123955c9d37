// The transfer engine's GPU operations on the CUDA runtime (see xfer/gpu.h).
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ferry/worker/cuda/cuda_check.h"
#include "xfer/gpu/cuda/copy_kernel.h"
#include "xfer/gpu/cuda/host_map.h"
#include "xfer/gpu/gpu.h"

namespace ferry::xfer::gpu {
namespace {

// The allocation that contains ptr: caching allocators (PyTorch's) hand out
// blocks inside larger cudaMalloc allocations, and IPC handles name allocations.
// The runtime has no call for this; the driver's cuMemGetAddressRange does, and
// is reached without linking libcuda.
void allocation_range(const void* ptr, CUdeviceptr* base, std::size_t* size) {
  using Fn = CUresult (*)(CUdeviceptr*, std::size_t*, CUdeviceptr);
  static Fn fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    FERRY_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &p, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || p == nullptr) throw Error("the CUDA driver has no cuMemGetAddressRange");
    return reinterpret_cast<Fn>(p);
  }();
  const CUresult r = fn(base, size, reinterpret_cast<CUdeviceptr>(ptr));
  if (r != CUDA_SUCCESS)
    throw Error("cuMemGetAddressRange failed (" + std::to_string(r) + "): is this a cudaMalloc pointer?");
}

}  // namespace

bool available() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

int device_at_pci(const std::string& bus_id) {
  int device = -1;
  if (cudaDeviceGetByPCIBusId(&device, bus_id.c_str()) != cudaSuccess) {
    (void)cudaGetLastError();
    throw Error("no CUDA device at PCI address " + bus_id + " (nvidia-smi --query-gpu=pci.bus_id lists them)");
  }
  return device;
}

void* alloc_device(std::size_t size, int device) {
  FERRY_CUDA_CHECK(cudaSetDevice(device));
  void* p = nullptr;
  FERRY_CUDA_CHECK(cudaMalloc(&p, size));
  return p;
}

void free_device(void* p, int device) noexcept {
  if (p == nullptr) return;
  cudaSetDevice(device);
  cudaFree(p);
}

void copy_to_device(void* dst, const void* src, std::size_t n, int device) {
  FERRY_CUDA_CHECK(cudaSetDevice(device));
  FERRY_CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
  // From pageable memory cudaMemcpy may return once the bytes are staged, before
  // the DMA has written them: work this process queues later is ordered after it,
  // but the agent, another process, may read the buffer at once. Wait for it.
  FERRY_CUDA_CHECK(cudaStreamSynchronize(nullptr));
}

void copy_from_device(void* dst, const void* src, std::size_t n, int device) {
  FERRY_CUDA_CHECK(cudaSetDevice(device));
  FERRY_CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost));
}

IpcExport export_ipc(const void* ptr) {
  cudaPointerAttributes attr{};
  FERRY_CUDA_CHECK(cudaPointerGetAttributes(&attr, ptr));
  if (attr.type != cudaMemoryTypeDevice)
    throw Error("register_memory(Vram): the address is not device memory from cudaMalloc");
  IpcExport e;
  e.device = attr.device;
  FERRY_CUDA_CHECK(cudaSetDevice(attr.device));
  CUdeviceptr base = 0;
  std::size_t size = 0;
  allocation_range(ptr, &base, &size);
  cudaIpcMemHandle_t h{};
  FERRY_CUDA_CHECK(cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(base)));
  static_assert(sizeof(h) == kIpcHandleSize);
  std::memcpy(e.handle, &h, kIpcHandleSize);
  e.offset = reinterpret_cast<std::uint64_t>(ptr) - base;
  e.alloc_size = size;
  return e;
}

void* open_ipc(const std::uint8_t (&handle)[kIpcHandleSize], int device) {
  FERRY_CUDA_CHECK(cudaSetDevice(device));
  cudaIpcMemHandle_t h{};
  std::memcpy(&h, handle, kIpcHandleSize);
  void* p = nullptr;
  FERRY_CUDA_CHECK(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess));
  return p;
}

void close_ipc(void* base, int device) noexcept {
  cudaSetDevice(device);
  cudaIpcCloseMemHandle(base);
}

void* alloc_pinned(std::size_t size) {
  void* p = nullptr;
  FERRY_CUDA_CHECK(cudaHostAlloc(&p, size, cudaHostAllocPortable | cudaHostAllocMapped));
  cuda::note_mapped(p, size);
  return p;
}

void free_pinned(void* p) noexcept {
  if (p == nullptr) return;
  cuda::forget_mapped(p);
  cudaFreeHost(p);
}

void register_host(void* p, std::size_t size) {
  FERRY_CUDA_CHECK(cudaHostRegister(p, size, cudaHostRegisterPortable | cudaHostRegisterMapped));
  cuda::note_mapped(p, size);
}

void unregister_host(void* p) noexcept {
  cuda::forget_mapped(p);
  cudaHostUnregister(p);
}

Lanes::Lanes(int device, int count, CopyMethod method, std::size_t max_segment_bytes, const std::uint8_t* xxh3_secret)
    : device_(device), method_(method), count_(count) {
  FERRY_CUDA_CHECK(cudaSetDevice(device));
  if (method == CopyMethod::Kernel || method == CopyMethod::Auto) {
    if (max_segment_bytes == 0) throw Error("Lanes: the kernel copy method needs max_segment_bytes");
    auto* k = new std::vector<std::unique_ptr<cuda::KernelLane>>();
    kernel_lanes_ = k;
    for (int i = 0; i < count * kHashedSlots; ++i)
      k->push_back(std::make_unique<cuda::KernelLane>(device, max_segment_bytes, xxh3_secret));
  }
  auto* s = new cudaStream_t[count];
  for (int i = 0; i < count; ++i) FERRY_CUDA_CHECK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
  streams_ = s;
  auto* e = new cudaEvent_t[static_cast<std::size_t>(count) * kMarks];
  for (int i = 0; i < count * kMarks; ++i) FERRY_CUDA_CHECK(cudaEventCreateWithFlags(&e[i], cudaEventDisableTiming));
  events_ = e;
  next_mark_ = new std::uint64_t[count]();
}

Lanes::~Lanes() {
  auto* s = static_cast<cudaStream_t*>(streams_);
  cudaSetDevice(device_);
  for (int i = 0; i < count_; ++i) cudaStreamDestroy(s[i]);
  delete[] s;
  auto* e = static_cast<cudaEvent_t*>(events_);
  for (int i = 0; i < count_ * kMarks; ++i) cudaEventDestroy(e[i]);
  delete[] e;
  delete[] next_mark_;
  delete static_cast<std::vector<std::unique_ptr<cuda::KernelLane>>*>(kernel_lanes_);
}

namespace {
// The text of a failed copy call, composed where it fails (ferry/xfer/fault.h).
std::string copy_error(const char* what, cudaError_t err) {
  return std::string(what) + " failed: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
}
const char* direction(bool to_device) noexcept { return to_device ? "host-to-device copy" : "device-to-host copy"; }
}  // namespace

XferStatus Lanes::start(int lane, std::span<const Segment> segs, bool to_device, Fault& fault) noexcept {
  if (segs.empty()) return XferStatus::Ok;
  cudaStream_t stream = static_cast<cudaStream_t*>(streams_)[lane];
  cudaSetDevice(device_);
  cudaError_t err = cudaSuccess;
  if ((method_ == CopyMethod::Batch || method_ == CopyMethod::Auto) && segs.size() > 1) {
    // One driver call for the whole gather/scatter: the per-copy launch cost of a
    // cudaMemcpyAsync loop is what holds small blocks to a third of PCIe.
    thread_local std::vector<void*> dsts;
    thread_local std::vector<const void*> srcs;
    thread_local std::vector<std::size_t> sizes;
    dsts.clear();
    srcs.clear();
    sizes.clear();
    for (const auto& s : segs) {
      dsts.push_back(s.dst);
      srcs.push_back(s.src);
      sizes.push_back(s.len);
    }
    cudaMemcpyAttributes attr{};
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    attr.srcLocHint.type = to_device ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    attr.dstLocHint.type = to_device ? cudaMemLocationTypeDevice : cudaMemLocationTypeHost;
    attr.srcLocHint.id = to_device ? 0 : device_;
    attr.dstLocHint.id = to_device ? device_ : 0;
    std::size_t attr_idx = 0;
    err = cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), segs.size(), &attr, &attr_idx, 1, stream);
  } else {
    for (const auto& s : segs) {
      err = cudaMemcpyAsync(s.dst, s.src, s.len, cudaMemcpyDefault, stream);
      if (err != cudaSuccess) break;
    }
  }
  if (err != cudaSuccess) return fault.raise(XferStatus::IoError, copy_error(direction(to_device), err));
  return XferStatus::Ok;
}

std::uint64_t Lanes::mark(int lane) noexcept {
  const std::uint64_t ticket = next_mark_[lane]++;
  cudaEvent_t ev = static_cast<cudaEvent_t*>(events_)[lane * kMarks + static_cast<int>(ticket % kMarks)];
  cudaEventRecord(ev, static_cast<cudaStream_t*>(streams_)[lane]);
  return ticket;
}

// wait and finish do not know the direction of what they wait for: "copy".
XferStatus Lanes::wait(int lane, std::uint64_t ticket, Fault& fault) noexcept {
  cudaEvent_t ev = static_cast<cudaEvent_t*>(events_)[lane * kMarks + static_cast<int>(ticket % kMarks)];
  const cudaError_t err = cudaEventSynchronize(ev);
  if (err != cudaSuccess) return fault.raise(XferStatus::IoError, copy_error("copy", err));
  return XferStatus::Ok;
}

XferStatus Lanes::finish(int lane, Fault& fault) noexcept {
  const cudaError_t err = cudaStreamSynchronize(static_cast<cudaStream_t*>(streams_)[lane]);
  if (err != cudaSuccess) return fault.raise(XferStatus::IoError, copy_error("copy", err));
  return XferStatus::Ok;
}

XferStatus Lanes::copy(int lane, std::span<const Segment> segs, bool to_device, Fault& fault) noexcept {
  if (const XferStatus s = start(lane, segs, to_device, fault); s != XferStatus::Ok) return s;
  return finish(lane, fault);
}

XferStatus Lanes::copy_hashed(int lane, std::span<const Segment> segs, bool to_device, HashedCopy how,
                              std::uint64_t* sums, std::uint8_t* hashed, Fault& fault) noexcept {
  if (const XferStatus s = start_hashed(lane, 0, segs, to_device, how, fault); s != XferStatus::Ok) return s;
  return collect_hashed(lane, 0, sums, hashed, fault);
}

namespace {
// The lane's kernel buffers for `slot`; nullptr (raised) for lanes without the kernel.
cuda::KernelLane* kernel_lane(void* lanes, int lane, int slot, Fault& fault) noexcept {
  if (lanes == nullptr) {
    (void)fault.raise(XferStatus::IoError, "copy_hashed: these lanes do not use the copy kernel");
    return nullptr;
  }
  auto& k = *static_cast<std::vector<std::unique_ptr<cuda::KernelLane>>*>(lanes);
  return k[static_cast<std::size_t>(lane) * Lanes::kHashedSlots + static_cast<std::size_t>(slot)].get();
}
}  // namespace

XferStatus Lanes::start_hashed(int lane, int slot, std::span<const Segment> segs, bool to_device, HashedCopy how,
                               Fault& fault) noexcept {
  cuda::KernelLane* k = kernel_lane(kernel_lanes_, lane, slot, fault);
  if (k == nullptr) return XferStatus::IoError;
  cudaSetDevice(device_);
  cudaStream_t stream = static_cast<cudaStream_t*>(streams_)[lane];
  if (how == HashedCopy::Fused) return k->start(stream, segs, to_device, false, fault);
  // The engines' copies first, on the same stream: the hashes read what they wrote
  // (a pull), and the kernel's completion event then covers the copies too.
  // Segments the caller cut (a block's checksum leaves) go to the engines whole.
  thread_local std::vector<Segment> merged;
  merged.clear();
  for (const Segment& s : segs) {
    if (!merged.empty()) {
      Segment& m = merged.back();
      if (static_cast<std::uint8_t*>(m.dst) + m.len == s.dst &&
          static_cast<const std::uint8_t*>(m.src) + m.len == s.src) {
        m.len += s.len;
        continue;
      }
    }
    merged.push_back(s);
  }
  if (const XferStatus s = start(lane, merged, to_device, fault); s != XferStatus::Ok) {
    cudaStreamSynchronize(stream);  // a part of the batch may have been queued
    return s;
  }
  if (const XferStatus s = k->start(stream, segs, to_device, true, fault); s != XferStatus::Ok) {
    cudaStreamSynchronize(stream);  // the copies are in flight on the caller's memory
    return s;
  }
  return XferStatus::Ok;
}

XferStatus Lanes::collect_hashed(int lane, int slot, std::uint64_t* sums, std::uint8_t* hashed,
                                 Fault& fault) noexcept {
  cuda::KernelLane* k = kernel_lane(kernel_lanes_, lane, slot, fault);
  if (k == nullptr) return XferStatus::IoError;
  cudaSetDevice(device_);
  return k->collect(sums, hashed, fault);
}

}  // namespace ferry::xfer::gpu
