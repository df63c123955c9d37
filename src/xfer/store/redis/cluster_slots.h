#pragma once
// What a Redis Cluster client must know of the cluster's keyspace: which of the
// 16384 hash slots a key falls in (CRC16 of the key, or of its hash tag), which
// primary serves each slot (from CLUSTER SHARDS, or CLUSTER SLOTS on servers
// before 7.0), and where a MOVED or ASK redirect sends a command. The replies
// come from peers: every parser here checks what it reads and refuses what is
// not the documented shape (fuzz/cluster_slots_fuzz.cpp).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "xfer/store/redis/resp_io.h"

namespace ferry::xfer::store {

inline constexpr unsigned kClusterSlots = 16384;

// CRC16-CCITT (XModem), as Redis Cluster hashes keys: crc16("123456789") == 0x31C3.
std::uint16_t crc16(std::string_view bytes) noexcept;

// The key's slot: CRC16 of the key mod 16384, where the key has a hash tag
// ("{...}": the bytes between the first '{' and the first '}' after it, when
// there are any) the hash of the tag alone.
unsigned key_hash_slot(std::string_view key) noexcept;

struct ClusterAddress {
  std::string host;
  int port = 0;
  bool operator==(const ClusterAddress&) const = default;
  std::string text() const;  // "host:port", "[v6]:port"
};

// Slots first..last (inclusive) are served by `primary`.
struct SlotRange {
  unsigned first = 0, last = 0;
  ClusterAddress primary;
};

// The slot ranges of a CLUSTER SHARDS reply (RESP2: flat field/value arrays).
// Of each shard's nodes, the primary that is online (else any primary); its
// endpoint, else its ip, else `asked` (the node that answered: Redis sends "?" or
// "" where it does not know its own address). `tls`: the node's tls-port rather
// than its port. nullopt, with *why, when the reply is not of that shape.
std::optional<std::vector<SlotRange>> parse_cluster_shards(const RespValue& reply, const std::string& asked,
                                                           bool tls, std::string* why);
// The same from a CLUSTER SLOTS reply: [first, last, [ip, port, id...], replicas...].
std::optional<std::vector<SlotRange>> parse_cluster_slots(const RespValue& reply, const std::string& asked,
                                                          std::string* why);

// An error reply "MOVED <slot> <host>:<port>" (the slot has a new owner) or
// "ASK <slot> <host>:<port>" (this key is being migrated there: ask once, after
// ASKING). An empty host means the node that answered (`asked`).
struct Redirect {
  bool ask = false;
  unsigned slot = 0;
  ClusterAddress to;
};
std::optional<Redirect> parse_redirect(std::string_view error, const std::string& asked) noexcept;

}  // namespace ferry::xfer::store
