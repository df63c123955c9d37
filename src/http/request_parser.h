#pragma once
// The workers' HTTP/1.1 request-head parser (RFC 9112 §3, §5), one source for
// the CPU and the GPU. It takes the head the proxy framed (message_scan.h):
// the request line and the fields up to the empty line. Every malformed part
// gets a specific status: 400 for syntax, 501 for an unknown method, 505 for a
// version other than 1.x.

#include <cstddef>
#include <cstdint>

#include "http/syntax.h"

namespace ferry::http {

enum class Method : std::uint8_t { Get, Head, Post, Put, Delete, Connect, Options, Trace, Patch };

struct RequestHead {
  Method method = Method::Get;
  bool http11 = true;      // HTTP/1.1 (or 1.x, x > 1); false: HTTP/1.0
  bool keep_alive = true;  // after Connection and the version's default
  std::size_t target = 0, target_len = 0;  // the request-target, raw
  std::size_t path = 0, path_len = 0;      // its path, still percent-encoded
  std::size_t query = 0, query_len = 0;    // after '?', without it
  std::uint64_t content_length = 0;
  bool chunked = false;
  // The Authorization field's value (for --api-key); has_authorization false
  // when there is none. More than one is refused (400).
  bool has_authorization = false;
  std::size_t authorization = 0, authorization_len = 0;
};

namespace detail {

FERRY_HOST_DEVICE inline bool method_from(const std::uint8_t* p, std::size_t n, Method* m) {
  using syntax::equals;
  if (equals(p, n, "GET")) *m = Method::Get;
  else if (equals(p, n, "HEAD")) *m = Method::Head;
  else if (equals(p, n, "POST")) *m = Method::Post;
  else if (equals(p, n, "PUT")) *m = Method::Put;
  else if (equals(p, n, "DELETE")) *m = Method::Delete;
  else if (equals(p, n, "CONNECT")) *m = Method::Connect;
  else if (equals(p, n, "OPTIONS")) *m = Method::Options;
  else if (equals(p, n, "TRACE")) *m = Method::Trace;
  else if (equals(p, n, "PATCH")) *m = Method::Patch;
  else return false;
  return true;
}

// Splits the target into path and query (origin-form, or the path of an
// absolute-form http(s) URI); false for any other form.
FERRY_HOST_DEVICE inline bool split_target(const std::uint8_t* p, RequestHead* r) {
  std::size_t i = r->target;
  const std::size_t end = r->target + r->target_len;
  if (p[i] != '/') {
    std::size_t scheme = 0;
    if (syntax::istarts_with(p + i, end - i, "http://")) scheme = 7;
    else if (syntax::istarts_with(p + i, end - i, "https://")) scheme = 8;
    else return false;
    i += scheme;
    const std::size_t authority = i;
    while (i < end && p[i] != '/' && p[i] != '?') ++i;
    if (i == authority) return false;
  }
  r->path = i;
  while (i < end && p[i] != '?') ++i;
  r->path_len = i - r->path;
  if (i < end) {
    r->query = i + 1;
    r->query_len = end - i - 1;
  }
  return true;
}

// Connection: a comma-separated list of tokens; "close" and "keep-alive" count.
FERRY_HOST_DEVICE inline void apply_connection(const std::uint8_t* p, std::size_t v, std::size_t n,
                                               bool* saw_close, bool* saw_keep_alive) {
  std::size_t i = v;
  const std::size_t end = v + n;
  while (i < end) {
    while (i < end && (p[i] == ',' || syntax::is_ows(p[i]))) ++i;
    const std::size_t t = i;
    while (i < end && p[i] != ',' && !syntax::is_ows(p[i])) ++i;
    if (syntax::iequals(p + t, i - t, "close")) *saw_close = true;
    if (syntax::iequals(p + t, i - t, "keep-alive")) *saw_keep_alive = true;
  }
}

}  // namespace detail

FERRY_HOST_DEVICE inline Verdict parse_request_head(const std::uint8_t* p, std::size_t n, RequestHead* r) {
  using namespace syntax;
  const std::size_t lf = find_lf(p, 0, n);
  if (lf == n) return {400, "no request line"};
  const std::size_t rl = line_end(p, 0, lf);

  // method SP request-target SP HTTP-version
  std::size_t i = 0;
  while (i < rl && is_tchar(p[i])) ++i;
  if (i == 0 || i == rl || p[i] != ' ') return {400, "malformed method"};
  const bool known = detail::method_from(p, i, &r->method);
  r->target = ++i;
  while (i < rl && p[i] > 0x20 && p[i] != 0x7f) ++i;
  r->target_len = i - r->target;
  if (r->target_len == 0 || i == rl || p[i] != ' ') return {400, "malformed request target"};
  ++i;
  if (rl - i != 8 || !equals(p + i, 5, "HTTP/") || p[i + 6] != '.' || p[i + 5] < '0' || p[i + 5] > '9' ||
      p[i + 7] < '0' || p[i + 7] > '9')
    return {400, "malformed HTTP version"};
  if (p[i + 5] != '1') return {505, "HTTP version other than 1.x"};
  r->http11 = p[i + 7] != '0';
  if (!known) return {501, "unknown method"};

  bool saw_close = false, saw_keep_alive = false, has_length = false;
  int hosts = 0;
  std::size_t pos = lf + 1;
  for (;;) {
    const std::size_t flf = find_lf(p, pos, n);
    if (flf == n) return {400, "head does not end with an empty line"};
    const std::size_t le = line_end(p, pos, flf);
    if (le == pos) break;
    if (is_ows(p[pos])) return {400, "obsolete line folding"};
    Field f;
    if (!split_field(p, pos, le, &f)) return {400, "malformed header field"};
    const std::uint8_t* name = p + f.name;
    // By length first: most fields are none of these five.
    if (f.name_len == 4 && iequals(name, 4, "host")) {
      ++hosts;
      for (std::size_t k = 0; k < f.value_len; ++k)
        if (!is_host_char(p[f.value + k])) return {400, "invalid Host value"};
    } else if (f.name_len == 10 && iequals(name, 10, "connection")) {
      detail::apply_connection(p, f.value, f.value_len, &saw_close, &saw_keep_alive);
    } else if (f.name_len == 14 && iequals(name, 14, "content-length")) {
      if (has_length) return {400, "more than one Content-Length"};
      if (!parse_decimal(p + f.value, f.value_len, ~std::uint64_t{0} / 2, &r->content_length))
        return {400, "Content-Length is not a decimal number"};
      has_length = true;
    } else if (f.name_len == 13 && iequals(name, 13, "authorization")) {
      if (r->has_authorization) return {400, "more than one Authorization"};
      r->has_authorization = true;
      r->authorization = f.value;
      r->authorization_len = f.value_len;
    } else if (f.name_len == 17 && iequals(name, 17, "transfer-encoding")) {
      if (r->chunked || !iequals(p + f.value, f.value_len, "chunked"))
        return {400, "Transfer-Encoding other than one chunked"};
      r->chunked = true;
    }
    pos = flf + 1;
  }
  if (has_length && r->chunked) return {400, "both Content-Length and Transfer-Encoding"};
  if (r->http11 && hosts != 1) return {400, hosts == 0 ? "HTTP/1.1 request without Host" : "more than one Host"};
  if (hosts > 1) return {400, "more than one Host"};
  r->keep_alive = r->http11 ? !saw_close : (saw_keep_alive && !saw_close);

  const bool asterisk = r->target_len == 1 && p[r->target] == '*';
  if (asterisk) return r->method == Method::Options ? Verdict{404, "OPTIONS * is not served"}
                                                    : Verdict{400, "asterisk-form target without OPTIONS"};
  if (r->method == Method::Connect) return {404, "CONNECT is not served"};
  if (!detail::split_target(p, r)) return {400, "request target is neither origin- nor absolute-form"};
  return {200, ""};
}

// Percent-decodes a path into dst (room for n bytes) and removes its dot
// segments (RFC 3986 §5.2.4). A path that would climb above the root, an
// encoded NUL or a malformed escape is a 400.
FERRY_HOST_DEVICE inline Verdict normalize_path(const std::uint8_t* src, std::size_t n, std::uint8_t* dst,
                                               std::size_t* out_len) {
  std::size_t len = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint8_t c = src[i];
    if (c == '%') {
      if (i + 2 >= n) return {400, "malformed percent escape in the path"};
      const int hi = syntax::hex_value(src[i + 1]);
      const int lo = syntax::hex_value(src[i + 2]);
      if (hi < 0 || lo < 0) return {400, "malformed percent escape in the path"};
      c = static_cast<std::uint8_t>(hi * 16 + lo);
      if (c == 0) return {400, "encoded NUL in the path"};
      i += 2;
    }
    dst[len++] = c;
  }
  if (len == 0 || dst[0] != '/') return {400, "path does not start with /"};
  // In place: the write position never passes the read position.
  std::size_t w = 0;
  std::size_t r = 0;
  while (r < len) {
    const std::size_t s = r + 1;
    std::size_t e = s;
    while (e < len && dst[e] != '/') ++e;
    const std::size_t seg = e - s;
    if (seg == 1 && dst[s] == '.') {
      if (e == len) dst[w++] = '/';
    } else if (seg == 2 && dst[s] == '.' && dst[s + 1] == '.') {
      if (w == 0) return {400, "path climbs above the root"};
      while (w > 0 && dst[w - 1] != '/') --w;
      --w;
      if (e == len) dst[w++] = '/';
    } else {
      dst[w++] = '/';
      for (std::size_t k = s; k < e; ++k) dst[w++] = dst[k];
    }
    r = e;
  }
  if (w == 0) dst[w++] = '/';
  *out_len = w;
  return {200, ""};
}

}  // namespace ferry::http
