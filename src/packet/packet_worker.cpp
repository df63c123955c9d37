#include "ferry/packet/packet_worker.h"

#include <time.h>

#include "ferry/packet/cuda_packet_worker.h"

namespace ferry::packet {

#if defined(FERRY_HAVE_CUDA)
// cuda/macswap_worker.cu
std::unique_ptr<PacketWorker> make_gpu_macswap_worker(const PacketWorkerOptions& options);
#endif

PacketLaunch parse_packet_launch(std::string_view name) {
  if (name == "none") return std::nullopt;
  try {
    return worker::parse_launch(name);
  } catch (const Error&) {
    throw Error("unknown launch method '" + std::string(name) +
                "': choose none, cpu, burst, persistent, graph or memops");
  }
}

const char* to_string(const PacketLaunch& launch) noexcept {
  return launch ? worker::to_string(*launch) : "none";
}

namespace detail {

WorkerMemory allocate_cpu_memory(std::size_t bytes, MemoryKind kind) {
  if (kind == MemoryKind::Device)
    throw Error(
        "MemoryKind::Device puts packets in GPU memory, which a CPU worker cannot touch: use "
        "MemoryKind::Host");
  constexpr std::size_t kAlign = 64 * 1024;
  const std::size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, rounded);
  if (p == nullptr) throw Error("cannot allocate " + std::to_string(rounded) + " bytes of packet memory");
  WorkerMemory m;
  m.host = m.worker = p;
  m.bytes = rounded;
  m.owner = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  return m;
}

void spin_for_ns(std::uint64_t ns) noexcept {
  timespec start{}, now{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  const std::uint64_t t0 = std::uint64_t(start.tv_sec) * 1'000'000'000u + start.tv_nsec;
  do {
    cpu_pause();
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while (std::uint64_t(now.tv_sec) * 1'000'000'000u + now.tv_nsec - t0 < ns);
}

void mark_error(const std::vector<CommList>& lists) noexcept {
  for (const CommList& l : lists)
    for (std::uint32_t k = 0; k < l.capacity(); ++k) set_comm_status(l.item(k), kCommError);
}

}  // namespace detail

std::unique_ptr<PacketWorker> make_macswap_worker(const PacketWorkerOptions& options) {
  if (!options.launch) return nullptr;
  if (!worker::runs_on_gpu(*options.launch)) return make_cpu_packet_worker(options, worker::MacSwap{});
#if defined(FERRY_HAVE_CUDA)
  return make_gpu_macswap_worker(options);
#else
  throw Error(std::string("PacketWorkerOptions::launch ") + to_string(options.launch) +
              " runs on a GPU, and this build has no CUDA backend");
#endif
}

}  // namespace ferry::packet
