#pragma once
// Who may connect to a local endpoint: the kernel's word on the peer's uid
// (SO_PEERCRED on Unix sockets; the socket table for loopback TCP), checked
// against a policy. By default only the serving process's own uid is let in;
// other uids only when named (docs/security.md).

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace ferry {

struct PeerCredentials {
  pid_t pid = 0;  // 0 where the kernel does not say (TCP)
  uid_t uid = 0;
  gid_t gid = 0;
};

struct PeerPolicy {
  std::vector<uid_t> allowed_uids;  // besides the serving process's own uid
  bool allow_any_uid = false;       // every local user: only by an explicit flag

  // Why the peer is refused, or std::nullopt when it may connect.
  std::optional<std::string> refusal(const PeerCredentials& peer) const;
  // "uid 1000 only", "uids 1000, 1001", "any local user": for logs and --help.
  std::string describe() const;
};

// The credentials of a connected Unix socket's peer (SO_PEERCRED). Throws
// ferry::Error if the kernel will not say.
PeerCredentials unix_peer_credentials(int fd);

// The uid that owns the other end of a TCP connection on this host, from the
// kernel's socket table (NETLINK_SOCK_DIAG). std::nullopt when the peer is not
// on this host (its socket is not in the table).
std::optional<uid_t> local_tcp_peer_uid(int fd);

// Parses a --allow-uid value: a number or a user name. Throws ferry::Error.
uid_t parse_uid(const std::string& text);

}  // namespace ferry
