#pragma once
// One connection to a Redis server, as both redis tiers use it: TCP with a
// connect and I/O timeout, optionally TLS (OpenSSL, the server's certificate
// checked against a CA file and its name), then AUTH (an ACL user and password)
// and SELECT. Replies are read with resp_io.h's reader; commands off the data
// path go through command().
//
// Debian 12's hiredis (0.14) has no TLS, so the tiers speak RESP themselves
// (resp_io.h) and make their connections here.
//
// Trust (docs/security.md): with TLS the server must present a certificate that
// chains to the CA file (or the system's CAs when none is given) and names the
// host connected to (or tls_name); anything else fails the handshake. The
// password is read once at set-up from a file or an environment variable, never
// from the command line.

#include <memory>
#include <string>
#include <string_view>

#include "xfer/store/redis/resp_io.h"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX

namespace ferry::xfer::store {

// How a tier's connections authenticate, as given in its spec.
struct RedisAuthOptions {
  std::string user;           // ACL user; empty: AUTH <password> (requirepass, or the default user)
  std::string password_file;  // the password is this file's content, less one trailing newline
  std::string password_env;   // or this environment variable's value
  bool any() const { return !user.empty() || !password_file.empty() || !password_env.empty(); }
};

struct RedisTlsOptions {
  bool enabled = false;
  std::string ca_file;    // CAs to trust; empty: the system's
  std::string cert_file;  // a client certificate, for servers that ask for one (tls-auth-clients)
  std::string key_file;   // its key (default: cert_file)
  std::string name;       // the name the certificate must carry; empty: the host connected to
};

// What every connection of a tier uses, resolved at set-up: the password read,
// the TLS context built. Shared by all the tier's pools; immutable.
class RedisSecurity {
 public:
  // Reads the password and loads the CA, certificate and key. Throws ferry::Error
  // naming the file or variable and what is wrong.
  RedisSecurity(const RedisAuthOptions& auth, const RedisTlsOptions& tls);
  ~RedisSecurity();
  RedisSecurity(const RedisSecurity&) = delete;
  RedisSecurity& operator=(const RedisSecurity&) = delete;

  const std::string& user() const { return user_; }
  const std::string& password() const { return password_; }
  bool has_password() const { return has_password_; }
  ssl_ctx_st* tls() const { return ctx_; }  // nullptr: plain TCP
  const std::string& tls_name() const { return tls_name_; }

 private:
  std::string user_, password_;
  bool has_password_ = false;
  ssl_ctx_st* ctx_ = nullptr;
  std::string tls_name_;
};

struct RedisEndpoint {
  std::string host = "127.0.0.1";
  int port = 6379;
  int db = 0;
  int timeout_ms = 2000;                          // connect, and every read or write on the socket
  std::shared_ptr<const RedisSecurity> security;  // nullptr: plain TCP, no AUTH
};

// Why a connection could not be made: unreachable (try again later), or refused
// for a reason that will not go away by itself (wrong password, untrusted
// certificate): a tier reports that at start.
struct RedisConnectError {
  std::string why;
  bool config = false;  // AUTH refused, the certificate not trusted, the handshake failed
};

class RedisConn {
 public:
  // Connects, shakes hands, authenticates and selects the database; nullptr with
  // *error filled when any of it fails.
  static std::unique_ptr<RedisConn> open(const RedisEndpoint& ep, RedisConnectError* error) noexcept;
  ~RedisConn();
  RedisConn(const RedisConn&) = delete;
  RedisConn& operator=(const RedisConn&) = delete;

  RespSocket socket() const { return RespSocket(fd_, ssl_); }
  RespReader& reader() { return reader_; }

  // Sends one command and reads its reply (an error reply is a reply, not a
  // failure); a RespError when the connection failed, which is then unusable.
  RespError command(std::initializer_list<std::string_view> args, RespValue* reply) noexcept;
  // Sends text (commands appended with append_command) without reading.
  RespError send(const std::string& text) noexcept;

 private:
  RedisConn() = default;

  int fd_ = -1;
  ssl_st* ssl_ = nullptr;
  RespReader reader_;
};

// Set-up's check of a server: connects and sends PING. Throws ferry::Error when
// the server refuses what the tier is configured with (AUTH refused, the
// certificate not trusted, a password wanted and none given); a server that
// cannot be reached is only logged (the tier reports it per item).
void check_redis_access(const RedisEndpoint& ep);

}  // namespace ferry::xfer::store
