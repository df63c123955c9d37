#pragma once
// What the Engine delegates to: one implementation per mode family. The
// Engine keeps the handler table and the argument checks; a backend moves
// runs and counts.

#include <cstdint>
#include <stdexcept>

#include "ferry/route/stats.h"

namespace ferry::route {
class Engine;
}

namespace ferry::route::detail {

class Backend {
 public:
  explicit Backend(Engine& engine) : engine_(engine) {}
  virtual ~Backend() = default;

  virtual void send(int dest, std::uint16_t handler, const void* payload, std::uint32_t len) = 0;
  virtual void progress() = 0;
  virtual void barrier() = 0;
  // The engine's last barrier and the teardown of whatever runs beside the app.
  virtual void finish() = 0;
  virtual Stats stats() const = 0;
  virtual bool router_stats(RouterStats*) const { return false; }

  bool in_handler() const noexcept { return in_handler_; }

 protected:
  Engine& engine_;
  bool in_handler_ = false;  // progress()/barrier() from a handler would recurse without bound
};

}  // namespace ferry::route::detail
