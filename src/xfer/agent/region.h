#pragma once
// Application memory the agent has opened: a mapping of the application's memfd
// (Dram, or Vram emulated without a GPU), a CUDA IPC mapping of its cudaMalloc
// allocation, or plain host memory of the application's process, reached by
// cross-memory attach (process_memory.h). Held by shared_ptr: a transfer in flight keeps its regions open even
// if the application deregisters them or disconnects meanwhile.

#include <cstdint>
#include <memory>
#include <string>

#include "ferry/xfer/types.h"
#include "xfer/agent/remote_memory.h"
#include "xfer/wire/messages.h"

namespace ferry::xfer::agent {

class ImportedRegion {
 public:
  // Opens the region a register message describes. `fd` (taken over) is the
  // memfd that came with it (SCM_RIGHTS, or taken from its owner over TCP), -1
  // otherwise; it must be sealed against shrinking. `owner` and `uid`: the
  // process whose memory a cross-memory-attach region is, which must run as
  // the connection's uid. Throws ferry::Error with a reason the application
  // gets back (wrong size, no GPU here, bad handle, no permission ...).
  static std::shared_ptr<ImportedRegion> open(const proto::RegisterMsg& msg, int fd, bool gpu_here, pid_t owner = 0,
                                              uid_t uid = 0);
  // DRAM reached by calls of a RemoteMemory the caller opened itself: a kind
  // of memory no register message names (a test's, an embedding program's).
  // `base` is the region's first byte in that memory's own space.
  static std::shared_ptr<ImportedRegion> wrap(std::unique_ptr<RemoteMemory> memory, std::uint8_t* base,
                                              std::uint64_t len);
  ~ImportedRegion();
  ImportedRegion(const ImportedRegion&) = delete;
  ImportedRegion& operator=(const ImportedRegion&) = delete;

  MemType type() const noexcept { return type_; }
  std::uint64_t len() const noexcept { return len_; }
  bool on_device() const noexcept { return ipc_base_ != nullptr; }
  // The region's first byte in this process (a device address when
  // on_device()), or, for memory reached by copy calls (remote() set), in
  // its own space (docs: xfer/agent/remote_memory.h):
  // process: never dereferenced here.
  std::uint8_t* base() const noexcept { return base_; }
  // The byte `offset` into the region, in the same space as base(). Computed
  // as an integer: a space of offsets (a shared file's) starts at 0, and null
  // plus an offset is undefined behaviour.
  std::uint8_t* at(std::uint64_t offset) const noexcept {
    return reinterpret_cast<std::uint8_t*>(reinterpret_cast<std::uintptr_t>(base_) + offset);
  }
  const RemoteMemory* remote() const noexcept { return remote_.get(); }
  std::string describe() const;

 private:
  ImportedRegion() = default;
  MemType type_ = MemType::Dram;
  std::uint64_t len_ = 0;
  std::uint8_t* base_ = nullptr;
  void* map_ = nullptr;  // memfd mapping
  std::size_t map_len_ = 0;
  void* ipc_base_ = nullptr;  // CUDA IPC mapping
  int device_ = 0;
  std::unique_ptr<RemoteMemory> remote_;  // cross-memory attach, or a shared file
};

}  // namespace ferry::xfer::agent
