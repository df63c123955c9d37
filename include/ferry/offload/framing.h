#pragma once
// A proxy protocol's framing: where a request ends in a connection's byte
// stream, which part of it goes into the channel, and what the client gets back.
//
// The server threads own everything else (accepting, thread binding, per-
// connection credit, back-pressure, in-order responses, closing politely), so a
// protocol is only this class. The DOCA wire is the default
// (make_doca_wire_framing); HTTP is another. One instance serves every thread at
// once: its methods must not modify shared state.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "ferry/core/bytes.h"

namespace ferry::offload {

class Framing {
 public:
  virtual ~Framing() = default;

  struct Scan {
    enum class Result {
      NeedMore,  // no whole request yet
      Request,   // a request of frame_bytes; payload goes into the channel
      Reject,    // malformed or over a limit: reject() says what to answer
    };
    Result result = Result::NeedMore;
    std::size_t frame_bytes = 0;     // bytes of input the request takes (Request)
    std::size_t payload_offset = 0;  // where in the frame the forwarded part starts
    std::size_t payload_size = 0;
    // A part of the frame the workers need not see but write_response() does
    // (an HTTP body the proxy answers from): the thread keeps a copy for it.
    std::size_t kept_offset = 0;
    std::size_t kept_size = 0;
  };
  // Looks at the unconsumed input of one connection, starting at a request boundary.
  virtual Scan scan(const std::uint8_t* data, std::size_t size) const noexcept = 0;

  struct Rejection {
    std::string reply;  // sent after the connection's in-flight responses, then it closes
    std::string why;    // for the log
  };
  // For input on which scan() returned Reject.
  virtual Rejection reject(const std::uint8_t* data, std::size_t size) const = 0;

  // Why the server, not the protocol, cannot serve a request.
  enum class Failure {
    NoWorkers,    // no orchestrator attached
    WorkersLost,  // the orchestrator went away with requests in flight
    SlotTooSmall, // the request's payload is larger than the arena's slots
    ServerFull,   // every data-path thread is at its client limit
    ReadTimeout,  // a request begun was not complete within the read timeout
  };
  // The reply before closing (at most max_reply_bytes(); longer ones are cut).
  virtual std::string failure_reply(Failure failure, const std::string& why) const = 0;

  // Upper bounds the threads size their buffers by. A connection's input holds
  // two of the largest requests; its output reserves the largest response for
  // each request in flight, plus room for one reply. Bytes a response sends by
  // reference (Written::body) need no room there.
  virtual std::size_t max_request_bytes() const noexcept = 0;
  virtual std::size_t max_response_bytes() const noexcept = 0;
  virtual std::size_t max_reply_bytes() const noexcept { return 1024; }

  struct Written {
    std::size_t bytes = 0;     // written into dst: at most max_response_bytes()
    bool close_after = false;  // the connection closes once this is sent; later responses are dropped
    std::uint32_t worker_ns = 0;  // the worker's own time on it, when its output says; 0: unknown
    bool deferred = false;     // Client::deferrer->defer() was called: the response comes later
    // Sent after the bytes in dst, uncopied: memory the framing owns and leaves
    // unchanged for as long as it lives (a static page). Any number of
    // connections send the one copy, each keeping only a cursor into it.
    ByteView body{};
  };

  // A response another thread finishes later (an embedding a batcher computes).
  // The connection's later responses wait behind it, so order is kept.
  struct Response {
    std::string bytes;         // the whole response, any size
    bool close_after = false;  // as Written::close_after
  };
  class Deferred {
   public:
    virtual ~Deferred() = default;
    // Any thread, at most once: build runs on the connection's server thread,
    // which sends what it returns in the connection's order.
    virtual void complete(std::function<Response()> build) = 0;
    // The client went away: the work may be skipped (complete() is then a no-op).
    virtual bool abandoned() const noexcept = 0;
  };
  class Deferrer {
   public:
    // Makes the response being written a deferred one; call at most once, then
    // return Written{.deferred = true}.
    virtual std::shared_ptr<Deferred> defer() = 0;

   protected:
    ~Deferrer() = default;
  };

  struct Client {
    std::string_view peer;        // "address:port"
    ByteView kept;                // what scan() asked to keep of this request (empty if nothing)
    std::int64_t received_ns = 0; // steady-clock ns when the request was read whole
    Deferrer* deferrer = nullptr;
  };
  // Writes the client's response for a worker's output into dst, which has room
  // for max_response_bytes(), and names any body sent by reference; or defers
  // it (Client::deferrer).
  virtual Written write_response(ByteView worker_output, std::uint8_t* dst, const Client& client) const noexcept = 0;
};

// The DOCA remote-offload wire (docs/protocol.md): 8-byte header plus a 4-byte
// length, payloads up to max_message_length; errors are ferry_error frames.
std::shared_ptr<const Framing> make_doca_wire_framing(std::uint32_t max_message_length);

}  // namespace ferry::offload
