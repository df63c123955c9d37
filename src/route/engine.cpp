#include "ferry/route/engine.h"

#include <exception>
#include <string>

#include "ferry/core/status.h"
#include "ferry/route/runtime.h"
#include "route/backend.h"
#include "route/fatal.h"
#include "route/idle.h"
#include "route/inline_backend.h"
#include "route/ring_backend.h"
#include "route/router_thread.h"
#include "route/runtime_state.h"

namespace ferry::route {
namespace {
void ring_send(void* b, int dest, std::uint16_t h, const void* data, std::uint32_t len) {
  static_cast<detail::RingBackend*>(b)->send(dest, h, data, len);
}
}  // namespace

Engine::Engine(Runtime& runtime) {
  init(runtime.comm(), runtime.options(), &runtime);
}

Engine::Engine(MPI_Comm comm, const Options& options) {
  init(comm, options, nullptr);
}

void Engine::init(MPI_Comm comm, const Options& options, Runtime* runtime) {
  using namespace detail;
  options_ = options;
  options_.validate();
  if (options_.mode == Mode::Process && runtime == nullptr)
    throw Error(
        "route mode process needs ferry::route::Runtime: it reserves the router ranks when MPI starts");
  if (options_.mode == Mode::Thread) {
    int level = 0;
    MPI_Query_thread(&level);
    if (level < MPI_THREAD_MULTIPLE)
      throw Error(
          "route mode thread needs MPI_THREAD_MULTIPLE (its progress thread calls MPI while the "
          "application may too): start MPI with ferry::route::Runtime or MPI_Init_thread");
  }
  FERRY_MPI_CHECK(MPI_Comm_dup(comm, &comm_), "duplicating the engine's communicator");
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  max_payload_ = options_.max_payload();

  Topology topology;
  int host_local = 0;
  if (runtime != nullptr) {
    topology = runtime->state().topology;
    host_local = runtime->state().host_local;
  } else {
    topology = Topology::from_keys(all_node_keys(comm_, options_.node_size), rank_);
    if (!options_.progress_cpus.empty()) host_local = host_local_rank(comm_);
  }
  resolve_idle_spins(options_, topology.apps_of[static_cast<std::size_t>(topology.my_node())].size() *
                                   (options_.mode == Mode::Thread ? 2 : 1));

  switch (options_.mode) {
    case Mode::Inline: {
      auto b = std::make_unique<InlineBackend>(*this, comm_, options_, topology);
      send_ctx_ = b.get();  // the derived object: the thunk casts back to it
      backend_ = std::move(b);
      send_fn_ = [](void* self, int dest, std::uint16_t h, const void* data, std::uint32_t len) {
        static_cast<InlineBackend*>(self)->send(dest, h, data, len);
      };
      break;
    }
    case Mode::Thread: {
      auto thread = std::make_unique<RouterThread>(comm_, options_, topology);
      int cpu = -1;
      if (!options_.progress_cpus.empty())
        cpu = options_.progress_cpus[static_cast<std::size_t>(host_local) % options_.progress_cpus.size()];
      thread->start(cpu);
      auto b = std::make_unique<RingBackend>(*this, options_, rank_, std::move(thread));
      send_ctx_ = b.get();
      backend_ = std::move(b);
      send_fn_ = ring_send;
      break;
    }
    case Mode::Process: {
      RuntimeState& st = runtime->state();
      if (st.engine_created) throw Error("route mode process supports one Engine per Runtime");
      st.engine_created = true;
      auto b = std::make_unique<RingBackend>(*this, options_, rank_, st.mailbox, st.client);
      send_ctx_ = b.get();
      backend_ = std::move(b);
      send_fn_ = ring_send;
      break;
    }
  }
}

Engine::~Engine() {
  if (backend_) {
    if (std::uncaught_exceptions() > 0)
      // A last barrier would wait for ranks that will never come: end the job now.
      detail::fatal("rank " + std::to_string(rank_) + ": the engine is being destroyed by an exception");
    backend_->finish();
    backend_.reset();
  }
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

std::uint16_t Engine::add_handler(Entry entry) {
  if (handlers_.size() >= 0xffff) throw Error("more than 65535 route handlers");
  handlers_.push_back(std::move(entry));
  return static_cast<std::uint16_t>(handlers_.size() - 1);
}

void Engine::bad_send(int dest, std::size_t len) const {
  if (dest < 0 || dest >= size_)
    throw Error("send to rank " + std::to_string(dest) + ": the engine has ranks 0.." +
                std::to_string(size_ - 1));
  throw Error("send of " + std::to_string(len) + " bytes: a message carries at most " +
              std::to_string(max_payload_) + " (buffer_bytes and ring_slot_bytes bound it)");
}

void Engine::progress() {
  if (backend_->in_handler()) detail::fatal("progress() called from inside a handler");
  backend_->progress();
}

void Engine::barrier() {
  if (backend_->in_handler()) detail::fatal("barrier() called from inside a handler");
  backend_->barrier();
}

Stats Engine::stats() const {
  return backend_->stats();
}

bool Engine::router_stats(RouterStats* out) const {
  return backend_->router_stats(out);
}

void Engine::bad_handler(int from, std::uint16_t handler, std::uint32_t len) const {
  if (handler >= handlers_.size())
    detail::fatal(
        "rank " + std::to_string(rank_) + ": message for handler " + std::to_string(handler) + " from rank " +
        std::to_string(from) + ", but only " + std::to_string(handlers_.size()) +
        " are registered (ranks must register the same handlers in the same order, before progress())");
  detail::fatal("rank " + std::to_string(rank_) + ": handler " + std::to_string(handler) + " takes " +
                std::to_string(handlers_[handler].fixed_len) + "-byte messages, got " + std::to_string(len) +
                " from rank " + std::to_string(from));
}

}  // namespace ferry::route
