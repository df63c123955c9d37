#pragma once
// Fire-and-forget active messages over MPI (the "Buddy" engine's API, shaped
// like YGM's): register typed handlers, send(dest, handler, message) without
// waiting, progress() to run the handlers of arrived messages, barrier() to wait
// until every message sent anywhere has been handled.
//
//   ferry::route::Runtime rt(&argc, &argv);      // MPI, the mode, the routers
//   ferry::route::Engine engine(rt);
//   auto add = engine.register_handler<Update>([&](Engine&, int from, const Update& u) { ... });
//   for (...) { engine.send(owner, add, Update{...}); engine.progress(); }
//   engine.barrier();
//
// Rules:
// - Every rank registers the same handlers in the same order (ids are indices),
//   before its first progress() or barrier().
// - Handlers run on the application thread, inside progress() and barrier()
//   only; they may send(), must not throw, and must not call progress() or
//   barrier() (that aborts the job with a message).
// - No ordering between messages, not even between one pair of ranks.
// - A message sent after barrier() returned on one rank may be handled by
//   another rank that is still leaving the same barrier.
// - A message carries at most Options::max_payload() bytes.
//
// The MPI communicator is a public type here on purpose: the engine is "over an
// MPI communicator", and its users are MPI programs.

#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "ferry/core/bytes.h"
#include "ferry/route/options.h"
#include "ferry/route/stats.h"

namespace ferry::route {

class Engine;
class Runtime;

namespace detail {
class Backend;
}

// A registered handler of fixed-size messages of type Msg.
template <class Msg>
struct Handler {
  std::uint16_t id = 0;
};

// A registered handler of variable-size messages (a span of bytes).
struct BytesHandler {
  std::uint16_t id = 0;
};

class Engine {
 public:
  // Any mode; process mode needs the Runtime, which reserved the router ranks at start.
  explicit Engine(Runtime& runtime);
  // Inline and thread mode over an existing communicator (thread mode needs
  // MPI_THREAD_MULTIPLE). Throws ferry::Error for process mode.
  Engine(MPI_Comm comm, const Options& options);
  // Runs a last barrier, so no message is lost, then tears down.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  // The application ranks (routers excluded), for the application's own MPI calls.
  MPI_Comm comm() const noexcept { return comm_; }
  const Options& options() const noexcept { return options_; }
  Mode mode() const noexcept { return options_.mode; }

  // f(Engine&, int from, const Msg&). Msg must be trivially copyable.
  template <class Msg, class F>
  Handler<Msg> register_handler(F&& f);
  // f(Engine&, int from, ferry::ByteView payload).
  template <class F>
  BytesHandler register_bytes_handler(F&& f);
  // Batched delivery: f(Engine&, int from, std::span<const Msg> messages), one
  // call per run of messages from one sender, read in place (no copy). Sends
  // to it take the same Handler<Msg>. alignof(Msg) must be at most 8.
  template <class Msg, class F>
  Handler<Msg> register_batch_handler(F&& f);

  // Queues a message for `dest` and returns at once (it may wait for buffer
  // space, never for the destination). Throws ferry::Error for a rank out of
  // range or a message over max_payload(): both are programming errors.
  template <class Msg>
  void send(int dest, Handler<Msg> handler, const Msg& msg) {
    static_assert(std::is_trivially_copyable_v<Msg>);
    send_bytes(dest, handler.id, &msg, sizeof(Msg));
  }
  void send(int dest, BytesHandler handler, ByteView payload) {
    send_bytes(dest, handler.id, payload.data, payload.size);
  }

  // Runs the handlers of messages that have arrived (a bounded batch) and
  // moves aged buffers on. Never blocks for long.
  void progress();

  // Returns once every message sent by any rank before it entered barrier(),
  // and every message those handlers sent, has been handled. Collective.
  void barrier();

  Stats stats() const;
  // Process mode: the statistics of this node's router. False in other modes.
  bool router_stats(RouterStats* out) const;

  // The backends' entry to the handler table: `count` messages of `len` bytes
  // each, back to back from `payloads`, all from `from` for `handler` (a run).
  // Unknown ids and wrong sizes of fixed-size messages abort the job with a
  // message (the peers disagree on the handler list).
  void dispatch(int from, std::uint16_t handler, const std::uint8_t* payloads, std::uint32_t len,
                std::uint32_t count) {
    if (handler >= handlers_.size()) [[unlikely]]
      bad_handler(from, handler, len);
    const Entry& e = handlers_[handler];
    if (e.fixed_len != kVariable && e.fixed_len != len) [[unlikely]]
      bad_handler(from, handler, len);
    e.fn(e.callable.get(), *this, from, payloads, len, count);
  }

 private:
  // Runs the handler over a run: one indirect call per run, the handler itself
  // inlined into the loop over its messages.
  using Fn = void (*)(void* callable, Engine&, int from, const std::uint8_t* payloads, std::uint32_t len,
                      std::uint32_t count);
  static constexpr std::uint32_t kVariable = 0xffffffffu;
  struct Entry {
    Fn fn = nullptr;
    std::shared_ptr<void> callable;
    std::uint32_t fixed_len = kVariable;
  };

  void init(MPI_Comm comm, const Options& options, Runtime* runtime);
  std::uint16_t add_handler(Entry entry);
  // Inline, with one indirect call into the backend's own inlined send (the
  // data path's per-message cost is a few nanoseconds; calls add up).
  void send_bytes(int dest, std::uint16_t handler, const void* data, std::size_t len) {
    if (static_cast<unsigned>(dest) >= static_cast<unsigned>(size_) || len > max_payload_) [[unlikely]]
      bad_send(dest, len);
    send_fn_(send_ctx_, dest, handler, data, static_cast<std::uint32_t>(len));
  }
  [[noreturn]] void bad_send(int dest, std::size_t len) const;
  [[noreturn]] void bad_handler(int from, std::uint16_t handler, std::uint32_t len) const;

  using SendFn = void (*)(void* backend, int dest, std::uint16_t handler, const void* data,
                          std::uint32_t len);
  SendFn send_fn_ = nullptr;
  void* send_ctx_ = nullptr;

  Options options_;
  MPI_Comm comm_ = MPI_COMM_NULL;  // a duplicate the engine owns
  int rank_ = 0;
  int size_ = 1;
  std::uint32_t max_payload_ = 0;
  std::vector<Entry> handlers_;
  std::unique_ptr<detail::Backend> backend_;
};

template <class Msg, class F>
Handler<Msg> Engine::register_handler(F&& f) {
  static_assert(std::is_trivially_copyable_v<Msg>, "messages travel as bytes");
  using Callable = std::decay_t<F>;
  Entry e;
  e.callable = std::make_shared<Callable>(std::forward<F>(f));
  e.fixed_len = sizeof(Msg);
  e.fn = [](void* c, Engine& engine, int from, const std::uint8_t* payloads, std::uint32_t,
            std::uint32_t count) {
    Callable& f = *static_cast<Callable*>(c);
    for (std::uint32_t i = 0; i < count; ++i) {
      // Copy out rather than cast: a payload is aligned only to its size, and
      // a copy of a small message costs as much as the cast's first cache miss.
      Msg msg;
      std::memcpy(static_cast<void*>(&msg), payloads + std::size_t{i} * sizeof(Msg), sizeof(Msg));
      f(engine, from, std::as_const(msg));
    }
  };
  return Handler<Msg>{add_handler(std::move(e))};
}

template <class Msg, class F>
Handler<Msg> Engine::register_batch_handler(F&& f) {
  static_assert(std::is_trivially_copyable_v<Msg>, "messages travel as bytes");
  static_assert(alignof(Msg) <= 8, "runs keep payloads 8-byte aligned at most");
  using Callable = std::decay_t<F>;
  Entry e;
  e.callable = std::make_shared<Callable>(std::forward<F>(f));
  e.fixed_len = sizeof(Msg);
  e.fn = [](void* c, Engine& engine, int from, const std::uint8_t* payloads, std::uint32_t,
            std::uint32_t count) {
    // A run starts 8-byte aligned and its payloads follow each other, so each
    // is aligned to alignof(Msg), which divides both 8 and sizeof(Msg).
    (*static_cast<Callable*>(c))(engine, from,
                                 std::span<const Msg>(reinterpret_cast<const Msg*>(payloads), count));
  };
  return Handler<Msg>{add_handler(std::move(e))};
}

template <class F>
BytesHandler Engine::register_bytes_handler(F&& f) {
  using Callable = std::decay_t<F>;
  Entry e;
  e.callable = std::make_shared<Callable>(std::forward<F>(f));
  e.fn = [](void* c, Engine& engine, int from, const std::uint8_t* payloads, std::uint32_t len,
            std::uint32_t count) {
    Callable& f = *static_cast<Callable*>(c);
    for (std::uint32_t i = 0; i < count; ++i) f(engine, from, ByteView{payloads + std::size_t{i} * len, len});
  };
  return BytesHandler{add_handler(std::move(e))};
}

}  // namespace ferry::route
