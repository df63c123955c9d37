#include "xfer/agent/region.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>

#include "core/sealed_memfd.h"
#include "xfer/agent/process_memory.h"
#include "xfer/agent/shared_file_memory.h"
#include "ferry/core/status.h"
#include "xfer/gpu/gpu.h"

namespace ferry::xfer::agent {

std::shared_ptr<ImportedRegion> ImportedRegion::open(const proto::RegisterMsg& msg, int fd, bool gpu_here, pid_t owner,
                                                     uid_t uid) {
  // Closed on every way out: once mapped, the mapping keeps the memory alive.
  struct Closer {
    int fd;
    ~Closer() {
      if (fd >= 0) ::close(fd);
    }
  } closer{fd};
  if (msg.type != MemType::Dram && msg.type != MemType::Vram)
    throw Error(std::string("cannot register ") + to_string(msg.type) + " memory: only DRAM and VRAM");
  if (msg.len == 0) throw Error("cannot register an empty region");
  std::shared_ptr<ImportedRegion> r(new ImportedRegion);
  r->type_ = msg.type;
  r->len_ = msg.len;
  if (msg.reach == proto::Reach::CudaIpc) {
    if (!gpu_here)
      throw Error("this agent has no GPU, so it cannot open CUDA IPC handles: run it on the GPU's machine "
                  "(or emulate VRAM with FERRY_XFER_EMULATE_VRAM=1 in the application)");
    r->device_ = static_cast<int>(msg.dev_id);
    r->ipc_base_ = gpu::open_ipc(msg.ipc_handle, r->device_);
    r->base_ = static_cast<std::uint8_t*>(r->ipc_base_) + msg.offset;
    return r;
  }
  if (msg.reach == proto::Reach::ProcessMemory) {
    r->remote_ = ProcessMemory::open(owner, uid, msg.offset, msg.len);
    r->base_ = reinterpret_cast<std::uint8_t*>(msg.offset);
    return r;
  }
  if (msg.reach == proto::Reach::SharedFile) {
    if (fd < 0) throw Error("register: a shared file must come with its descriptor");
    std::unique_ptr<RemoteMemory> writer;
    if (msg.addr != 0) {
      try {
        writer = ProcessMemory::open(owner, uid, msg.addr, msg.len);
      } catch (const Error&) {
        // Not allowed (Yama, another uid) or not mapped there: pwrite serves.
      }
    }
    r->remote_ = SharedFileMemory::open(std::exchange(closer.fd, -1), msg.offset, msg.len, std::move(writer), msg.addr);
    r->base_ = reinterpret_cast<std::uint8_t*>(msg.offset);
    return r;
  }
  if (msg.reach != proto::Reach::Memfd) throw Error("unknown memory reach in register");
  if (fd < 0) throw Error("register: shared memory without its descriptor");
  const std::uint64_t size = require_sealed_memfd(fd, "the registered buffer");
  if (msg.offset > size || msg.len > size - msg.offset)
    throw Error("register: " + std::to_string(msg.len) + " bytes at offset " + std::to_string(msg.offset) +
                " exceed the shared buffer's " + std::to_string(size) + " bytes");
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) throw_errno("mapping the application's shared buffer");
  r->map_ = p;
  r->map_len_ = size;
  r->base_ = static_cast<std::uint8_t*>(p) + msg.offset;
  return r;
}

std::shared_ptr<ImportedRegion> ImportedRegion::wrap(std::unique_ptr<RemoteMemory> memory, std::uint8_t* base,
                                                     std::uint64_t len) {
  std::shared_ptr<ImportedRegion> r(new ImportedRegion);
  r->len_ = len;
  r->base_ = base;
  r->remote_ = std::move(memory);
  return r;
}

ImportedRegion::~ImportedRegion() {
  if (map_ != nullptr) munmap(map_, map_len_);
  if (ipc_base_ != nullptr) gpu::close_ipc(ipc_base_, device_);
}

std::string ImportedRegion::describe() const {
  return std::string(to_string(type_)) + " " + std::to_string(len_) + " bytes" +
         (on_device()  ? " (CUDA IPC, GPU " + std::to_string(device_) + ")"
          : remote_  ? " (" + remote_->describe() + ")"
                     : " (shared memory)");
}

}  // namespace ferry::xfer::agent
