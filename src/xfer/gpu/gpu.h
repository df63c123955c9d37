#pragma once
// The transfer engine's few GPU operations, behind a plain C++ interface so the
// rest of xfer/ compiles without nvcc. gpu_cuda.cu implements them with the CUDA
// runtime; gpu_none.cpp (CPU-only builds) reports that there is no GPU.
// Set-up calls (allocation, registration, IPC, the Lanes constructor) throw
// ferry::Error. Copy calls are on the data path (ferry/xfer/fault.h): noexcept, they
// return an XferStatus, Ok or IoError, and where a CUDA call fails they raise
// its error text into the caller's Fault.

#include <cstddef>
#include <cstdint>
#include <string>
#include <span>

#include "ferry/xfer/fault.h"

namespace ferry::xfer::gpu {

inline constexpr std::size_t kIpcHandleSize = 64;  // sizeof(cudaIpcMemHandle_t)

// A CUDA device is present and usable (false in CPU-only builds).
bool available();
// The CUDA device at a PCI address ("0000:17:00.0" or "17:00.0"); throws
// ferry::Error naming the address when no CUDA device sits there.
int device_at_pci(const std::string& bus_id);

void* alloc_device(std::size_t size, int device);
void free_device(void* p, int device) noexcept;
void copy_to_device(void* dst, const void* src, std::size_t n, int device);
void copy_from_device(void* dst, const void* src, std::size_t n, int device);

// What an application sends so the agent can open its memory.
struct IpcExport {
  std::uint8_t handle[kIpcHandleSize];
  std::uint64_t offset = 0;      // of the registered address inside its allocation
  std::uint64_t alloc_size = 0;  // of the whole allocation
  int device = 0;
};
// Throws unless ptr is device memory from cudaMalloc (or a pool block inside one).
IpcExport export_ipc(const void* ptr);
// Opens another process's allocation; returns its base on this process.
void* open_ipc(const std::uint8_t (&handle)[kIpcHandleSize], int device);
void close_ipc(void* base, int device) noexcept;

// Page-locked host memory (the agent's staging buffer).
void* alloc_pinned(std::size_t size);
void free_pinned(void* p) noexcept;

// Pins existing host memory for DMA (the dram tier's pool), and unpins it. Both
// this and alloc_pinned map the memory for the GPU's loads and stores too (the
// copy kernel reads and writes it directly).
void register_host(void* p, std::size_t size);
void unregister_host(void* p) noexcept;

// One copy segment; the direction is implied by which side is device memory.
struct Segment {
  void* dst;
  const void* src;
  std::size_t len;
};

// How a lane moves device memory (the agent's --copy):
//   Batch   one cudaMemcpyBatchAsync per call (copy engines)
//   Loop    a cudaMemcpyAsync per segment (copy engines)
//   Kernel  a gather/scatter kernel (SM loads and stores over PCIe) that also
//           computes each segment's XXH3-64: copy_hashed() (cuda/copy_kernel.h)
//   Auto    both Batch (start, copy) and Kernel (copy_hashed) resources: the
//           caller picks per call (the agent: the kernel for small blocks)
enum class CopyMethod { Batch, Loop, Kernel, Auto };

// How copy_hashed/start_hashed move the bytes they hash:
//   Fused    the copy kernel moves them and hashes them on the way;
//   Engines  the copy engines move them (as start() does, with contiguous
//            segments merged), and the kernel then hashes them where they are
//            in device memory (a pull's destination, a push's source).
enum class HashedCopy { Fused, Engines };

// Copy lanes: one CUDA stream each, used by one agent thread at a time.
class Lanes {
 public:
  // max_segment_bytes: the largest segment copy_hashed() will be given (a
  // staging slot); the kernel's per-lane buffers are sized for it. xxh3_secret:
  // the 192-byte default secret (xxh3_default_secret()).
  Lanes(int device, int count, CopyMethod method, std::size_t max_segment_bytes = 0,
        const std::uint8_t* xxh3_secret = nullptr);
  ~Lanes();
  Lanes(const Lanes&) = delete;
  Lanes& operator=(const Lanes&) = delete;
  // Copies every segment on lane `lane` and waits for them. Ok, or IoError (raised).
  [[nodiscard]] XferStatus copy(int lane, std::span<const Segment> segs, bool to_device,
                                Fault& fault) noexcept;
  // Pipelining: start() queues copies on the lane's stream and returns at once;
  // mark() returns a ticket for everything queued so far, and wait() blocks until
  // the work before a ticket is done (at most kMarks tickets outstanding per lane);
  // finish() waits for all of it. Each returns Ok, or IoError (raised).
  static constexpr int kMarks = 64;
  [[nodiscard]] XferStatus start(int lane, std::span<const Segment> segs, bool to_device,
                                 Fault& fault) noexcept;
  std::uint64_t mark(int lane) noexcept;
  [[nodiscard]] XferStatus wait(int lane, std::uint64_t ticket, Fault& fault) noexcept;
  [[nodiscard]] XferStatus finish(int lane, Fault& fault) noexcept;

  // Lanes with the kernel (Kernel, Auto). Copies every segment on lane `lane` and
  // waits; for segment i, hashed[i] = 1 and sums[i] = XXH3-64 of its bytes (Fused:
  // as copied; Engines: as they are on the device side after the copy, i.e. a
  // push's source, a pull's destination), or hashed[i] = 0 where the kernel did
  // not hash (240 bytes or less, or not 16-byte aligned: src or dst for Fused,
  // the device side for Engines; the caller hashes those). Ok, or IoError (raised).
  [[nodiscard]] XferStatus copy_hashed(int lane, std::span<const Segment> segs, bool to_device,
                                       HashedCopy how, std::uint64_t* sums, std::uint8_t* hashed,
                                       Fault& fault) noexcept;
  // copy_hashed in two halves, so that a lane can keep the GPU busy while its
  // thread does a batch's bookkeeping: start_hashed queues the copies on buffer
  // set `slot` (0 .. kHashedSlots-1) and returns; collect_hashed waits for them
  // and fills sums/hashed. Each slot holds one call in flight; the two slots
  // share the lane's stream, so their kernels run in the order started. When
  // start_hashed fails, nothing of the call is left in flight.
  static constexpr int kHashedSlots = 2;
  [[nodiscard]] XferStatus start_hashed(int lane, int slot, std::span<const Segment> segs, bool to_device,
                                        HashedCopy how, Fault& fault) noexcept;
  [[nodiscard]] XferStatus collect_hashed(int lane, int slot, std::uint64_t* sums, std::uint8_t* hashed,
                                          Fault& fault) noexcept;
  CopyMethod method() const noexcept { return method_; }

 private:
  int device_;
  CopyMethod method_;
  void* kernel_lanes_ = nullptr;  // cuda::KernelLane[count][kHashedSlots] for CopyMethod::Kernel, opaque here
  void* streams_ = nullptr;       // cudaStream_t[count], opaque here
  void* events_ = nullptr;        // cudaEvent_t[count][kMarks]
  std::uint64_t* next_mark_ = nullptr;  // per lane
  int count_;
};

}  // namespace ferry::xfer::gpu
