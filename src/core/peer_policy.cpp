#include "ferry/core/peer_policy.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "ferry/core/status.h"

namespace ferry {
namespace {

// One end of a TCP connection, as the socket table keys it: family, address, port.
struct TcpEnd {
  int family = 0;
  std::uint8_t addr[16] = {};
  std::uint16_t port_be = 0;
};

bool tcp_end_of(const sockaddr_storage& ss, TcpEnd* out) {
  if (ss.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(ss);
    out->family = AF_INET;
    std::memcpy(out->addr, &a.sin_addr, 4);
    out->port_be = a.sin_port;
    return true;
  }
  if (ss.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(ss);
    out->port_be = a.sin6_port;
    if (IN6_IS_ADDR_V4MAPPED(&a.sin6_addr)) {  // an IPv4 peer of a dual-stack listener
      out->family = AF_INET;
      std::memcpy(out->addr, a.sin6_addr.s6_addr + 12, 4);
    } else {
      out->family = AF_INET6;
      std::memcpy(out->addr, a.sin6_addr.s6_addr, 16);
    }
    return true;
  }
  return false;
}

}  // namespace

std::optional<std::string> PeerPolicy::refusal(const PeerCredentials& peer) const {
  if (allow_any_uid || peer.uid == geteuid()) return std::nullopt;
  if (std::find(allowed_uids.begin(), allowed_uids.end(), peer.uid) != allowed_uids.end()) return std::nullopt;
  return "uid " + std::to_string(peer.uid) + " is not allowed (" + describe() +
         "; let it in with PeerPolicy::allowed_uids " + std::to_string(peer.uid) + ")";
}

std::string PeerPolicy::describe() const {
  if (allow_any_uid) return "any local user";
  std::string s = "uid " + std::to_string(geteuid());
  for (uid_t u : allowed_uids) s += ", " + std::to_string(u);
  return s + (allowed_uids.empty() ? " only" : "");
}

PeerCredentials unix_peer_credentials(int fd) {
  ucred c{};
  socklen_t len = sizeof(c);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &len) != 0) throw_errno("SO_PEERCRED");
  return {c.pid, c.uid, c.gid};
}

std::optional<uid_t> local_tcp_peer_uid(int fd) {
  sockaddr_storage ours{}, theirs{};
  socklen_t len = sizeof(ours);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ours), &len) != 0) throw_errno("getsockname");
  len = sizeof(theirs);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&theirs), &len) != 0) throw_errno("getpeername");
  TcpEnd us, peer;
  if (!tcp_end_of(ours, &us) || !tcp_end_of(theirs, &peer) || us.family != peer.family)
    return std::nullopt;

  // Ask for the peer's own socket: its source is the peer's end, its destination ours.
  struct {
    nlmsghdr nh;
    inet_diag_req_v2 req;
  } q{};
  q.nh.nlmsg_len = sizeof(q);
  q.nh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  q.nh.nlmsg_flags = NLM_F_REQUEST;
  q.req.sdiag_family = static_cast<std::uint8_t>(peer.family);
  q.req.sdiag_protocol = IPPROTO_TCP;
  q.req.idiag_states = ~0u;
  q.req.id.idiag_sport = peer.port_be;
  q.req.id.idiag_dport = us.port_be;
  std::memcpy(q.req.id.idiag_src, peer.addr, sizeof(q.req.id.idiag_src));
  std::memcpy(q.req.id.idiag_dst, us.addr, sizeof(q.req.id.idiag_dst));
  q.req.id.idiag_cookie[0] = q.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;

  const int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (nl < 0) throw_errno("NETLINK_SOCK_DIAG socket");
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  std::optional<uid_t> uid;
  if (sendto(nl, &q, sizeof(q), 0, reinterpret_cast<sockaddr*>(&kernel), sizeof(kernel)) == sizeof(q)) {
    alignas(nlmsghdr) char buf[8192];
    const ssize_t n = recv(nl, buf, sizeof(buf), 0);
    if (n > 0) {
      auto* h = reinterpret_cast<nlmsghdr*>(buf);
      int left = static_cast<int>(n);
      for (; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
        if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY) continue;  // NLMSG_ERROR: not on this host
        const auto* m = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
        uid = m->idiag_uid;
        break;
      }
    }
  }
  ::close(nl);
  return uid;
}

uid_t parse_uid(const std::string& text) {
  if (!text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    try {
      const unsigned long v = std::stoul(text);
      if (v < 0xffffffffUL) return static_cast<uid_t>(v);
    } catch (const std::logic_error&) {
    }
    throw Error("PeerPolicy::allowed_uids: uid " + text + " is out of range");
  }
  passwd pw{}, *found = nullptr;
  char buf[4096];
  if (getpwnam_r(text.c_str(), &pw, buf, sizeof(buf), &found) != 0 || found == nullptr)
    throw Error("PeerPolicy::allowed_uids: '" + text + "' is neither a uid nor a user name on this machine");
  return pw.pw_uid;
}

}  // namespace ferry
