#include "xfer/store/redis/redis_conn.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/log.h"
#include "ferry/core/status.h"

namespace ferry::xfer::store {
namespace {

// The last OpenSSL error of this thread, as text (empty when there is none).
std::string openssl_error() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return {};
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

std::string read_password_file(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0)
    throw Error("redis tier: cannot read the password file " + path + ": " + std::strerror(errno));
  if ((st.st_mode & 077) != 0)
    log::app().warn("redis tier: the password file {} can be read by other users (mode {:o}); chmod 600 it",
                    path, st.st_mode & 0777);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("redis tier: cannot read the password file " + path + ": " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string p = ss.str();
  if (!p.empty() && p.back() == '\n') p.pop_back();
  if (!p.empty() && p.back() == '\r') p.pop_back();
  if (p.empty()) throw Error("redis tier: the password file " + path + " is empty");
  return p;
}

bool is_ip_address(const std::string& host) {
  in6_addr a6;
  in_addr a4;
  return inet_pton(AF_INET, host.c_str(), &a4) == 1 || inet_pton(AF_INET6, host.c_str(), &a6) == 1;
}

void set_timeouts(int fd, int ms) {
  const timeval tv{ms / 1000, (ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
}

// A connected TCP socket, or -1 with *why set.
int tcp_connect(const RedisEndpoint& ep, std::string* why) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(ep.port);
  if (const int rc = getaddrinfo(ep.host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    *why = std::string("cannot resolve the host: ") + gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = res; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      *why = std::string("socket: ") + std::strerror(errno);
      continue;
    }
    int err = 0;
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        const int n = poll(&p, 1, ep.timeout_ms);
        socklen_t len = sizeof(err);
        if (n == 0)
          err = ETIMEDOUT;
        else if (n < 0)
          err = errno;
        else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
          err = errno;
      }
    }
    if (err != 0) {
      *why = std::string("connect: ") + std::strerror(err);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0) return -1;
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  set_timeouts(fd, ep.timeout_ms);
  return fd;
}

// TLS 1.3 sends the server's refusal of the client (no certificate, or an
// untrusted one) after the handshake, so it shows as the first command's
// failure: an alert, or the connection closed or reset. Only a timeout is
// not taken for one.
bool refused_after_handshake(const RedisEndpoint& ep, const RespError& e) {
  return ep.security != nullptr && ep.security->tls() != nullptr && e.failed() && e.err != EAGAIN &&
         e.err != EWOULDBLOCK;
}

std::string refusal_text(const RespError& e) {
  const std::string detail = openssl_error();
  return "the server refused the TLS connection after the handshake (" + describe(e) +
         (detail.empty() ? "" : ": " + detail) + "); does it want a client certificate?";
}

}  // namespace

RedisSecurity::RedisSecurity(const RedisAuthOptions& auth, const RedisTlsOptions& tls) : user_(auth.user) {
  if (!auth.password_file.empty() && !auth.password_env.empty())
    throw Error("redis tier: give the password from a file or from an environment variable, not both");
  if (!auth.password_file.empty()) {
    password_ = read_password_file(auth.password_file);
    has_password_ = true;
  } else if (!auth.password_env.empty()) {
    const char* v = std::getenv(auth.password_env.c_str());
    if (v == nullptr || *v == '\0')
      throw Error("redis tier: the environment variable " + auth.password_env +
                  " that should hold the password " + (v == nullptr ? "is not set" : "is empty"));
    password_ = v;
    has_password_ = true;
  } else if (!user_.empty()) {
    throw Error("redis tier: user " + user_ +
                " has no password (give it in a file or an environment variable)");
  }
  if (!tls.enabled) return;
  tls_name_ = tls.name;
  ctx_ = SSL_CTX_new(TLS_client_method());
  if (ctx_ == nullptr) throw Error("redis tier: cannot make a TLS context: " + openssl_error());
  const auto fail = [&](const std::string& what) {
    const std::string detail = openssl_error();
    SSL_CTX_free(ctx_);
    ctx_ = nullptr;
    throw Error("redis tier: " + what + (detail.empty() ? "" : ": " + detail));
  };
  SSL_CTX_set_min_proto_version(ctx_, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
  if (!tls.ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx_, tls.ca_file.c_str(), nullptr) != 1)
      fail("cannot load the CA file " + tls.ca_file);
  } else if (SSL_CTX_set_default_verify_paths(ctx_) != 1) {
    fail("cannot load the system's CA certificates");
  }
  if (!tls.cert_file.empty()) {
    const std::string& key = tls.key_file.empty() ? tls.cert_file : tls.key_file;
    if (SSL_CTX_use_certificate_chain_file(ctx_, tls.cert_file.c_str()) != 1)
      fail("cannot load the client certificate " + tls.cert_file);
    if (SSL_CTX_use_PrivateKey_file(ctx_, key.c_str(), SSL_FILETYPE_PEM) != 1)
      fail("cannot load the client key " + key);
    if (SSL_CTX_check_private_key(ctx_) != 1)
      fail("the client key " + key + " does not match " + tls.cert_file);
  } else if (!tls.key_file.empty()) {
    fail("a client key (" + tls.key_file + ") without a client certificate");
  }
}

RedisSecurity::~RedisSecurity() {
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
}

std::unique_ptr<RedisConn> RedisConn::open(const RedisEndpoint& ep, RedisConnectError* error) noexcept {
  const std::string address = ep.host + ":" + std::to_string(ep.port);
  try {
    std::unique_ptr<RedisConn> c(new RedisConn());
    std::string why;
    c->fd_ = tcp_connect(ep, &why);
    if (c->fd_ < 0) {
      *error = {"cannot connect to redis " + address + ": " + why, false};
      return nullptr;
    }
    const RedisSecurity* sec = ep.security.get();
    if (sec != nullptr && sec->tls() != nullptr) {
      const std::string& name = sec->tls_name().empty() ? ep.host : sec->tls_name();
      ERR_clear_error();
      c->ssl_ = SSL_new(sec->tls());
      if (c->ssl_ == nullptr || SSL_set_fd(c->ssl_, c->fd_) != 1) {
        *error = {"redis " + address + ": cannot start TLS: " + openssl_error(), true};
        return nullptr;
      }
      // The certificate must name the server: a DNS name or an IP address.
      if (is_ip_address(name)) {
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl_), name.c_str());
      } else {
        SSL_set_tlsext_host_name(c->ssl_, name.c_str());
        SSL_set1_host(c->ssl_, name.c_str());
      }
      const int rc = SSL_connect(c->ssl_);
      if (rc != 1) {
        const int err = SSL_get_error(c->ssl_, rc);
        const long verify = SSL_get_verify_result(c->ssl_);
        if (verify != X509_V_OK) {
          *error = {"redis " + address + ": the server's certificate is not trusted (for the name " + name +
                        "): " + X509_verify_cert_error_string(verify),
                    true};
        } else if (err == SSL_ERROR_SYSCALL || err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
          // The server took the connection but did not shake hands: most likely
          // it does not speak TLS on this port.
          const int e = errno;
          *error = {"redis " + address + ": TLS handshake failed: " +
                        (e == EAGAIN || e == EWOULDBLOCK ? std::string("no answer within the timeout")
                         : e == 0                        ? std::string("connection closed")
                                                         : std::string(std::strerror(e))) +
                        " (is the port a TLS port?)",
                    true};
        } else {
          const std::string detail = openssl_error();
          *error = {"redis " + address + ": TLS handshake failed" + (detail.empty() ? "" : ": " + detail) +
                        " (is the port a TLS port?)",
                    true};
        }
        return nullptr;
      }
    }
    RespValue r;
    if (sec != nullptr && sec->has_password()) {
      const RespError e = sec->user().empty() ? c->command({"AUTH", sec->password()}, &r)
                                              : c->command({"AUTH", sec->user(), sec->password()}, &r);
      if (e.failed()) {
        const bool refused = refused_after_handshake(ep, e);
        *error = {"redis " + address + ": AUTH: " + (refused ? refusal_text(e) : describe(e)), refused};
        return nullptr;
      }
      if (r.is_error()) {
        *error = {"redis " + address + ": AUTH" + (sec->user().empty() ? "" : " as user " + sec->user()) +
                      " refused: " + r.str,
                  true};
        return nullptr;
      }
    }
    if (ep.db != 0) {
      const std::string db = std::to_string(ep.db);
      const RespError e = c->command({"SELECT", db}, &r);
      if (e.failed() || r.is_error()) {
        *error = {"redis " + address + ": SELECT " + db + " failed: " + (e.failed() ? describe(e) : r.str),
                  r.is_error() && r.str.rfind("NOAUTH", 0) == 0};
        return nullptr;
      }
    }
    return c;
  } catch (const std::exception& e) {
    *error = {"redis " + address + ": " + e.what(), false};
    return nullptr;
  }
}

RedisConn::~RedisConn() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  if (fd_ >= 0) close(fd_);
}

RespError RedisConn::send(const std::string& text) noexcept {
  std::vector<iovec> iov{{const_cast<char*>(text.data()), text.size()}};
  return resp_write_all(socket(), iov);
}

RespError RedisConn::command(std::initializer_list<std::string_view> args, RespValue* reply) noexcept {
  std::string text;
  try {
    append_command(text, args);
  } catch (...) {
    return RespError{"out of memory for a command"};
  }
  if (auto e = send(text); e.failed()) return e;
  return read_reply(reader_, socket(), reply);
}

void check_redis_access(const RedisEndpoint& ep) {
  RedisConnectError error;
  const std::unique_ptr<RedisConn> c = RedisConn::open(ep, &error);
  if (c == nullptr) {
    if (error.config) throw Error(error.why);
    log::app().warn("{}; the tier tries again on its first call", error.why);
    return;
  }
  RespValue r;
  if (auto e = c->command({"PING"}, &r); e.failed()) {
    if (refused_after_handshake(ep, e))
      throw Error("redis " + ep.host + ":" + std::to_string(ep.port) + ": " + refusal_text(e));
    log::app().warn("redis {}:{}: PING: {}; the tier tries again on its first call", ep.host, ep.port,
                    describe(e));
    return;
  }
  if (r.is_error() && (r.str.rfind("NOAUTH", 0) == 0 || r.str.rfind("WRONGPASS", 0) == 0))
    throw Error("redis " + ep.host + ":" + std::to_string(ep.port) + " wants a password: " + r.str);
}

}  // namespace ferry::xfer::store
