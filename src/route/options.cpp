#include "ferry/route/options.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "ferry/core/status.h"
#include "route/run.h"

namespace ferry::route {
namespace {

// Setting names in env spelling; a flag spells them with dashes.
constexpr const char* kNames[] = {
    "mode",          "routing",     "buffer_bytes",     "max_outstanding", "flush_us",
    "recv_buffers",  "ring_slots",  "ring_slot_bytes",  "node_size",       "app_cpus",
    "progress_cpus", "router_cpus", "stall_timeout_ms", "idle_spins",      "router_threads"};

std::string env_name(const std::string& name) {
  std::string out = "FERRY_ROUTE_";
  for (char c : name) out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::uint32_t to_u32(const std::string& name, const std::string& value) {
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno != 0 || v > 0xffffffffull || value[0] == '-')
    throw Error("route option " + name + ": '" + value + "' is not an unsigned 32-bit number");
  return static_cast<std::uint32_t>(v);
}

std::string join(const std::vector<int>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + std::to_string(v[i]);
  return out.empty() ? "-" : out;
}

}  // namespace

const char* to_string(Mode m) noexcept {
  switch (m) {
    case Mode::Inline: return "inline";
    case Mode::Thread: return "thread";
    case Mode::Process: return "process";
  }
  return "?";
}

const char* to_string(Routing r) noexcept {
  switch (r) {
    case Routing::Direct: return "direct";
    case Routing::NodeLocalRemote: return "nlnr";
  }
  return "?";
}

std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> cpus;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    if (part.empty()) continue;
    const auto dash = part.find('-');
    const std::string lo_s = part.substr(0, dash);
    const std::string hi_s = dash == std::string::npos ? lo_s : part.substr(dash + 1);
    const std::uint32_t lo = to_u32("cpu list", lo_s), hi = to_u32("cpu list", hi_s);
    if (hi < lo || hi > 4095) throw Error("cpu list '" + text + "': bad range '" + part + "'");
    for (std::uint32_t c = lo; c <= hi; ++c) cpus.push_back(static_cast<int>(c));
  }
  return cpus;
}

void Options::set(const std::string& raw_name, const std::string& value) {
  std::string name = raw_name;
  std::replace(name.begin(), name.end(), '-', '_');
  if (name == "mode") {
    if (value == "inline")
      mode = Mode::Inline;
    else if (value == "thread")
      mode = Mode::Thread;
    else if (value == "process")
      mode = Mode::Process;
    else
      throw Error("route mode '" + value + "' is not one of inline, thread, process");
  } else if (name == "routing") {
    if (value == "direct" || value == "none")
      routing = Routing::Direct;
    else if (value == "nlnr")
      routing = Routing::NodeLocalRemote;
    else
      throw Error("route routing '" + value + "' is not one of direct, nlnr");
  } else if (name == "buffer_bytes") {
    buffer_bytes = to_u32(name, value);
  } else if (name == "max_outstanding") {
    max_outstanding = to_u32(name, value);
  } else if (name == "flush_us") {
    flush_us = to_u32(name, value);
  } else if (name == "recv_buffers") {
    recv_buffers = to_u32(name, value);
  } else if (name == "ring_slots") {
    ring_slots = to_u32(name, value);
  } else if (name == "ring_slot_bytes") {
    ring_slot_bytes = to_u32(name, value);
  } else if (name == "node_size") {
    node_size = to_u32(name, value);
  } else if (name == "app_cpus") {
    app_cpus = parse_cpu_list(value);
  } else if (name == "progress_cpus") {
    progress_cpus = parse_cpu_list(value);
  } else if (name == "router_cpus") {
    router_cpus = parse_cpu_list(value);
  } else if (name == "stall_timeout_ms") {
    stall_timeout_ms = to_u32(name, value);
  } else if (name == "router_threads") {
    router_threads = value == "auto" ? 0 : to_u32(name, value);
  } else if (name == "idle_spins") {
    idle_spins = to_u32(name, value);
  } else {
    throw Error("unknown route option '" + raw_name + "'");
  }
}

Options Options::from_env() {
  Options o;
  for (const char* name : kNames) {
    if (const char* v = std::getenv(env_name(name).c_str())) {
      try {
        o.set(name, v);
      } catch (const Error& e) {
        throw Error(env_name(name) + ": " + e.what());
      }
    }
  }
  return o;
}

void Options::apply_args(int* argc, char*** argv) {
  if (argc == nullptr || argv == nullptr || *argv == nullptr) return;
  char** args = *argv;
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    const std::string a = args[i];
    if (a.rfind("--route-", 0) != 0) {
      args[out++] = args[i];
      continue;
    }
    std::string name = a.substr(8), value;
    const auto eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (i + 1 < *argc) {
      value = args[++i];
    } else {
      throw Error("flag " + a + " needs a value");
    }
    set(name, value);
  }
  for (int i = out; i < *argc; ++i) args[i] = nullptr;
  *argc = out;
}

void Options::validate() const {
  auto pow2 = [](std::uint32_t v) { return v != 0 && (v & (v - 1)) == 0; };
  if (buffer_bytes < 256 || buffer_bytes > (64u << 20) || buffer_bytes % 64 != 0)
    throw Error("route buffer_bytes " + std::to_string(buffer_bytes) +
                " must be a multiple of 64 in 256..64 MiB");
  if (max_outstanding == 0 || max_outstanding > 4096)
    throw Error("route max_outstanding must be in 1..4096, got " + std::to_string(max_outstanding));
  if (recv_buffers == 0 || recv_buffers > 4096)
    throw Error("route recv_buffers must be in 1..4096, got " + std::to_string(recv_buffers));
  if (!pow2(ring_slots) || ring_slots < 2 || ring_slots > 65536)
    throw Error("route ring_slots must be a power of two in 2..65536, got " + std::to_string(ring_slots));
  // A run waiting for room in a full delivery ring is copied into a router
  // buffer, so a slot (the largest run that waits) must fit a buffer; inline mode has no rings.
  if (mode != Mode::Inline &&
      (ring_slot_bytes < 256 || ring_slot_bytes % 64 != 0 || ring_slot_bytes > buffer_bytes))
    throw Error("route ring_slot_bytes " + std::to_string(ring_slot_bytes) +
                " must be a multiple of 64, at least 256 and at most buffer_bytes (" +
                std::to_string(buffer_bytes) + ")");
  if (node_size == 1 && mode == Mode::Process)
    throw Error("route node_size 1 leaves no application rank beside each router in process mode");
  if (router_threads > 8)
    throw Error("route router_threads must be auto or 1..8, got " + std::to_string(router_threads));
  if (stall_timeout_ms < 100)
    throw Error("route stall_timeout_ms must be at least 100, got " + std::to_string(stall_timeout_ms));
}

std::uint32_t Options::max_payload() const noexcept {
  // A run of one message must fit an aggregation buffer and, in the ring
  // modes, a ring slot; the run header has 24 bits for the payload size.
  const std::uint32_t room = mode == Mode::Inline ? buffer_bytes : std::min(buffer_bytes, ring_slot_bytes);
  return std::min(room - detail::kRunHeaderBytes, detail::kMaxItemBytes);
}

std::string Options::describe() const {
  std::ostringstream s;
  s << "mode=" << to_string(mode) << " routing=" << to_string(routing) << " buffer_bytes=" << buffer_bytes
    << " max_outstanding=" << max_outstanding << " flush_us=" << flush_us << " recv_buffers=" << recv_buffers
    << " ring_slots=" << ring_slots << " ring_slot_bytes=" << ring_slot_bytes << " node_size=" << node_size
    << " app_cpus=" << join(app_cpus) << " progress_cpus=" << join(progress_cpus)
    << " router_cpus=" << join(router_cpus) << " stall_timeout_ms=" << stall_timeout_ms
    << " idle_spins=" << idle_spins
    << " router_threads=" << (router_threads == 0 ? std::string("auto") : std::to_string(router_threads));
  return s.str();
}

}  // namespace ferry::route
