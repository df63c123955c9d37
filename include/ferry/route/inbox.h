#pragma once
// Pull-style receive beside handlers, for applications written as bale's
// conveyors loop (push, then pull what arrived, until done):
//
//   ferry::route::Inbox<Update> inbox(engine);
//   for (auto& u : updates) {
//     engine.send(owner(u), inbox.handler(), u);
//     Update got; int from;
//     while (inbox.try_pull(&got, &from)) apply(got);
//     if (++n % 64 == 0) engine.progress();   // or pull(), which progresses when empty
//   }
//   engine.barrier();                          // everything sent is in its inbox ...
//   while (inbox.try_pull(&got, &from)) apply(got);   // ... and is pulled after it
//
// An Inbox is a batch handler that queues each run it is given; pull() hands
// the messages out one at a time. Each message is copied once more than a
// handler would see it (measured in docs/bench/route.md), in exchange for the
// application's own loop.
//
// A message counts as handled when it enters the inbox, so barrier() returns
// once every message is in an inbox, not once it was pulled. Applications
// whose pulled messages send more (request/reply) repeat "pull everything,
// barrier()" until no rank pulled anything in a round (an all-reduce over
// engine.comm() tells).

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "ferry/route/engine.h"

namespace ferry::route {

template <class Msg>
class Inbox {
 public:
  // Registers the inbox's handler: every rank creates its inboxes in the same
  // order as its other handlers.
  explicit Inbox(Engine& engine) : engine_(engine), queue_(std::make_shared<Queue>()) {
    // The handler owns the queue with the inbox: the engine keeps handlers to
    // its end (its last barrier may deliver after an inbox declared after it
    // is gone), and those late messages land in a queue nobody reads.
    handler_ = engine.register_batch_handler<Msg>([q = queue_](Engine&, int from, std::span<const Msg> msgs) {
      for (const Msg& m : msgs) q->items.push_back(Item{m, from});
    });
  }
  Inbox(const Inbox&) = delete;
  Inbox& operator=(const Inbox&) = delete;

  // What senders address: engine.send(dest, inbox.handler(), msg).
  Handler<Msg> handler() const noexcept { return handler_; }

  // The next queued message, without progressing the engine; false when none.
  bool try_pull(Msg* msg, int* from) {
    Queue& q = *queue_;
    if (q.head == q.items.size()) {
      q.items.clear();
      q.head = 0;
      return false;
    }
    const Item& it = q.items[q.head++];
    *msg = it.msg;
    if (from != nullptr) *from = it.from;
    return true;
  }

  // The next message; when none is queued, runs engine.progress() once to
  // fetch what has arrived. False when still none. Not from a handler.
  bool pull(Msg* msg, int* from) {
    if (try_pull(msg, from)) return true;
    engine_.progress();
    return try_pull(msg, from);
  }

  // Messages queued and not yet pulled.
  std::size_t queued() const noexcept { return queue_->items.size() - queue_->head; }

 private:
  struct Item {
    Msg msg;
    int from;
  };
  struct Queue {
    std::vector<Item> items;
    std::size_t head = 0;
  };
  Engine& engine_;
  std::shared_ptr<Queue> queue_;
  Handler<Msg> handler_;
};

}  // namespace ferry::route
