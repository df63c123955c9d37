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
  // each request in flight, plus room for one reply.
  virtual std::size_t max_request_bytes() const noexcept = 0;
  virtual std::size_t max_response_bytes() const noexcept = 0;
  virtual std::size_t max_reply_bytes() const noexcept { return 1024; }

  struct Written {
    std::size_t bytes = 0;     // at most max_response_bytes()
    bool close_after = false;  // the connection closes once this is sent; later responses are dropped
    std::uint32_t worker_ns = 0;  // the worker's own time on it, when its output says; 0: unknown
  };
  struct Client {
    std::string_view peer;  // "address:port"
  };
  // Writes the client's response for a worker's output into dst, which has room
  // for max_response_bytes().
  virtual Written write_response(ByteView worker_output, std::uint8_t* dst, const Client& client) const noexcept = 0;
};

// The DOCA remote-offload wire (docs/protocol.md): 8-byte header plus a 4-byte
// length, payloads up to max_message_length; errors are ferry_error frames.
std::shared_ptr<const Framing> make_doca_wire_framing(std::uint32_t max_message_length);

}  // namespace ferry::offload
