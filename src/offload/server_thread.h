#pragma once
// One data-path thread of the server: an epoll loop over its clients' sockets
// and one channel of the arena. Internal to the server.

#include <sys/types.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/log.h"
#include "ferry/core/arena.h"
#include "ferry/core/slot_ring.h"
#include "ferry/offload/framing.h"
#include "ferry/offload/server.h"
#include "offload/deferred_mailbox.h"

namespace ferry::offload {

struct ServerThreadConfig {
  std::uint32_t index = 0;
  int cpu = -1;  // -1: unpinned
  std::uint32_t max_concurrent_messages = 128;
  std::uint32_t max_clients = 1024;
  std::shared_ptr<const Framing> framing;  // shared by every thread; required
  std::chrono::duration<double> read_timeout{0};  // a begun request must complete within this; 0: off
  std::chrono::duration<double> idle_timeout{0};  // close a connection idle this long; 0: off
  // Bytes of copied output (responses written for clients that have not read
  // them, and the output buffer pages they touched) all of the thread's
  // connections may hold, counting the room reserved for responses in flight.
  // Beyond it only a connection that owes nothing takes a request. 0: no bound
  // beyond each connection's own.
  std::size_t max_held_output = 0;
};

// One stage's latency histogram, written by its thread alone (relaxed stores)
// and read by any (StageLatency in ferry/offload/server.h gives the buckets).
class StageCounters {
 public:
  void add(std::int64_t ns) noexcept;
  void add_to(StageLatency& out) const noexcept;

 private:
  std::array<std::atomic<std::uint64_t>, StageLatency::kBoundsUs.size()> counts_{};
  std::atomic<std::uint64_t> sum_ns_{0};
};

struct ServerThreadStats {
  std::atomic<std::uint64_t> requests{0};
  std::atomic<std::uint64_t> responses{0};
  std::atomic<std::uint64_t> dropped_responses{0};  // their client had gone
  std::atomic<std::uint64_t> protocol_errors{0};
  std::atomic<std::uint64_t> request_bytes{0};
  std::atomic<std::uint64_t> response_bytes{0};
  std::array<std::atomic<std::uint64_t>, kRefusalKinds.size()> refused{};  // ServerStats::refused
  std::atomic<std::uint32_t> clients{0};
  std::atomic<std::uint32_t> in_flight{0};
  // steady_clock nanoseconds since which requests have waited in the channel
  // with no response coming back; 0 while none wait.
  std::atomic<std::int64_t> unanswered_since_ns{0};
  StageCounters read, queue, handle, write;
};

class ServerThread {
 public:
  explicit ServerThread(const ServerThreadConfig& config);
  ~ServerThread();
  ServerThread(const ServerThread&) = delete;
  ServerThread& operator=(const ServerThread&) = delete;

  void start();
  // Stops the loop and closes every client; idempotent.
  void stop();

  // Hands an accepted socket to this thread (any thread may call).
  void adopt(int fd);
  // Binds the thread to a channel of a freshly attached arena (generation > 0),
  // or unbinds it (channel == nullptr): in-flight requests then fail with
  // no_workers errors that give `why`. Returns once the thread has switched.
  void bind(const Channel* channel, std::uint64_t generation,
            const std::string& why = "the orchestrator went away with requests in flight");
  // Stops reading new requests; in-flight ones still complete.
  void begin_drain();

  std::uint32_t clients() const { return stats_.clients.load(std::memory_order_relaxed); }
  std::uint32_t in_flight() const { return stats_.in_flight.load(std::memory_order_relaxed); }
  // How long requests have waited in the channel with no response coming back;
  // zero while none wait.
  std::chrono::nanoseconds unanswered_for(std::chrono::steady_clock::time_point now) const;
  const ServerThreadStats& stats() const { return stats_; }
  std::uint32_t index() const { return config_.index; }

 private:
  struct Connection;
  struct Command;

  void run();
  // Queues a command for the thread and wakes it (any thread may call).
  void post(const Command& cmd);
  void wake();
  void process_commands();
  void handle_event(std::uint32_t slot, std::uint32_t events);
  void read_from(Connection& c);
  void parse_requests(Connection& c);
  bool can_post(const Connection& c) const;
  // Whether c owes its client bytes from `out` or from a page it sends by reference.
  static bool stream_pending(const Connection& c);
  // Counts the output pages c's latest write touched against the thread's bound.
  void note_written(Connection& c);
  // Once c's copied output is all sent: rewinds its buffer and gives back the
  // pages beyond the first few.
  void rewind_output(Connection& c);
  // Sends what c owes from `out` and its references, in order; the bytes sent, or -1 with errno.
  ssize_t send_stream(Connection& c);
  // Sends what the front of c's queue owes: its copied bytes, then its body.
  ssize_t send_queued(Connection& c);
  // Stops reading c until resume_paused() finds it can post again.
  void pause(Connection& c);
  // Moves every published response to its connection's output; returns how many.
  std::uint32_t drain_responses();
  void flush_dirty();
  void mark_dirty(Connection& c);
  // Appends the connection's queued ferry_error to its output (once nothing else is owed).
  void queue_pending_error(Connection& c);
  void resume_paused();
  void flush(Connection& c);
  void update_interest(Connection& c);
  // Queues reply (sent once the connection's in-flight responses are out), then closes.
  void refuse(Connection& c, std::string reply, const std::string& why);
  void refuse(Connection& c, Framing::Failure failure, const std::string& why);
  // A response said the connection ends with it: stop reading, send what is queued, close.
  void close_after_output(Connection& c);
  void close_connection(Connection& c, const char* why);
  // Builds the deferred responses that came back (Framing::Deferred) into their connections' queues.
  void take_deferred();
  // Puts a ready response at the back of c's queue, in order behind a deferred one.
  void enqueue_ready(Connection& c, std::string bytes, ByteView body, bool close_after);
  bool has_output(const Connection& c) const;
  void fail_in_flight(const std::string& why);
  void note_unanswered_since(std::chrono::steady_clock::time_point t);
  // Every 100 ms: closes connections past their linger, closing, read or idle deadlines.
  void check_deadlines(std::chrono::steady_clock::time_point now);
  std::uint32_t open_connection(int fd);

  ServerThreadConfig config_;
  const Framing& framing_;
  std::size_t max_response_;     // framing_.max_response_bytes()
  std::size_t reply_slack_;      // room kept for one refusal beyond the responses
  std::uint32_t conn_window_;    // requests one connection may have in flight
  std::size_t out_capacity_;     // bytes: conn_window_ responses of the largest size
  std::size_t in_capacity_;

  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::thread thread_;
  std::atomic<bool> running_{false};

  std::mutex commands_mutex_;
  std::vector<Command> commands_;
  std::atomic<bool> has_commands_{false};
  std::atomic<std::uint64_t> bound_generation_{0};  // acknowledges bind()

  // Data-path state, touched by the thread only.
  std::vector<std::unique_ptr<Connection>> connections_;
  std::vector<std::uint32_t> free_slots_;
  std::vector<std::uint32_t> paused_;
  std::vector<std::uint32_t> dirty_;
  std::chrono::steady_clock::time_point now_;  // this loop turn's clock, for activity stamps
  bool bound_ = false;
  bool draining_ = false;
  RingProducer requests_;
  RingConsumer responses_;
  std::uint32_t channel_in_flight_ = 0;
  std::shared_ptr<DeferredMailbox> mailbox_;
  std::vector<std::uint8_t> scratch_;  // a response written while others wait before it
  // Copied output the connections hold: their output buffers' touched pages
  // and their queued responses (ServerThreadConfig::max_held_output).
  std::size_t held_output_ = 0;
  log::Throttle warn_throttle_;  // one line a second for hostile clients' errors

  ServerThreadStats stats_;
};

}  // namespace ferry::offload
