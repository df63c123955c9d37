// CPU-only builds: there is no GPU, so Vram is emulated with shared host memory
// (buffer.cpp) and the agent copies with memcpy threads.
#include "ferry/core/status.h"
#include "xfer/gpu/gpu.h"

namespace ferry::xfer::gpu {
namespace {
[[noreturn]] void no_gpu() { throw Error("this ferry was built without CUDA: no GPU operations"); }
}  // namespace

bool available() { return false; }
int device_at_pci(const std::string& bus_id) {
  throw Error("-p " + bus_id + ": this ferry was built without CUDA, so it reaches no GPU by PCI address");
}
void* alloc_device(std::size_t, int) { no_gpu(); }
void free_device(void*, int) noexcept {}
void copy_to_device(void*, const void*, std::size_t, int) { no_gpu(); }
void copy_from_device(void*, const void*, std::size_t, int) { no_gpu(); }
IpcExport export_ipc(const void*) { no_gpu(); }
void* open_ipc(const std::uint8_t (&)[kIpcHandleSize], int) { no_gpu(); }
void close_ipc(void*, int) noexcept {}
void* alloc_pinned(std::size_t) { no_gpu(); }
void register_host(void*, std::size_t) { no_gpu(); }
void unregister_host(void*) noexcept {}
void free_pinned(void*) noexcept {}
Lanes::Lanes(int device, int count, CopyMethod method, std::size_t, const std::uint8_t*)
    : device_(device), method_(method), count_(count) {
  no_gpu();
}
Lanes::~Lanes() = default;
XferStatus Lanes::copy(int, std::span<const Segment>, bool, Fault& fault) noexcept {
  return fault.raise(XferStatus::IoError, "no GPU in this build");
}
XferStatus Lanes::start(int, std::span<const Segment>, bool, Fault& fault) noexcept {
  return fault.raise(XferStatus::IoError, "no GPU in this build");
}
std::uint64_t Lanes::mark(int) noexcept { return 0; }
XferStatus Lanes::wait(int, std::uint64_t, Fault& fault) noexcept {
  return fault.raise(XferStatus::IoError, "no GPU in this build");
}
XferStatus Lanes::finish(int, Fault& fault) noexcept {
  return fault.raise(XferStatus::IoError, "no GPU in this build");
}
XferStatus Lanes::copy_hashed(int, std::span<const Segment>, bool, HashedCopy, std::uint64_t*, std::uint8_t*,
                              Fault& fault) noexcept {
  return fault.raise(XferStatus::IoError, "no GPU in this build");
}
XferStatus Lanes::start_hashed(int, int, std::span<const Segment>, bool, HashedCopy, Fault& fault) noexcept {
  return fault.raise(XferStatus::IoError, "no GPU in this build");
}
XferStatus Lanes::collect_hashed(int, int, std::uint64_t*, std::uint8_t*, Fault& fault) noexcept {
  return fault.raise(XferStatus::IoError, "no GPU in this build");
}

}  // namespace ferry::xfer::gpu
