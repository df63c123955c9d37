#include "xfer/store/redis/cluster_slots.h"

#include <array>
#include <charconv>

namespace ferry::xfer::store {
namespace {

constexpr std::array<std::uint16_t, 256> make_crc16_table() {
  std::array<std::uint16_t, 256> t{};
  for (unsigned i = 0; i < 256; ++i) {
    std::uint16_t c = static_cast<std::uint16_t>(i << 8);
    for (int b = 0; b < 8; ++b) c = static_cast<std::uint16_t>((c & 0x8000) ? (c << 1) ^ 0x1021 : c << 1);
    t[i] = c;
  }
  return t;
}
constexpr std::array<std::uint16_t, 256> kCrc16 = make_crc16_table();

bool is_bulk(const RespValue& v) {
  return v.kind == RespReader::Kind::Bulk || v.kind == RespReader::Kind::Status;
}

// A slot number from an integer reply.
bool slot_of(const RespValue& v, unsigned* out) {
  if (v.kind != RespReader::Kind::Integer || v.n < 0 || v.n >= kClusterSlots) return false;
  *out = static_cast<unsigned>(v.n);
  return true;
}

bool port_of(const RespValue& v, int* out) {
  if (v.kind != RespReader::Kind::Integer || v.n < 0 || v.n > 65535) return false;
  *out = static_cast<int>(v.n);
  return true;
}

// Where a node says it is: "?" and "" mean it does not know.
std::string host_or(std::string_view host, const std::string& asked) {
  return host.empty() || host == "?" ? asked : std::string(host);
}

}  // namespace

std::uint16_t crc16(std::string_view bytes) noexcept {
  std::uint16_t crc = 0;
  for (const char ch : bytes)
    crc =
        static_cast<std::uint16_t>((crc << 8) ^ kCrc16[((crc >> 8) ^ static_cast<unsigned char>(ch)) & 0xff]);
  return crc;
}

unsigned key_hash_slot(std::string_view key) noexcept {
  if (const std::size_t open = key.find('{'); open != std::string_view::npos) {
    const std::size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) key = key.substr(open + 1, close - open - 1);
  }
  return crc16(key) & (kClusterSlots - 1);
}

std::string ClusterAddress::text() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::optional<std::vector<SlotRange>> parse_cluster_shards(const RespValue& reply, const std::string& asked,
                                                           bool tls, std::string* why) {
  const auto bad = [&](const char* what) -> std::optional<std::vector<SlotRange>> {
    *why = std::string("CLUSTER SHARDS: ") + what;
    return std::nullopt;
  };
  if (reply.kind != RespReader::Kind::Array) return bad("not an array");
  std::vector<SlotRange> out;
  for (const RespValue& shard : reply.elements) {
    if (shard.kind != RespReader::Kind::Array || shard.elements.size() % 2 != 0)
      return bad("a shard is not a map");
    const RespValue* slots = nullptr;
    const RespValue* nodes = nullptr;
    for (std::size_t i = 0; i < shard.elements.size(); i += 2) {
      if (!is_bulk(shard.elements[i])) return bad("a shard's field name is not a string");
      if (shard.elements[i].str == "slots") slots = &shard.elements[i + 1];
      if (shard.elements[i].str == "nodes") nodes = &shard.elements[i + 1];
    }
    if (slots == nullptr || nodes == nullptr || slots->kind != RespReader::Kind::Array ||
        nodes->kind != RespReader::Kind::Array || slots->elements.size() % 2 != 0)
      return bad("a shard without slots and nodes");
    if (slots->elements.empty()) continue;  // a shard that serves nothing (a failed primary's)
    // The shard's primary: one online if there is one.
    std::optional<ClusterAddress> primary;
    bool online = false;
    for (const RespValue& node : nodes->elements) {
      if (node.kind != RespReader::Kind::Array || node.elements.size() % 2 != 0)
        return bad("a node is not a map");
      std::string_view ip, endpoint, role, health;
      int port = -1, tls_port = -1;
      for (std::size_t i = 0; i < node.elements.size(); i += 2) {
        const RespValue& name = node.elements[i];
        const RespValue& value = node.elements[i + 1];
        if (!is_bulk(name)) return bad("a node's field name is not a string");
        if (name.str == "port" || name.str == "tls-port") {
          if (!port_of(value, name.str == "port" ? &port : &tls_port))
            return bad("a node's port is not a port");
        } else if (name.str == "ip" || name.str == "endpoint" || name.str == "role" || name.str == "health") {
          if (!is_bulk(value)) return bad("a node's address, role or health is not a string");
          (name.str == "ip"         ? ip
           : name.str == "endpoint" ? endpoint
           : name.str == "role"     ? role
                                    : health) = value.str;
        }
      }
      if (role != "master") continue;
      const int p = tls ? tls_port : port;
      if (p <= 0) continue;  // no port of the kind we speak
      const bool up = health.empty() || health == "online";
      if (primary && (online || !up)) continue;
      primary = ClusterAddress{host_or(endpoint.empty() || endpoint == "?" ? ip : endpoint, asked), p};
      online = up;
    }
    if (!primary) return bad(tls ? "a shard has no primary with a tls-port" : "a shard has no primary");
    for (std::size_t i = 0; i < slots->elements.size(); i += 2) {
      SlotRange r;
      if (!slot_of(slots->elements[i], &r.first) || !slot_of(slots->elements[i + 1], &r.last) ||
          r.first > r.last)
        return bad("a slot range is not two slots");
      r.primary = *primary;
      out.push_back(std::move(r));
    }
  }
  return out;
}

std::optional<std::vector<SlotRange>> parse_cluster_slots(const RespValue& reply, const std::string& asked,
                                                          std::string* why) {
  const auto bad = [&](const char* what) -> std::optional<std::vector<SlotRange>> {
    *why = std::string("CLUSTER SLOTS: ") + what;
    return std::nullopt;
  };
  if (reply.kind != RespReader::Kind::Array) return bad("not an array");
  std::vector<SlotRange> out;
  for (const RespValue& e : reply.elements) {
    if (e.kind != RespReader::Kind::Array || e.elements.size() < 3)
      return bad("a range is not [first, last, node]");
    SlotRange r;
    if (!slot_of(e.elements[0], &r.first) || !slot_of(e.elements[1], &r.last) || r.first > r.last)
      return bad("a slot range is not two slots");
    const RespValue& node = e.elements[2];
    if (node.kind != RespReader::Kind::Array || node.elements.size() < 2 || !is_bulk(node.elements[0]) ||
        !port_of(node.elements[1], &r.primary.port))
      return bad("a node is not [ip, port, ...]");
    r.primary.host = host_or(node.elements[0].str, asked);
    out.push_back(std::move(r));
  }
  return out;
}

std::optional<Redirect> parse_redirect(std::string_view error, const std::string& asked) noexcept {
  Redirect r;
  if (error.substr(0, 6) == "MOVED ") {
    error.remove_prefix(6);
  } else if (error.substr(0, 4) == "ASK ") {
    r.ask = true;
    error.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const std::size_t space = error.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const std::string_view slot = error.substr(0, space), address = error.substr(space + 1);
  const auto [p, ec] = std::from_chars(slot.data(), slot.data() + slot.size(), r.slot);
  if (ec != std::errc() || p != slot.data() + slot.size() || slot.empty() || r.slot >= kClusterSlots)
    return std::nullopt;
  const std::size_t colon = address.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  std::string_view host = address.substr(0, colon);
  const std::string_view port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const auto [q, ec2] = std::from_chars(port.data(), port.data() + port.size(), r.to.port);
  if (ec2 != std::errc() || q != port.data() + port.size() || port.empty() || r.to.port <= 0 ||
      r.to.port > 65535)
    return std::nullopt;
  if (host.find(' ') != std::string_view::npos) return std::nullopt;
  try {
    r.to.host = host_or(host, asked);
  } catch (...) {
    return std::nullopt;
  }
  return r;
}

}  // namespace ferry::xfer::store
