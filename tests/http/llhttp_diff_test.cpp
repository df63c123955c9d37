// Differential test: Ferry's request parsing against llhttp (Node.js's parser).
//
// Ferry parses a request in two places: the proxy frames it (scan_message: the
// end of the head, the Content-Length or chunked body, smuggling refused) and a
// worker parses the head it was given (parse_request_head). Each request of a
// corpus (hand-written cases plus deterministic mutations of the valid ones)
// goes through that pipeline and through llhttp, built strict
// (LLHTTP_STRICT_MODE=1) and with no lenient flag, and the two must agree on
//   (a) whether the first request in the bytes is accepted, rejected, or
//       still incomplete, and
//   (b) for a request both accept: method, target, version, the header fields
//       (names and values), the body length and where the request ends.
// Where they differ by design, a named rule below (kExceptions) says why, with
// the RFC 9112 / 9110 text that allows Ferry's answer. A difference no rule
// explains fails the test; kKnownFerryBugs lists differences that are Ferry's
// bugs, reported (printed) rather than failed on until the parser is fixed.

#include <gtest/gtest.h>
#include <llhttp.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "http/message_scan.h"
#include "http/request_parser.h"

namespace ferry::http {
namespace {

using namespace std::string_literals;  // "...\0..."s keeps embedded NULs

// ---------------------------------------------------------------------------
// What each parser made of the first request in a buffer.

struct Header {
  std::string name, value;
  bool operator==(const Header&) const = default;
};

struct Outcome {
  enum class Kind { Accepted, Rejected, Incomplete };
  Kind kind = Kind::Incomplete;
  std::string why;  // Rejected: Ferry's status and reason, or llhttp's error name and reason
  int status = 0;   // Ferry only: the verdict's status
  // Accepted only:
  std::string method, target;
  bool http11 = false;  // a minor version above 0
  std::vector<Header> headers;
  bool chunked = false;
  std::uint64_t content_length = 0;  // the body's length when it is not chunked
  std::size_t frame_bytes = 0;       // where the request ends, leading empty lines included
};

const char* kind_name(Outcome::Kind k) {
  switch (k) {
    case Outcome::Kind::Accepted: return "accepted";
    case Outcome::Kind::Rejected: return "rejected";
    case Outcome::Kind::Incomplete: return "incomplete";
  }
  return "?";
}

const std::uint8_t* u8(std::string_view s) {
  return reinterpret_cast<const std::uint8_t*>(s.data());
}

// ---------------------------------------------------------------------------
// Ferry: the proxy's scan, then the worker's head parser on the head it framed.

// Generous, so that no case is refused for its size: limits are not compared.
constexpr Limits kGenerousLimits{1u << 20, 1u << 22, 1u << 24};

const char* method_name(Method m) {
  switch (m) {
    case Method::Get: return "GET";
    case Method::Head: return "HEAD";
    case Method::Post: return "POST";
    case Method::Put: return "PUT";
    case Method::Delete: return "DELETE";
    case Method::Connect: return "CONNECT";
    case Method::Options: return "OPTIONS";
    case Method::Trace: return "TRACE";
    case Method::Patch: return "PATCH";
  }
  return "?";
}

// The header fields of a head the parser accepted, as a worker reads them:
// each line after the request line split by the same helper the parser uses.
std::vector<Header> ferry_headers(const std::uint8_t* head, std::size_t n) {
  std::vector<Header> out;
  std::size_t pos = syntax::find_lf(head, 0, n) + 1;
  for (;;) {
    const std::size_t lf = syntax::find_lf(head, pos, n);
    const std::size_t le = syntax::line_end(head, pos, lf);
    if (lf == n || le == pos) break;
    syntax::Field f;
    if (syntax::split_field(head, pos, le, &f))
      out.push_back({std::string(reinterpret_cast<const char*>(head + f.name), f.name_len),
                     std::string(reinterpret_cast<const char*>(head + f.value), f.value_len)});
    pos = lf + 1;
  }
  return out;
}

Outcome run_ferry(std::string_view req) {
  Outcome o;
  const MessageScan s = scan_message(u8(req), req.size(), kGenerousLimits);
  if (s.result == MessageScan::Result::NeedMore) return o;
  if (s.result == MessageScan::Result::Reject) {
    o.kind = Outcome::Kind::Rejected;
    o.status = s.verdict.status;
    o.why = "scan " + std::to_string(s.verdict.status) + ": " + s.verdict.why;
    return o;
  }
  const std::uint8_t* head = u8(req) + s.head_start;
  RequestHead r;
  const Verdict v = parse_request_head(head, s.head_bytes, &r);
  o.status = v.status;
  // 404 is the answer to OPTIONS * and CONNECT, which are well-formed
  // requests Ferry does not serve: accepted as far as parsing goes.
  if (v.status != 200 && v.status != 404) {
    o.kind = Outcome::Kind::Rejected;
    o.why = "parse " + std::to_string(v.status) + ": " + v.why;
    return o;
  }
  o.kind = Outcome::Kind::Accepted;
  o.method = method_name(r.method);
  o.target.assign(reinterpret_cast<const char*>(head + r.target), r.target_len);
  o.http11 = r.http11;
  o.headers = ferry_headers(head, s.head_bytes);
  o.chunked = r.chunked;
  o.content_length = r.chunked ? 0 : r.content_length;
  o.frame_bytes = s.frame_bytes;
  return o;
}

// ---------------------------------------------------------------------------
// llhttp: strict, no lenient flags; the callbacks collect the first message and
// pause the parser when it is complete, so that the pause position is where
// that message ends.

struct LlhttpCapture {
  Outcome* out = nullptr;
  bool field_open = false;    // a header name is being received
  bool headers_done = false;  // later fields are trailers, not compared
  bool message_done = false;
  std::uint64_t body_bytes = 0;
};

LlhttpCapture* capture(llhttp_t* p) {
  return static_cast<LlhttpCapture*>(p->data);
}

int ll_on_method(llhttp_t* p, const char* at, std::size_t n) {
  capture(p)->out->method.append(at, n);
  return 0;
}
int ll_on_url(llhttp_t* p, const char* at, std::size_t n) {
  capture(p)->out->target.append(at, n);
  return 0;
}
// The version's numbers are in the parser (http_major, http_minor).
int ll_on_version(llhttp_t*, const char*, std::size_t) {
  return 0;
}
int ll_on_header_field(llhttp_t* p, const char* at, std::size_t n) {
  LlhttpCapture* c = capture(p);
  if (c->headers_done) return 0;
  if (!c->field_open) {
    c->out->headers.emplace_back();
    c->field_open = true;
  }
  c->out->headers.back().name.append(at, n);
  return 0;
}
int ll_on_header_field_complete(llhttp_t* p) {
  capture(p)->field_open = false;
  return 0;
}
int ll_on_header_value(llhttp_t* p, const char* at, std::size_t n) {
  LlhttpCapture* c = capture(p);
  if (!c->headers_done && !c->out->headers.empty()) c->out->headers.back().value.append(at, n);
  return 0;
}
int ll_on_headers_complete(llhttp_t* p) {
  LlhttpCapture* c = capture(p);
  c->headers_done = true;
  c->out->http11 = p->http_major == 1 && p->http_minor >= 1;
  c->out->chunked = (p->flags & F_CHUNKED) != 0;
  return 0;
}
int ll_on_body(llhttp_t* p, const char*, std::size_t n) {
  capture(p)->body_bytes += n;
  return 0;
}
int ll_on_message_complete(llhttp_t* p) {
  capture(p)->message_done = true;
  return HPE_PAUSED;
}

const llhttp_settings_t& llhttp_settings() {
  static const llhttp_settings_t settings = [] {
    llhttp_settings_t s;
    llhttp_settings_init(&s);
    s.on_method = ll_on_method;
    s.on_url = ll_on_url;
    s.on_version = ll_on_version;
    s.on_header_field = ll_on_header_field;
    s.on_header_field_complete = ll_on_header_field_complete;
    s.on_header_value = ll_on_header_value;
    s.on_headers_complete = ll_on_headers_complete;
    s.on_body = ll_on_body;
    s.on_message_complete = ll_on_message_complete;
    return s;
  }();
  return settings;
}

Outcome run_llhttp(std::string_view req) {
  Outcome o;
  LlhttpCapture c;
  c.out = &o;
  llhttp_t parser;
  llhttp_init(&parser, HTTP_REQUEST, &llhttp_settings());
  parser.data = &c;
  const llhttp_errno_t err = llhttp_execute(&parser, req.data(), req.size());
  if (c.message_done) {
    o.kind = Outcome::Kind::Accepted;
    o.content_length = o.chunked ? 0 : c.body_bytes;
    o.frame_bytes = static_cast<std::size_t>(llhttp_get_error_pos(&parser) - req.data());
  } else if (err != HPE_OK) {
    o.kind = Outcome::Kind::Rejected;
    o.why = std::string(llhttp_errno_name(err)) + ": " + llhttp_get_error_reason(&parser);
  }
  if (o.kind != Outcome::Kind::Accepted) {  // what a partial parse collected is not compared
    o.method.clear();
    o.target.clear();
    o.headers.clear();
  }
  return o;
}

// ---------------------------------------------------------------------------
// Comparison.

// Field values as RFC 9110 §5.5 defines them, without trailing whitespace:
// llhttp hands a value over with it.
Outcome without_trailing_ows(Outcome o) {
  for (Header& h : o.headers)
    while (!h.value.empty() && (h.value.back() == ' ' || h.value.back() == '\t')) h.value.pop_back();
  return o;
}

// "" when the two agree; otherwise what differs (the first difference).
std::string difference(const Outcome& f, const Outcome& l) {
  if (f.kind != l.kind)
    return std::string("ferry ") + kind_name(f.kind) + (f.why.empty() ? "" : " (" + f.why + ")") +
           ", llhttp " + kind_name(l.kind) + (l.why.empty() ? "" : " (" + l.why + ")");
  if (f.kind != Outcome::Kind::Accepted) return "";
  if (f.method != l.method) return "method " + f.method + " vs " + l.method;
  if (f.target != l.target) return "target '" + f.target + "' vs '" + l.target + "'";
  if (f.http11 != l.http11) return "version";
  if (f.headers.size() != l.headers.size())
    return "header count " + std::to_string(f.headers.size()) + " vs " + std::to_string(l.headers.size());
  for (std::size_t i = 0; i < f.headers.size(); ++i)
    if (!(f.headers[i] == l.headers[i]))
      return "header " + std::to_string(i) + " '" + f.headers[i].name + ": " + f.headers[i].value + "' vs '" +
             l.headers[i].name + ": " + l.headers[i].value + "'";
  if (f.chunked != l.chunked) return "chunked";
  if (f.content_length != l.content_length)
    return "body length " + std::to_string(f.content_length) + " vs " + std::to_string(l.content_length);
  if (f.frame_bytes != l.frame_bytes)
    return "request end " + std::to_string(f.frame_bytes) + " vs " + std::to_string(l.frame_bytes);
  return "";
}

// A request's bytes, printable: C escapes for everything else.
std::string escaped(std::string_view s, std::size_t max = 400) {
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\r')
      out += "\\r";
    else if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > max) out += "...";
  return out;
}

// ---------------------------------------------------------------------------
// A loose look at a request's bytes, for the rules below to say which case
// they cover: split at LF, nothing validated.

std::string_view trim_cr(std::string_view line) {
  return !line.empty() && line.back() == '\r' ? line.substr(0, line.size() - 1) : line;
}

bool is_ows(char c) {
  return c == ' ' || c == '\t';
}

std::string_view trim_ows(std::string_view v) {
  while (!v.empty() && is_ows(v.front())) v.remove_prefix(1);
  while (!v.empty() && is_ows(v.back())) v.remove_suffix(1);
  return v;
}

bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (syntax::lower(static_cast<std::uint8_t>(a[i])) != syntax::lower(static_cast<std::uint8_t>(b[i])))
      return false;
  return true;
}

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

struct RawRequest {
  std::string_view leading;                       // the CR and LF bytes before the request line
  std::string_view request_line;                  // without its line end
  std::vector<std::string_view> fields;           // the lines after it, up to the first empty one
  std::size_t head_end = std::string_view::npos;  // just past that empty line, if there is one
  std::string_view method, target, version;       // the request line's first, second and last word
};

RawRequest raw_view(std::string_view req) {
  RawRequest r;
  const std::size_t start = req.find_first_not_of("\r\n");
  r.leading = req.substr(0, start);
  if (start == std::string_view::npos) return r;
  std::size_t lf = req.find('\n', start);
  r.request_line = trim_cr(req.substr(start, lf == req.npos ? req.npos : lf - start));
  while (lf != req.npos) {
    const std::size_t next = req.find('\n', lf + 1);
    const std::string_view line = trim_cr(req.substr(lf + 1, next == req.npos ? req.npos : next - lf - 1));
    if (next != req.npos && line.empty()) {
      r.head_end = next + 1;
      break;
    }
    if (!line.empty()) r.fields.push_back(line);
    lf = next;
  }
  // The request line's words, split on runs of SP as llhttp splits them.
  std::vector<std::string_view> words;
  for (std::size_t i = 0; i < r.request_line.size();) {
    const std::size_t end = std::min(r.request_line.find(' ', i), r.request_line.size());
    if (end > i) words.push_back(r.request_line.substr(i, end - i));
    i = end + 1;
  }
  if (!words.empty()) r.method = words[0];
  if (words.size() > 1) r.target = words[1];
  if (words.size() > 2) r.version = words.back();
  return r;
}

// The values of the field lines named `name`, without OWS; a line whose name
// is followed by anything but ':' does not count.
std::vector<std::string_view> field_values(const RawRequest& r, std::string_view name) {
  std::vector<std::string_view> out;
  for (std::string_view line : r.fields)
    if (line.size() > name.size() && iequal(line.substr(0, name.size()), name) && line[name.size()] == ':')
      out.push_back(trim_ows(line.substr(name.size() + 1)));
  return out;
}

// The lines of a chunked body after the head, found as Ferry's scan walks
// them: chunk-size line, data, line end; then the trailer lines.
struct ChunkedLines {
  std::vector<std::string_view> size_lines, trailer_lines;  // without their line ends
  // The offsets of line ends that are a lone LF: after a chunk-size line or
  // chunk data, and after a trailer line or the empty line ending the body.
  std::vector<std::size_t> chunk_bare_lfs, trailer_bare_lfs;
};

std::size_t hex_prefix(std::string_view line, std::uint64_t* size) {
  std::size_t i = 0;
  *size = 0;
  for (; i < line.size() && syntax::hex_value(static_cast<std::uint8_t>(line[i])) >= 0 && i < 15; ++i)
    *size = *size * 16 + static_cast<std::uint64_t>(syntax::hex_value(static_cast<std::uint8_t>(line[i])));
  return i;
}

// The line [pos, LF); false when there is no LF. A lone LF goes to bare_lfs.
bool next_line(std::string_view req, std::size_t pos, std::string_view* line, std::size_t* lf,
               std::vector<std::size_t>* bare_lfs) {
  *lf = req.find('\n', pos);
  if (*lf == req.npos) return false;
  *line = trim_cr(req.substr(pos, *lf - pos));
  if (*lf == pos || req[*lf - 1] != '\r') bare_lfs->push_back(*lf);
  return true;
}

ChunkedLines chunked_lines(std::string_view req, std::size_t body_start) {
  ChunkedLines out;
  std::size_t pos = body_start, lf = 0;
  std::string_view line;
  for (;;) {
    if (!next_line(req, pos, &line, &lf, &out.chunk_bare_lfs)) return out;
    out.size_lines.push_back(line);
    std::uint64_t size = 0;
    if (hex_prefix(line, &size) == 0) return out;
    pos = lf + 1;
    if (size == 0) break;
    if (req.size() - pos < size + 1) return out;
    pos += size;  // the data, then its line end
    if (req[pos] == '\n') {
      out.chunk_bare_lfs.push_back(pos++);
    } else if (req.compare(pos, 2, "\r\n") == 0) {
      pos += 2;
    } else {
      return out;
    }
  }
  while (next_line(req, pos, &line, &lf, &out.trailer_bare_lfs) && !line.empty()) {
    out.trailer_lines.push_back(line);
    pos = lf + 1;
  }
  return out;
}

// The offsets of the lone LFs ending lines of the head (or of as much of it
// as there is), after the empty lines before the request line.
std::vector<std::size_t> bare_lfs_in_head(std::string_view req, const RawRequest& r) {
  std::vector<std::size_t> lfs;
  const std::size_t end = r.head_end == std::string_view::npos ? req.size() : r.head_end;
  for (std::size_t i = r.leading.size(); i < end; ++i)
    if (req[i] == '\n' && (i == 0 || req[i - 1] != '\r')) lfs.push_back(i);
  return lfs;
}

// chunk-ext (RFC 9112 §7.1.1) after a chunk size:
// *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] ), where
// chunk-ext-val = token / quoted-string.
bool is_chunk_ext(std::string_view s) {
  std::size_t i = 0;
  const auto bws = [&] {
    while (i < s.size() && is_ows(s[i])) ++i;
  };
  const auto token = [&] {
    const std::size_t from = i;
    while (i < s.size() && syntax::is_tchar(static_cast<std::uint8_t>(s[i]))) ++i;
    return i > from;
  };
  const auto quoted_string = [&] {
    if (i >= s.size() || s[i] != '"') return false;
    for (++i; i < s.size(); ++i) {
      const auto c = static_cast<std::uint8_t>(s[i]);
      if (c == '"') return ++i, true;
      if (c == '\\')
        ++i;  // quoted-pair
      else if (!syntax::is_field_char(c))
        return false;
    }
    return false;
  };
  while (i < s.size()) {
    bws();
    if (i == s.size() || s[i] != ';') return false;
    ++i;
    bws();
    if (!token()) return false;
    const std::size_t after_name = i;
    bws();
    if (i < s.size() && s[i] == '=') {
      ++i;
      bws();
      if (!token() && !quoted_string()) return false;
    } else {
      i = after_name;
    }
  }
  return true;
}

// The bytes without the given [begin, end) ranges (in order, not overlapping).
std::string without_ranges(std::string_view req,
                           const std::vector<std::pair<std::size_t, std::size_t>>& ranges) {
  std::string out(req);
  for (auto it = ranges.rbegin(); it != ranges.rend(); ++it) out.erase(it->first, it->second - it->first);
  return out;
}

std::size_t offset_in(std::string_view whole, std::string_view part) {
  return static_cast<std::size_t>(part.data() - whole.data());
}

// The LFs at the given offsets made CRLF.
std::string with_crlf_at(std::string_view req, const std::vector<std::size_t>& lfs) {
  std::string out(req);
  for (auto it = lfs.rbegin(); it != lfs.rend(); ++it) out.insert(*it, 1, '\r');
  return out;
}

// ---------------------------------------------------------------------------
// Where Ferry and llhttp differ by design. Each rule covers one deliberate
// difference, narrowly: the request shows the construct and each parser's
// outcome is the one expected of it. Several rules are counterfactual: they
// remove the construct and require the two parsers to agree then.

// How many constructs the counterfactual rules may take away from one request
// in turn, before what is left must agree.
constexpr int kMaxConstructs = 4;

struct Subject {
  std::string_view bytes;
  RawRequest raw;
  Outcome ferry, ll;
  int depth;    // how many more constructs a counterfactual rule may take away
  bool strict;  // a counterfactual must change the objecting parser's answer
};

Subject make_subject(std::string_view bytes, int depth, bool strict) {
  return {bytes, raw_view(bytes), run_ferry(bytes), run_llhttp(bytes), depth, strict};
}

bool accepted(const Outcome& o) {
  return o.kind == Outcome::Kind::Accepted;
}
bool rejected(const Outcome& o) {
  return o.kind == Outcome::Kind::Rejected;
}
bool incomplete(const Outcome& o) {
  return o.kind == Outcome::Kind::Incomplete;
}
bool ferry_says(const Subject& s, std::string_view part) {
  return rejected(s.ferry) && contains(s.ferry.why, part);
}

// Whether the two agree on a subject, or a rule below (an exception or a
// known bug) explains why not.
bool settled(const Subject& t);

// Counterfactual checks: once `changed` has lost the construct, the other
// parser answers as before and the two agree (or differ only as another rule
// explains: a request can hold several constructs). In the first, strict
// pass the objecting parser's answer must change too, so that a difference is
// counted under the construct that caused it; a request with several
// constructs that each alone draw the same answer is left to a second pass
// without that condition. A rule that names a Ferry bug never requires
// llhttp's answer to change: llhttp may give the same error for the bug's
// construct and another one in the same line.
bool same_answer(const Outcome& a, const Outcome& b) {
  return a.kind == b.kind && a.why == b.why;
}
bool only_llhttp_objects(const Subject& s, const std::string& changed, bool llhttp_changes = true) {
  if (s.depth == 0 || changed == s.bytes) return false;
  const Subject t = make_subject(changed, s.depth - 1, s.strict);
  return t.ferry.kind == s.ferry.kind && (!s.strict || !llhttp_changes || !same_answer(t.ll, s.ll)) &&
         settled(t);
}
bool only_ferry_objects(const Subject& s, const std::string& changed) {
  if (s.depth == 0 || changed == s.bytes) return false;
  const Subject t = make_subject(changed, s.depth - 1, s.strict);
  return t.ll.kind == s.ll.kind && (!s.strict || !same_answer(t.ferry, s.ferry)) && settled(t);
}

// The framing lines of a chunked body, for a request Ferry takes as chunked
// (one Transfer-Encoding: chunked); none for another.
ChunkedLines chunked_framing(const Subject& s) {
  const auto te = field_values(s.raw, "transfer-encoding");
  if (s.raw.head_end == std::string_view::npos || te.size() != 1 || !iequal(te[0], "chunked")) return {};
  return chunked_lines(s.bytes, s.raw.head_end);
}

// Its chunk-size lines, with where their chunk-ext starts.
struct SizeLine {
  std::size_t offset;  // of the line in the request
  std::string_view line;
  std::size_t ext;  // the offset of what follows the hex digits, in the line
};
std::vector<SizeLine> size_lines(const Subject& s) {
  std::vector<SizeLine> out;
  for (std::string_view line : chunked_framing(s).size_lines) {
    std::uint64_t size = 0;
    out.push_back({offset_in(s.bytes, line), line, hex_prefix(line, &size)});
  }
  return out;
}

// The range of a line (a view into the request), its line end included.
std::pair<std::size_t, std::size_t> line_with_end(std::string_view req, std::string_view line) {
  const std::size_t begin = offset_in(req, line);
  const std::size_t lf = req.find('\n', begin + line.size());
  return {begin, lf == std::string_view::npos ? req.size() : lf + 1};
}

// The field lines of the head and the trailer lines that `pick` selects, to
// take away; `first` says whether a line is the first of its section.
template <class Pick>
std::vector<std::pair<std::size_t, std::size_t>> field_lines(const Subject& s, Pick pick) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  for (std::size_t i = 0; i < s.raw.fields.size(); ++i)
    if (pick(s.raw.fields[i], i == 0)) out.push_back(line_with_end(s.bytes, s.raw.fields[i]));
  const ChunkedLines c = chunked_framing(s);
  for (std::size_t i = 0; i < c.trailer_lines.size(); ++i)
    if (pick(c.trailer_lines[i], i == 0)) out.push_back(line_with_end(s.bytes, c.trailer_lines[i]));
  return out;
}

// RFC 9110 §5.5: a field value excludes leading and trailing whitespace;
// llhttp keeps the trailing part.
bool llhttp_keeps_trailing_ows(const Subject& s) {
  return accepted(s.ferry) && accepted(s.ll) && difference(s.ferry, without_trailing_ows(s.ll)).empty();
}

// §6.1: Ferry decodes only "chunked", so any other coding, a list such as
// "gzip, chunked", or the field twice ("chunked" applied twice, which §7
// forbids) is refused at the proxy. §6.1 lets a server refuse codings it does
// not understand (it suggests 501; Ferry says 400), and refusing them at the
// proxy keeps proxy and worker from framing the body differently.
bool te_other_than_chunked(const Subject& s) {
  const auto te = field_values(s.raw, "transfer-encoding");
  if (te.empty() || rejected(s.ll)) return false;
  const bool plain_chunked = te.size() == 1 && iequal(te[0], "chunked");
  return !plain_chunked &&
         (ferry_says(s, "Transfer-Encoding other than") || ferry_says(s, "more than one Transfer-Encoding"));
}

// §6.1: "A server or client that receives an HTTP/1.0 message containing a
// Transfer-Encoding header field MUST treat the message as if the framing is
// faulty"; Ferry refuses it, llhttp decodes it.
bool te_in_http10(const Subject& s) {
  return s.raw.version == "HTTP/1.0" && ferry_says(s, "Transfer-Encoding in an HTTP/1.0 request") &&
         !rejected(s.ll);
}

// RFC 9110 §9.1: a method the origin server does not implement gets 501.
// Ferry implements GET HEAD POST PUT DELETE CONNECT OPTIONS TRACE PATCH;
// llhttp knows WebDAV, RTSP and other methods too.
bool method_not_implemented(const Subject& s) {
  return ferry_says(s, "501") && accepted(s.ll);
}

// §3: request-line = method SP request-target SP HTTP-version. Parsing on
// runs of whitespace instead is a MAY (§3); Ferry keeps to the grammar.
bool single_sp_in_request_line(const Subject& s) {
  if (!contains(s.raw.request_line, "  ") || !rejected(s.ferry) || !accepted(s.ll)) return false;
  std::string line(s.raw.request_line);
  while (contains(line, "  ")) line.erase(line.find("  "), 1);
  std::string collapsed(s.bytes);
  collapsed.replace(s.raw.leading.size(), s.raw.request_line.size(), line);
  return only_ferry_objects(s, collapsed);
}

// §2.2: empty lines (CRLF, or a lone LF) before the request line are ignored;
// a bare CR is not an empty line, and a recipient MUST treat a bare CR as
// invalid or replace it with SP. llhttp skips any run of CR and LF.
bool bare_cr_before_request_line(const Subject& s) {
  const std::string_view lead = s.raw.leading;
  for (std::size_t i = 0; i < lead.size(); ++i)
    if (lead[i] == '\r' && (i + 1 == lead.size() || lead[i + 1] != '\n'))
      return rejected(s.ferry) && !rejected(s.ll);
  return false;
}

bool version_is(const Subject& s, std::string_view prefix) {
  return s.raw.version.size() == 8 && s.raw.version.substr(0, prefix.size()) == prefix;
}

// RFC 9110 §2.5: a recipient SHOULD process a message of a higher minor
// version (HTTP/1.2 ... 1.9) as the highest it implements (1.1); llhttp
// accepts only 1.0 and 1.1 in HTTP/1.
bool higher_minor_version(const Subject& s) {
  return version_is(s, "HTTP/1.") && s.raw.version[7] >= '2' && s.raw.version[7] <= '9' &&
         !rejected(s.ferry) && rejected(s.ll) && contains(s.ll.why, "Invalid HTTP version");
}

// RFC 9110 §15.6.6 and §2.3: 505 for a major version the server does not
// support (HTTP/0.9, HTTP/2.0 in an HTTP/1 request line); llhttp accepts them.
bool other_major_version(const Subject& s) {
  return ferry_says(s, "505") && !rejected(s.ll);
}

// §3: the request line ends with HTTP-version; HTTP/0.9's "GET /" is not an
// HTTP/1.1 request. llhttp parses it as HTTP/0.9.
bool http09_request_line(const Subject& s) {
  return s.raw.version.empty() && rejected(s.ferry) && accepted(s.ll) && !s.ll.http11;
}

// RTSP/1.0 and ICE/1.0 request lines: other protocols, which llhttp also parses.
bool other_protocol(const Subject& s) {
  return (s.raw.version.substr(0, 5) == "RTSP/" || s.raw.version.substr(0, 4) == "ICE/") &&
         ferry_says(s, "malformed HTTP version") && !rejected(s.ll);
}

// §3.2.4: the asterisk-form is only for OPTIONS.
bool asterisk_form_without_options(const Subject& s) {
  return s.raw.target == "*" && s.raw.method != "OPTIONS" && ferry_says(s, "asterisk-form") && accepted(s.ll);
}

// §3.2: Ferry serves origin-form and absolute-form http(s) targets. An http
// URI with an empty host MUST be rejected as invalid (RFC 9110 §4.2.1), and
// other schemes are not Ferry's to serve (400, where a 421 would also do).
bool target_form_not_served(const Subject& s) {
  return ferry_says(s, "neither origin- nor absolute-form") && !s.raw.target.empty() &&
         s.raw.target[0] != '/' && accepted(s.ll);
}

// §3.2 makes a 400 for an invalid request-target a SHOULD, not a MUST.
// Ferry's parser only keeps CTLs, SP and DEL out of the target; llhttp's
// strict build refuses some other characters RFC 3986 does not allow (raw
// bytes 0x80-0xFF, which Ferry, like nginx, takes as the path's bytes; '`'
// or '"' in an authority) while it lets others through ('"', '{', '|' in a
// path). Covered when the two agree with those characters made 'x' (CTLs, SP
// and DEL stay: Ferry refuses them).
bool is_uri_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         contains("-._~%!$&'()*+,;=:@/?[]", std::string_view(&c, 1));  // no '#': no fragment in a request
}
bool target_charset_not_checked(const Subject& s) {
  if (rejected(s.ferry) || !rejected(s.ll) || !contains(s.ll.why, "HPE_INVALID_URL") || s.raw.target.empty())
    return false;
  std::string changed(s.bytes);
  const std::size_t at = static_cast<std::size_t>(s.raw.target.data() - s.bytes.data());
  for (std::size_t i = at; i < at + s.raw.target.size(); ++i) {
    const auto c = static_cast<std::uint8_t>(changed[i]);
    if (c > 0x20 && c != 0x7f && !is_uri_char(changed[i])) changed[i] = 'x';  // what Ferry lets through
  }
  return only_llhttp_objects(s, changed);
}

// §3.2: "A server MUST respond with a 400 (Bad Request) status code to any
// HTTP/1.1 request message that lacks a Host header field and to any request
// message that contains more than one Host header field line", and §7.2
// gives its value's grammar (uri-host [ ":" port ]). llhttp does not look at
// Host. Covered when the two agree with exactly one, valid, Host line.
bool host_rules(const Subject& s) {
  if (!accepted(s.ll) ||
      !(ferry_says(s, "without Host") || ferry_says(s, "more than one Host") || ferry_says(s, "invalid Host value")))
    return false;
  std::string changed(s.bytes);
  const std::size_t fields = changed.find('\n', s.raw.leading.size()) + 1;
  bool seen = false;
  for (std::size_t pos = fields; pos < changed.size();) {
    const std::size_t next = changed.find('\n', pos) + 1;  // past the line; 0 at the end
    if (next == 0 || trim_cr(std::string_view(changed).substr(pos, next - 1 - pos)).empty()) break;
    if (changed.size() - pos > 5 && iequal(std::string_view(changed).substr(pos, 5), "host:")) {
      if (seen) {
        changed.erase(pos, next - pos);
        continue;
      }
      // One Host, with a valid value (§7.2: "uri-host [ ":" port ]").
      changed.replace(pos, next - pos, "Host: h\r\n");
      seen = true;
      pos += 9;
      continue;
    }
    pos = next;
  }
  if (!seen) changed.insert(fields, "Host: h\r\n");
  return only_ferry_objects(s, changed);
}

// RFC 9110 §5.1: field-name = token, at least one character; llhttp accepts
// a line ": value", in the head or among the trailers. Covered when the two
// agree without those lines.
bool empty_field_name(const Subject& s) {
  if (!rejected(s.ferry) || rejected(s.ll)) return false;
  const auto lines = field_lines(s, [](std::string_view line, bool) { return line[0] == ':'; });
  return !lines.empty() && only_ferry_objects(s, without_ranges(s.bytes, lines));
}

// §5.2: a server that receives obs-fold in a request MUST either reject it
// with 400 or replace each obs-fold with SP; Ferry rejects (in the head and
// among the trailers), llhttp unfolds. Covered when the two agree without
// the continuation lines.
bool obs_fold(const Subject& s) {
  if (!rejected(s.ferry) || rejected(s.ll)) return false;
  const auto lines =
      field_lines(s, [](std::string_view line, bool first) { return !first && is_ows(line[0]); });
  return !lines.empty() && only_ferry_objects(s, without_ranges(s.bytes, lines));
}

// §2.2: "a recipient MAY recognize a single LF as a line terminator and
// ignore any preceding CR" in the start-line and fields. Ferry does, in the
// head and among the trailers; llhttp's strict build does only at the end of
// the request line and of the head. Covered when the two agree with those
// LFs made CRLF.
bool bare_lf_in_fields(const Subject& s) {
  if (rejected(s.ferry) || !rejected(s.ll)) return false;
  std::vector<std::size_t> lfs = bare_lfs_in_head(s.bytes, s.raw);
  for (std::size_t lf : chunked_framing(s).trailer_bare_lfs) lfs.push_back(lf);
  return !lfs.empty() && only_llhttp_objects(s, with_crlf_at(s.bytes, lfs));
}

// §7.1.1: chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS
// chunk-ext-val ] ). llhttp's strict build refuses some extensions this
// grammar allows: whitespace around ';' and '=' ("5 ;a=b", "5; a = b"), and
// a second extension after a value ("5;a=b;c"). Covered when every
// extension is well-formed and the two agree without them.
bool chunk_ext_llhttp_refuses(const Subject& s) {
  if (rejected(s.ferry) || !rejected(s.ll)) return false;
  std::vector<std::pair<std::size_t, std::size_t>> exts;
  for (const SizeLine& l : size_lines(s)) {
    if (!is_chunk_ext(l.line.substr(l.ext))) return false;
    if (l.ext < l.line.size()) exts.emplace_back(l.offset + l.ext, l.offset + l.line.size());
  }
  return !exts.empty() && only_llhttp_objects(s, without_ranges(s.bytes, exts));
}

// RFC 9110 §5.5: OWS around a field value is not part of it, so
// "Content-Length: 5<HTAB>" is 5 and "Transfer-Encoding: chunked<HTAB>" is
// chunked; llhttp refuses a trailing HTAB in these two. Covered when the two
// agree without the trailing whitespace.
bool framing_field_trailing_htab(const Subject& s) {
  if (rejected(s.ferry) || !rejected(s.ll)) return false;
  std::vector<std::pair<std::size_t, std::size_t>> trailing;
  for (std::string_view line : s.raw.fields) {
    if (!iequal(line.substr(0, 15), "content-length:") && !iequal(line.substr(0, 18), "transfer-encoding:"))
      continue;
    std::size_t end = line.size();
    while (end > 0 && is_ows(line[end - 1])) --end;
    if (end < line.size() && contains(line.substr(end), "\t"))
      trailing.emplace_back(offset_in(s.bytes, line) + end, offset_in(s.bytes, line) + line.size());
  }
  return !trailing.empty() && only_llhttp_objects(s, without_ranges(s.bytes, trailing));
}

// RFC 9110 §9.3.6: only a 2xx answer to CONNECT makes the connection a
// tunnel. Ferry answers CONNECT 404, so a CONNECT with a Content-Length or
// chunked body is framed by §6.3 like any other request (Ferry waits for the
// body, then skips it); llhttp ends the request at the head.
bool connect_is_not_a_tunnel(const Subject& s) {
  const bool framed_body =
      !field_values(s.raw, "content-length").empty() || !field_values(s.raw, "transfer-encoding").empty();
  const bool ferry_reads_body =
      incomplete(s.ferry) || (s.ferry.status == 404 && s.ferry.frame_bytes > s.raw.head_end);
  return s.raw.method == "CONNECT" && framed_body && ferry_reads_body && accepted(s.ll) &&
         s.ll.frame_bytes == s.raw.head_end;
}

// RFC 9110 §15.5.14: a server may refuse content larger than it is willing
// to process (413). Ferry's limits are set generously here, but a chunk size
// of 2^36 is still over them; llhttp waits for the data.
bool body_over_limit(const Subject& s) {
  return ferry_says(s, "413") && incomplete(s.ll);
}

// The proxy frames, the worker judges: while the head (or the body the
// Content-Length promises) is still incomplete, Ferry waits, and the head's
// syntax is the worker's to refuse once the request is whole. llhttp fails
// at the first bad byte. Covered when the worker does refuse the head.
bool proxy_waits_for_whole_request(const Subject& s) {
  if (!incomplete(s.ferry) || !rejected(s.ll)) return false;
  std::string head(s.bytes.substr(s.raw.leading.size(), s.raw.head_end == std::string_view::npos
                                                            ? std::string_view::npos
                                                            : s.raw.head_end - s.raw.leading.size()));
  if (s.raw.head_end == std::string_view::npos) head += "\r\n\r\n";
  RequestHead r;
  const Verdict v = parse_request_head(u8(head), head.size(), &r);
  return v.status != 200 && v.status != 404;
}

// The mirror image: the proxy checks Content-Length and Transfer-Encoding as
// soon as their line is there, where llhttp waits for the end of the head.
// Covered when llhttp refuses the head once it is ended.
bool scan_refuses_framing_early(const Subject& s) {
  return ferry_says(s, "scan") && incomplete(s.ll) && s.raw.head_end == std::string_view::npos &&
         rejected(run_llhttp(std::string(s.bytes) + "\r\n\r\n"));
}

// The same for the lines of a chunked body (chunk sizes, trailers): the scan
// judges a line once its LF is there; covered when it then refuses it.
bool scan_waits_for_whole_line(const Subject& s) {
  if (!incomplete(s.ferry) || !rejected(s.ll)) return false;
  return rejected(run_ferry(std::string(s.bytes) + "\r\n"));
}

struct Rule {
  const char* name;
  bool (*covers)(const Subject& s);
};

const Rule kExceptions[] = {
    {"proxy_waits_for_whole_request", proxy_waits_for_whole_request},
    {"llhttp_keeps_trailing_ows", llhttp_keeps_trailing_ows},
    {"te_other_than_chunked", te_other_than_chunked},
    {"te_in_http10", te_in_http10},
    {"method_not_implemented", method_not_implemented},
    {"single_sp_in_request_line", single_sp_in_request_line},
    {"bare_cr_before_request_line", bare_cr_before_request_line},
    {"higher_minor_version", higher_minor_version},
    {"other_major_version", other_major_version},
    {"http09_request_line", http09_request_line},
    {"other_protocol", other_protocol},
    {"asterisk_form_without_options", asterisk_form_without_options},
    {"target_form_not_served", target_form_not_served},
    {"target_charset_not_checked", target_charset_not_checked},
    {"host_rules", host_rules},
    {"empty_field_name", empty_field_name},
    {"obs_fold", obs_fold},
    {"bare_lf_in_fields", bare_lf_in_fields},
    {"chunk_ext_llhttp_refuses", chunk_ext_llhttp_refuses},
    {"framing_field_trailing_htab", framing_field_trailing_htab},
    {"connect_is_not_a_tunnel", connect_is_not_a_tunnel},
    {"body_over_limit", body_over_limit},
    {"scan_waits_for_whole_line", scan_waits_for_whole_line},
    {"scan_refuses_framing_early", scan_refuses_framing_early},
};

const Rule* find_rule(const Rule* begin, const Rule* end, const Subject& s) {
  for (const Rule* rule = begin; rule != end; ++rule)
    if (rule->covers(s)) return rule;
  return nullptr;
}

// ---------------------------------------------------------------------------
// Differences that are Ferry's bugs: reported, not failed on, while the parser
// is being fixed. Empty: the two found (lone LFs in chunk lines, unchecked
// chunk extensions) were fixed in the scan.
const std::vector<Rule> kKnownFerryBugs = {};

// What is left once one construct is gone may be another exception or
// another bug.
bool settled(const Subject& t) {
  return difference(t.ferry, t.ll).empty() ||
         find_rule(kKnownFerryBugs.data(), kKnownFerryBugs.data() + kKnownFerryBugs.size(), t) != nullptr ||
         find_rule(std::begin(kExceptions), std::end(kExceptions), t) != nullptr;
}

// ---------------------------------------------------------------------------
// The corpus.

struct Case {
  std::string name;
  std::string bytes;
};

// A request with the given request line and field lines, CRLF-terminated.
std::string req(std::string_view request_line, std::initializer_list<std::string_view> fields,
                std::string_view body = "") {
  std::string s(request_line);
  s += "\r\n";
  for (std::string_view f : fields) {
    s += f;
    s += "\r\n";
  }
  s += "\r\n";
  s += body;
  return s;
}

std::vector<Case> valid_cases() {
  const std::string browser_fields =
      "Host: www.example.com\r\n"
      "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0\r\n"
      "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n"
      "Accept-Language: en-US,en;q=0.5\r\n"
      "Accept-Encoding: gzip, deflate, br\r\n"
      "Cookie: session=0123456789abcdef; theme=dark\r\n"
      "Connection: keep-alive\r\n";
  return {
      {"get", req("GET / HTTP/1.1", {"Host: a"})},
      {"curl",
       req("GET /index.html HTTP/1.1", {"Host: localhost:8080", "User-Agent: curl/8.5.0", "Accept: */*"})},
      {"browser", "GET /docs/page?id=7&x=y HTTP/1.1\r\n" + browser_fields + "\r\n"},
      {"http10_no_host", req("GET / HTTP/1.0", {})},
      {"http10_keep_alive", req("GET / HTTP/1.0", {"Host: a", "Connection: keep-alive"})},
      {"head", req("HEAD /x HTTP/1.1", {"Host: a"})},
      {"post_length", req("POST /submit HTTP/1.1", {"Host: a", "Content-Length: 5"}, "hello")},
      {"post_length_zero", req("POST / HTTP/1.1", {"Host: a", "Content-Length: 0"})},
      {"post_length_leading_zeros", req("POST / HTTP/1.1", {"Host: a", "Content-Length: 005"}, "hello")},
      {"post_length_ows", req("POST / HTTP/1.1", {"Host: a", "Content-Length:  \t5 \t"}, "hello")},
      {"put", req("PUT /f HTTP/1.1", {"Host: a", "Content-Length: 3"}, "abc")},
      {"patch", req("PATCH /f HTTP/1.1", {"Host: a", "Content-Length: 2"}, "{}")},
      {"delete", req("DELETE /f HTTP/1.1", {"Host: a"})},
      {"trace", req("TRACE / HTTP/1.1", {"Host: a"})},
      {"options_path", req("OPTIONS /x HTTP/1.1", {"Host: a"})},
      {"options_asterisk", req("OPTIONS * HTTP/1.1", {"Host: a"})},
      {"connect", req("CONNECT example.com:443 HTTP/1.1", {"Host: example.com:443"})},
      {"chunked",
       req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked"}, "5\r\nhello\r\n0\r\n\r\n")},
      {"chunked_two_chunks", req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked"},
                                 "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")},
      {"chunked_hex_upper",
       req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked"}, "A\r\n0123456789\r\n0\r\n\r\n")},
      {"chunked_hex_lower_padded",
       req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked"}, "000a\r\n0123456789\r\n0\r\n\r\n")},
      {"chunked_extension", req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked"},
                                "5;name=value\r\nhello\r\n0\r\n\r\n")},
      {"chunked_trailer", req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked"},
                              "5\r\nhello\r\n0\r\nChecksum: abc\r\n\r\n")},
      {"chunked_case", req("POST / HTTP/1.1", {"Host: a", "transfer-encoding: Chunked"}, "0\r\n\r\n")},
      {"absolute_form", req("GET http://example.com/p?q=1 HTTP/1.1", {"Host: example.com"})},
      {"absolute_form_https", req("GET https://example.com:8443/ HTTP/1.1", {"Host: example.com:8443"})},
      {"query_and_escapes", req("GET /a%20b/c?x=%41&y HTTP/1.1", {"Host: a"})},
      {"target_sub_delims", req("GET /!$&'()*+,;=:@-._~ HTTP/1.1", {"Host: a"})},
      {"empty_value", req("GET / HTTP/1.1", {"Host: a", "X-Empty:"})},
      {"empty_value_spaces", req("GET / HTTP/1.1", {"Host: a", "X-Empty:   "})},
      {"value_inner_spaces", req("GET / HTTP/1.1", {"Host: a", "X-A: b  c \t d"})},
      {"value_tab_ows", req("GET / HTTP/1.1", {"Host: a", "X-A:\tb\t"})},
      {"value_trailing_space", req("GET / HTTP/1.1", {"Host: a", "X-A: b   "})},
      {"value_obs_text", req("GET / HTTP/1.1", {"Host: a", "X-A: caf\xc3\xa9 \xff"})},
      {"value_no_space", req("GET / HTTP/1.1", {"Host:a"})},
      {"name_token_chars", req("GET / HTTP/1.1", {"Host: a", "X-!#$%&'*+-.^_`|~09: v"})},
      {"many_fields", req("GET / HTTP/1.1", {"Host: a", "A: 1", "B: 2", "C: 3", "D: 4", "E: 5", "F: 6"})},
      {"repeated_other_field", req("GET / HTTP/1.1", {"Host: a", "Accept: a", "Accept: b"})},
      {"connection_close", req("GET / HTTP/1.1", {"Host: a", "Connection: close"})},
      {"connection_list", req("GET / HTTP/1.1", {"Host: a", "Connection: keep-alive, close"})},
      {"expect_continue",
       req("POST / HTTP/1.1", {"Host: a", "Expect: 100-continue", "Content-Length: 2"}, "hi")},
      {"upgrade", req("GET /ws HTTP/1.1", {"Host: a", "Connection: Upgrade", "Upgrade: websocket"})},
      {"bare_lf", "GET / HTTP/1.1\nHost: a\n\n"},
      {"bare_lf_body", "POST / HTTP/1.1\nHost: a\nContent-Length: 2\n\nhi"},
      {"bare_lf_mixed", "GET / HTTP/1.1\r\nHost: a\nX: y\r\n\r\n"},
      {"leading_crlf", "\r\n" + req("GET / HTTP/1.1", {"Host: a"})},
      {"leading_crlfs", "\r\n\r\n\r\n" + req("GET / HTTP/1.1", {"Host: a"})},
      {"leading_lf", "\n" + req("GET / HTTP/1.1", {"Host: a"})},
      {"pipelined", req("GET /1 HTTP/1.1", {"Host: a"}) + req("GET /2 HTTP/1.1", {"Host: a"})},
      {"pipelined_after_body",
       req("POST / HTTP/1.1", {"Host: a", "Content-Length: 1"}, "x") + "GET / HTTP/1.1\r\n"},
      {"long_target", req("GET /" + std::string(2000, 'a') + " HTTP/1.1", {"Host: a"})},
  };
}

std::vector<Case> invalid_cases() {
  return {
      // Methods.
      {"method_lowercase", req("get / HTTP/1.1", {"Host: a"})},
      {"method_mixed_case", req("Get / HTTP/1.1", {"Host: a"})},
      {"method_unknown", req("FOO / HTTP/1.1", {"Host: a"})},
      {"method_webdav", req("PROPFIND / HTTP/1.1", {"Host: a"})},
      {"method_copy", req("COPY / HTTP/1.1", {"Host: a"})},
      {"method_empty", req(" / HTTP/1.1", {"Host: a"})},
      {"method_non_token", req("GE(T / HTTP/1.1", {"Host: a"})},
      {"method_pri", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"},
      // Request line shape.
      {"two_spaces_before_target", req("GET  / HTTP/1.1", {"Host: a"})},
      {"two_spaces_before_version", req("GET /  HTTP/1.1", {"Host: a"})},
      {"space_after_version", req("GET / HTTP/1.1 ", {"Host: a"})},
      {"tab_separator", req("GET\t/ HTTP/1.1", {"Host: a"})},
      {"no_target", req("GET HTTP/1.1", {"Host: a"})},
      {"leading_space", req(" GET / HTTP/1.1", {"Host: a"})},
      {"leading_bare_cr", "\r" + req("GET / HTTP/1.1", {"Host: a"})},
      {"request_line_bare_cr", "GET / HTTP/1.1\rHost: a\r\n\r\n"},
      {"only_empty_lines", "\r\n\r\n"},
      // Versions.
      {"version_1_2", req("GET / HTTP/1.2", {"Host: a"})},
      {"version_1_9", req("GET / HTTP/1.9", {"Host: a"})},
      {"version_2_0", req("GET / HTTP/2.0", {"Host: a"})},
      {"version_3_0", req("GET / HTTP/3.0", {"Host: a"})},
      {"version_0_9", req("GET / HTTP/0.9", {"Host: a"})},
      {"version_http09_simple", "GET /\r\n\r\n"},
      {"version_no_minor", req("GET / HTTP/1", {"Host: a"})},
      {"version_lowercase", req("GET / http/1.1", {"Host: a"})},
      {"version_two_digits", req("GET / HTTP/11.1", {"Host: a"})},
      {"version_junk", req("GET / HTTP/1.1x", {"Host: a"})},
      {"version_rtsp", req("GET / RTSP/1.0", {"Host: a"})},
      // Targets.
      {"target_asterisk_get", req("GET * HTTP/1.1", {"Host: a"})},
      {"target_authority_get", req("GET example.com:80 HTTP/1.1", {"Host: a"})},
      {"target_ftp", req("GET ftp://example.com/ HTTP/1.1", {"Host: a"})},
      {"target_no_authority", req("GET http:///p HTTP/1.1", {"Host: a"})},
      {"target_double_slash", req("GET //x HTTP/1.1", {"Host: a"})},
      {"target_fragment", req("GET /p#frag HTTP/1.1", {"Host: a"})},
      {"target_fragment_in_authority", req("GET http://a#b/ HTTP/1.1", {"Host: a"})},
      {"target_nul", req("GET /a\0b HTTP/1.1"s, {"Host: a"})},
      {"target_ctl", req("GET /a\x01 HTTP/1.1", {"Host: a"})},
      {"target_del", req("GET /a\x7f HTTP/1.1", {"Host: a"})},
      {"target_obs_text", req("GET /caf\xc3\xa9 HTTP/1.1", {"Host: a"})},
      {"target_tab", req("GET /a\tb HTTP/1.1", {"Host: a"})},
      {"target_quote", req("GET /a\"b HTTP/1.1", {"Host: a"})},
      {"target_braces", req("GET /{a}|^`\\ HTTP/1.1", {"Host: a"})},
      {"connect_origin_form", req("CONNECT / HTTP/1.1", {"Host: a"})},
      {"connect_asterisk", req("CONNECT * HTTP/1.1", {"Host: a"})},
      {"options_asterisk_http10", req("OPTIONS * HTTP/1.0", {})},
      // Host.
      {"host_missing", req("GET / HTTP/1.1", {})},
      {"host_twice", req("GET / HTTP/1.1", {"Host: a", "Host: b"})},
      {"host_twice_http10", req("GET / HTTP/1.0", {"Host: a", "Host: a"})},
      {"host_empty", req("GET / HTTP/1.1", {"Host:"})},
      // Field syntax.
      {"space_before_colon", req("GET / HTTP/1.1", {"Host: a", "X-A : b"})},
      {"tab_before_colon", req("GET / HTTP/1.1", {"Host: a", "X-A\t: b"})},
      {"space_before_colon_host", req("GET / HTTP/1.1", {"Host : a"})},
      {"space_in_name", req("GET / HTTP/1.1", {"Host: a", "X A: b"})},
      {"no_colon", req("GET / HTTP/1.1", {"Host: a", "X-A b"})},
      {"empty_name", req("GET / HTTP/1.1", {"Host: a", ": b"})},
      {"name_non_token", req("GET / HTTP/1.1", {"Host: a", "X(A): b"})},
      {"name_obs_text", req("GET / HTTP/1.1", {"Host: a", "X\xc3\xa9: b"})},
      {"obs_fold_space", req("GET / HTTP/1.1", {"Host: a", "X-A: b", " c"})},
      {"obs_fold_tab", req("GET / HTTP/1.1", {"Host: a", "X-A: b", "\tc"})},
      {"first_field_folded", req("GET / HTTP/1.1", {" Host: a"})},
      {"value_nul", req("GET / HTTP/1.1", {"Host: a", "X-A: b\0c"s})},
      {"value_bare_cr", req("GET / HTTP/1.1", {"Host: a", "X-A: b\rc"})},
      {"value_ends_bare_cr", "GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\r\n\r\n"},
      {"value_ctl", req("GET / HTTP/1.1", {"Host: a", "X-A: b\x01"})},
      {"value_del", req("GET / HTTP/1.1", {"Host: a", "X-A: b\x7f"})},
      {"value_vt_ff", req("GET / HTTP/1.1", {"Host: a", "X-A: b\x0b\x0c"})},
      {"name_nul", req("GET / HTTP/1.1", {"Host: a", "X\0A: b"s})},
      {"bare_cr_line_ends", "GET / HTTP/1.1\rHost: a\r\r"},
      {"head_ends_bare_cr", "GET / HTTP/1.1\r\nHost: a\r\n\r"},
      {"lf_cr_lf", "GET / HTTP/1.1\r\nHost: a\n\r\n"},
      // Content-Length.
      {"cl_and_te",
       req("POST / HTTP/1.1", {"Host: a", "Content-Length: 5", "Transfer-Encoding: chunked"}, "0\r\n\r\n")},
      {"te_and_cl",
       req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked", "Content-Length: 5"}, "0\r\n\r\n")},
      {"cl_twice_same",
       req("POST / HTTP/1.1", {"Host: a", "Content-Length: 5", "Content-Length: 5"}, "hello")},
      {"cl_twice_different",
       req("POST / HTTP/1.1", {"Host: a", "Content-Length: 5", "Content-Length: 6"}, "hello!")},
      {"cl_list", req("POST / HTTP/1.1", {"Host: a", "Content-Length: 5, 5"}, "hello")},
      {"cl_negative", req("POST / HTTP/1.1", {"Host: a", "Content-Length: -1"})},
      {"cl_plus", req("POST / HTTP/1.1", {"Host: a", "Content-Length: +5"}, "hello")},
      {"cl_hex", req("POST / HTTP/1.1", {"Host: a", "Content-Length: 0x5"}, "hello")},
      {"cl_empty", req("POST / HTTP/1.1", {"Host: a", "Content-Length:"})},
      {"cl_inner_space", req("POST / HTTP/1.1", {"Host: a", "Content-Length: 1 2"}, "hello world!")},
      {"cl_overflow", req("POST / HTTP/1.1", {"Host: a", "Content-Length: 99999999999999999999999"})},
      {"cl_space_before_colon", req("POST / HTTP/1.1", {"Host: a", "Content-Length : 5"}, "hello")},
      {"cl_short_body", req("POST / HTTP/1.1", {"Host: a", "Content-Length: 10"}, "hello")},
      {"cl_empty_head_unfinished", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: \r\n"},
      // Transfer-Encoding.
      {"te_gzip_chunked",
       req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: gzip, chunked"}, "5\r\nhello\r\n0\r\n\r\n")},
      {"te_chunked_gzip",
       req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked, gzip"}, "5\r\nhello\r\n0\r\n\r\n")},
      {"te_identity", req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: identity"})},
      {"te_twice", req("POST / HTTP/1.1",
                       {"Host: a", "Transfer-Encoding: chunked", "Transfer-Encoding: chunked"}, "0\r\n\r\n")},
      {"te_space_before_colon",
       req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding : chunked"}, "0\r\n\r\n")},
      {"te_http10", req("POST / HTTP/1.0", {"Transfer-Encoding: chunked"}, "0\r\n\r\n")},
      {"te_chunked_quoted",
       req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: \"chunked\""}, "0\r\n\r\n")},
      // Chunked bodies.
      {"chunk_size_invalid",
       req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked"}, "zz\r\nhello\r\n")},
      {"chunk_size_negative",
       req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked"}, "-5\r\nhello\r\n")},
      {"chunk_size_space",
       req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked"}, "5 \r\nhello\r\n0\r\n\r\n")},
      {"chunk_size_overflow",
       req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked"}, "ffffffffffffffffff\r\nhello\r\n")},
      {"chunk_data_no_crlf",
       req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked"}, "5\r\nhelloXX0\r\n\r\n")},
      {"chunk_data_too_long",
       req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked"}, "3\r\nhello\r\n0\r\n\r\n")},
      {"chunk_extension_bare_cr",
       req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked"}, "5;a=b\rc\r\nhello\r\n0\r\n\r\n")},
      {"chunk_extension_no_name",
       req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked"}, "5;\r\nhello\r\n0\r\n\r\n")},
      {"chunk_bare_lf", req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked"}, "5\nhello\n0\n\n")},
      {"chunk_size_line_bare_lf",
       req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked"}, "5\nhello\r\n0\r\n\r\n")},
      {"chunk_trailer_bare_lf",
       req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked"}, "0\r\nA: b\n\r\n")},
      {"chunk_trailer_folded",
       req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked"}, "0\r\nA: b\r\n c\r\n\r\n")},
      {"chunk_trailer_empty_name",
       req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked"}, "0\r\n: b\r\n\r\n")},
      {"chunk_trailer_malformed", req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked"},
                                      "5\r\nhello\r\n0\r\nbad trailer\r\n\r\n")},
      {"chunk_no_last_crlf",
       req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked"}, "5\r\nhello\r\n0\r\n")},
      {"chunk_missing", req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked"}, "")},
      {"chunk_size_partial", req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked"}, "zz")},
      {"chunk_ext_bws_before_semicolon",
       req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked"}, "5 ;a=b\r\nhello\r\n0\r\n\r\n")},
      {"chunk_ext_two",
       req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked"}, "5;a=b;c\r\nhello\r\n0\r\n\r\n")},
      {"chunk_ext_bws_after_semicolon",
       req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked"}, "5; a = b\r\nhello\r\n0\r\n\r\n")},
      {"chunk_size_junk_after_space",
       req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked"}, "5 6\r\nhello\r\n0\r\n\r\n")},
      {"chunk_data_bare_lf",
       req("POST / HTTP/1.1", {"Host: a", "Transfer-Encoding: chunked"}, "5\r\nhello\n0\r\n\r\n")},
      {"connect_with_body",
       req("CONNECT example.com:443 HTTP/1.1", {"Host: a", "Content-Length: 5"}, "hello")},
  };
}

std::vector<Case> hand_written_cases() {
  std::vector<Case> cases = valid_cases();
  for (Case& c : invalid_cases()) cases.push_back(std::move(c));
  return cases;
}

// Valid requests the mutations start from.
std::vector<std::string> mutation_seeds(const std::vector<Case>& cases) {
  std::vector<std::string> seeds;
  for (const Case& c : cases)
    if (accepted(run_ferry(c.bytes)) && accepted(run_llhttp(c.bytes))) seeds.push_back(c.bytes);
  return seeds;
}

// A deterministic generator: mt19937_64's sequence is fixed by the standard,
// and the reduction to a range is done here, not by a library distribution.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : gen_(seed) {}
  std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(gen_() % n); }

 private:
  std::mt19937_64 gen_;
};

// The boundaries of the lines of s: the offsets just past each LF, with 0 and s.size().
std::vector<std::size_t> line_starts(const std::string& s) {
  std::vector<std::size_t> starts{0};
  for (std::size_t i = 0; i < s.size(); ++i)
    if (s[i] == '\n' && i + 1 < s.size()) starts.push_back(i + 1);
  starts.push_back(s.size());
  return starts;
}

// One mutation: a bit flipped, a byte that matters to HTTP's syntax inserted
// or overwritten, a byte deleted, or a whole line duplicated or removed.
void mutate_once(std::string* s, Rng& rng) {
  static const std::string kSpecial = "\r\n :\0\t,;\"\x7f\x80"s;
  const std::size_t at = rng.below(s->size());
  switch (rng.below(6)) {
    case 0:
      if (!s->empty()) (*s)[at] = static_cast<char>((*s)[at] ^ (1 << rng.below(8)));
      break;
    case 1: s->insert(s->begin() + static_cast<std::ptrdiff_t>(at), kSpecial[rng.below(6)]); break;
    case 2:
      if (!s->empty()) (*s)[at] = kSpecial[rng.below(kSpecial.size())];
      break;
    case 3:
      if (!s->empty()) s->erase(at, 1);
      break;
    default: {
      const std::vector<std::size_t> starts = line_starts(*s);
      const std::size_t k = rng.below(starts.size() - 1);
      const std::string line = s->substr(starts[k], starts[k + 1] - starts[k]);
      if (rng.below(2) == 0)
        s->insert(starts[k], line);
      else
        s->erase(starts[k], line.size());
      break;
    }
  }
}

std::vector<Case> generated_cases(const std::vector<std::string>& seeds, std::size_t count) {
  std::vector<Case> out;
  Rng rng(0x6665727279ull);  // "ferry"
  for (std::size_t i = 0; i < count; ++i) {
    std::string s = seeds[i % seeds.size()];
    const std::size_t mutations = 1 + rng.below(3);
    for (std::size_t m = 0; m < mutations; ++m) mutate_once(&s, rng);
    out.push_back({"mutation " + std::to_string(i), std::move(s)});
  }
  return out;
}

// ---------------------------------------------------------------------------

struct Tally {
  std::size_t compared = 0, agreed = 0, agreed_accepted = 0, agreed_rejected = 0, agreed_incomplete = 0;
  std::map<std::string, std::size_t> exceptions, bugs;
  std::vector<std::string> unexplained;
};

// The rule that explains a difference: the strict pass first, then the lax one.
const Rule* explain(const Rule* begin, const Rule* end, std::string_view bytes) {
  if (const Rule* rule = find_rule(begin, end, make_subject(bytes, kMaxConstructs, true))) return rule;
  return find_rule(begin, end, make_subject(bytes, kMaxConstructs, false));
}

void compare_case(const Case& c, Tally* t, bool verbose) {
  const Subject s = make_subject(c.bytes, kMaxConstructs, true);
  ++t->compared;
  const std::string diff = difference(s.ferry, s.ll);
  if (diff.empty()) {
    ++t->agreed;
    if (accepted(s.ferry))
      ++t->agreed_accepted;
    else if (rejected(s.ferry))
      ++t->agreed_rejected;
    else
      ++t->agreed_incomplete;
    return;
  }
  const std::string line = c.name + ": \"" + escaped(c.bytes) + "\": " + diff;
  if (const Rule* bug = explain(kKnownFerryBugs.data(), kKnownFerryBugs.data() + kKnownFerryBugs.size(), c.bytes)) {
    // The first few requests of each bug, all of them when verbose.
    if (++t->bugs[bug->name] <= 3 || verbose)
      std::printf("known Ferry bug %s: %s\n", bug->name, line.c_str());
  } else if (const Rule* ex = explain(std::begin(kExceptions), std::end(kExceptions), c.bytes)) {
    ++t->exceptions[ex->name];
    if (verbose) std::printf("exception %s: %s\n", ex->name, line.c_str());
  } else {
    t->unexplained.push_back(line);
  }
}

void print_summary(const Tally& t) {
  std::printf(
      "\nllhttp %d.%d.%d (strict build, no lenient flags) against Ferry's scan_message + "
      "parse_request_head\n",
      LLHTTP_VERSION_MAJOR, LLHTTP_VERSION_MINOR, LLHTTP_VERSION_PATCH);
  std::printf("  requests compared         %6zu\n", t.compared);
  std::printf(
      "  agreed                    %6zu  (both accept alike %zu, both reject %zu, both incomplete %zu)\n",
      t.agreed, t.agreed_accepted, t.agreed_rejected, t.agreed_incomplete);
  for (const Rule& rule : kExceptions) {
    const auto it = t.exceptions.find(rule.name);
    std::printf("  exception %-34s %6zu\n", rule.name, it == t.exceptions.end() ? 0 : it->second);
  }
  for (const Rule& rule : kKnownFerryBugs) {
    const auto it = t.bugs.find(rule.name);
    const std::size_t n = it == t.bugs.end() ? 0 : it->second;
    std::printf("  known Ferry bug %-28s %6zu%s\n", rule.name, n,
                n == 0 ? "  (no longer seen: remove it?)" : "");
  }
  std::printf("  unexplained               %6zu\n\n", t.unexplained.size());
}

TEST(HttpLlhttpDiff, FerryAgreesWithLlhttpOrANamedException) {
  // FERRY_LLHTTP_DIFF_VERBOSE=1 prints every difference a rule covers, too.
  const bool verbose = std::getenv("FERRY_LLHTTP_DIFF_VERBOSE") != nullptr;
  const std::vector<Case> cases = hand_written_cases();
  const std::vector<std::string> seeds = mutation_seeds(cases);
  ASSERT_FALSE(seeds.empty());

  Tally t;
  for (const Case& c : cases) compare_case(c, &t, verbose);
  for (const Case& c : generated_cases(seeds, 20000)) compare_case(c, &t, verbose);
  print_summary(t);

  for (const std::string& u : t.unexplained) ADD_FAILURE() << "unexplained difference: " << u;
  // An exception no request needs any more is a hole in the comparison:
  // remove it (the hand-written cases exercise each one).
  for (const Rule& rule : kExceptions)
    EXPECT_TRUE(t.exceptions.count(rule.name)) << "exception " << rule.name << " covered no request";
}

}  // namespace
}  // namespace ferry::http
