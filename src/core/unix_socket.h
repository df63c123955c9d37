#pragma once
// Unix stream sockets in the abstract namespace ("@name": no file to clean up
// after a crash), with descriptor passing (SCM_RIGHTS). Shared by the offload
// control link and the transfer agent's protocol. Control path: throws ferry::Error.

#include <cstddef>
#include <cstdint>
#include <string>

namespace ferry::unix_socket {

// A listening socket on "@name". Throws with `what_in_use` when the name is taken.
int listen_abstract(const std::string& name, int backlog, const std::string& what_in_use);
// Connects to "@name"; -1 while nobody listens; throws on other errors.
int try_connect_abstract(const std::string& name);
// accept4 with CLOEXEC, retrying EINTR. Throws on errors.
int accept_blocking(int listen_fd);

// One recvmsg of at most n bytes into p, with `flags` (MSG_CMSG_CLOEXEC is
// added). Descriptors that arrive with the bytes are kept in *passed_fd while
// it is < 0, one at most, and closed otherwise, so none leaks. Returns
// recvmsg's result: bytes, 0 at EOF, or -1 with errno set.
long receive(int fd, void* p, std::size_t n, int flags, int* passed_fd);

// Reads exactly n bytes. Once the first byte is wanted, each further chunk must
// arrive within stall_ms (-1: wait forever), so a peer that sends half a message
// and stalls cannot hang the reader. A descriptor arriving with the bytes is
// stored in *passed_fd (if it is < 0) or closed. Throws on EOF, errors and stalls;
// `what` names the link in the message.
void read_exact(int fd, std::uint8_t* p, std::size_t n, int* passed_fd, int stall_ms, const char* what);
// Writes all bytes, passing pass_fd (>= 0) with the first of them. False when the
// peer is gone (EPIPE, ECONNRESET); throws on other errors.
bool write_all(int fd, const void* data, std::size_t n, int pass_fd, const char* what);

}  // namespace ferry::unix_socket
