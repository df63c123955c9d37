#pragma once
// Small socket and thread helpers shared by the server, the client, the echo
// baseline and the tests. Control path: they throw ferry::Error.

#include <cstdint>
#include <string>

namespace ferry::net {

// A non-blocking TCP listener on address:port (port 0 picks a free one).
// Returns the fd; *bound_port receives the port actually bound.
int listen_tcp(const std::string& address, std::uint16_t port, std::uint16_t* bound_port,
               int backlog = 4096);

// Connects to address:port (blocking socket, TCP_NODELAY). Returns -1 with errno
// set when the connection is refused; throws on other errors.
int connect_tcp(const std::string& address, std::uint16_t port);

void set_nonblocking(int fd);
void set_nodelay(int fd);

// Raises the soft RLIMIT_NOFILE to the hard limit (a server with 1,000 clients
// needs more than the usual 1024). Returns the new soft limit.
std::uint64_t raise_fd_limit();

// Pins the calling thread to one CPU core. Throws with the core named.
void pin_current_thread(int cpu);

// "1.2.3.4:5678" of a connected socket's peer, for log lines.
std::string peer_name(int fd);

// Writes all bytes on a blocking socket; false when the peer is gone.
bool write_all(int fd, const void* data, std::size_t len);

}  // namespace ferry::net
