// The HTTP pieces one by one: the proxy's message scan, the workers' head
// parser and path normalisation, the content index, and the proxy's writing of
// a worker's reply.

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "ferry/core/status.h"
#include "http/access_log.h"
#include "http/chunked_body.h"
#include "http/content.h"
#include "http/http_framing.h"
#include "http/http_handler.h"
#include "http/inference_route.h"
#include "http/message_scan.h"
#include "http/request_parser.h"

namespace ferry::http {
namespace {

const std::uint8_t* u8(const std::string& s) { return reinterpret_cast<const std::uint8_t*>(s.data()); }

MessageScan scan(const std::string& s, Limits l = {}) { return scan_message(u8(s), s.size(), l); }

TEST(MessageScan, WaitsForTheWholeHeadAndBody) {
  const std::string get = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  for (std::size_t k = 0; k < get.size(); ++k)
    EXPECT_EQ(scan(get.substr(0, k)).result, MessageScan::Result::NeedMore) << k;
  const MessageScan s = scan(get + "GET /next");
  ASSERT_EQ(s.result, MessageScan::Result::Complete);
  EXPECT_EQ(s.frame_bytes, get.size());
  EXPECT_EQ(s.head_bytes, get.size());

  const std::string post = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
  EXPECT_EQ(scan(post.substr(0, post.size() - 1)).result, MessageScan::Result::NeedMore);
  const MessageScan p = scan(post);
  ASSERT_EQ(p.result, MessageScan::Result::Complete);
  EXPECT_EQ(p.frame_bytes, post.size());
  EXPECT_EQ(p.head_bytes, post.size() - 5);
}

TEST(MessageScan, SkipsLeadingEmptyLinesAndAcceptsBareLf) {
  const MessageScan s = scan("\r\n\nGET / HTTP/1.1\nHost: x\n\n");
  ASSERT_EQ(s.result, MessageScan::Result::Complete);
  EXPECT_EQ(s.head_start, 3u);
  EXPECT_EQ(s.frame_bytes, 3u + 24u);
}

TEST(MessageScan, FramesChunkedBodiesWithExtensionsAndTrailers) {
  const std::string head = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string body = "4;name=value\r\nwiki\r\n5\r\npedia\r\n0\r\nExpires: never\r\n\r\n";
  for (std::size_t k = 0; k < body.size(); ++k)
    ASSERT_EQ(scan(head + body.substr(0, k)).result, MessageScan::Result::NeedMore) << k;
  const MessageScan s = scan(head + body + "GET");
  ASSERT_EQ(s.result, MessageScan::Result::Complete);
  EXPECT_EQ(s.frame_bytes, head.size() + body.size());
  EXPECT_EQ(scan(head + "4\r\nwikiXX").result, MessageScan::Result::Reject);  // no CRLF after the data
  EXPECT_EQ(scan(head + "zz\r\n").verdict.status, 400);
}

TEST(MessageScan, RefusesWhatWouldLetProxyAndWorkerDisagree) {
  const std::string host = "POST / HTTP/1.1\r\nHost: x\r\n";
  EXPECT_EQ(scan(host + "Content-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n").verdict.status, 400);
  EXPECT_EQ(scan(host + "Transfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n").verdict.status, 400);
  EXPECT_EQ(scan(host + "Content-Length: 1\r\nContent-Length: 1\r\n\r\nx").verdict.status, 400);
  EXPECT_EQ(scan(host + "Content-Length: +1\r\n\r\nx").verdict.status, 400);
  EXPECT_EQ(scan(host + "Content-Length: 1 1\r\n\r\nx").verdict.status, 400);
  EXPECT_EQ(scan(host + "Content-Length: 99999999999999999999999\r\n\r\n").verdict.status, 400);
  EXPECT_EQ(scan(host + "Transfer-Encoding: gzip, chunked\r\n\r\n").verdict.status, 400);
  EXPECT_EQ(scan(host + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n").verdict.status, 400);
  EXPECT_EQ(scan(host + "Transfer-Encoding\t: chunked\r\n\r\n").verdict.status, 400);
  EXPECT_EQ(scan("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n").verdict.status, 400);
  // Case and surrounding whitespace are not obfuscation.
  EXPECT_EQ(scan(host + "transfer-ENCODING:  Chunked \r\n\r\n0\r\n\r\n").result, MessageScan::Result::Complete);
}

TEST(MessageScan, LimitsGiveTheirStatusWithoutWaitingForTheRest) {
  Limits l;
  l.max_request_line = 32;
  l.max_head = 128;
  l.max_body = 10;
  EXPECT_EQ(scan("GET /" + std::string(40, 'a'), l).verdict.status, 414);
  EXPECT_EQ(scan("GET / HTTP/1.1\r\nX: " + std::string(200, 'b'), l).verdict.status, 431);
  EXPECT_EQ(scan("POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n", l).verdict.status, 413);
  EXPECT_EQ(scan("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nb\r\n", l).verdict.status, 413);
  EXPECT_EQ(scan("POST / HTTP/1.1\r\nContent-Length: 10\r\n\r\n", l).result, MessageScan::Result::NeedMore);
}

// --max-body counts a chunked body's data, not its framing: a body well within
// the limit is framed however small its chunks.
TEST(MessageScan, AChunkedBodyCountsOnlyItsDataAgainstTheBodyLimit) {
  const std::string head = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  std::string body;
  for (int i = 0; i < 20000; ++i) body += "1\r\nx\r\n";
  body += "0\r\n\r\n";
  const MessageScan s = scan(head + body);  // the default 64 KiB limit; 120,005 bytes on the wire
  ASSERT_EQ(s.result, MessageScan::Result::Complete) << s.verdict.status << " " << s.verdict.why;
  EXPECT_EQ(s.frame_bytes, head.size() + body.size());
  Limits l;
  l.max_body = 19999;
  const MessageScan over = scan(head + body, l);
  EXPECT_EQ(over.verdict.status, 413);
  EXPECT_STREQ(over.verdict.why, "chunked body over the body limit");
}

// The framing has a bound of its own, judged as soon as it is passed: in the
// chunk-size lines, or in the trailers while they arrive.
TEST(MessageScan, AChunkedBodysFramingHasABoundOfItsOwn) {
  const std::string head = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  std::string body;
  for (int i = 0; i < 1000; ++i) body += "1\r\nx\r\n";  // 5 bytes of framing a byte
  Limits l;
  l.max_chunk_framing = 4096;
  const MessageScan s = scan(head + body, l);
  EXPECT_EQ(s.verdict.status, 413);
  EXPECT_NE(std::string(s.verdict.why).find("framing"), std::string::npos) << s.verdict.why;
  l.max_chunk_framing = 5000 + 3 + 6;  // the sizes and line ends, "0\r\n" and the trailer "T: v\r\n"
  EXPECT_EQ(scan(head + body + "0\r\nT: v\r\n\r\n", l).result, MessageScan::Result::Complete);
  EXPECT_EQ(scan(head + body + "0\r\nT: vv\r\n\r\n", l).verdict.status, 413);
  // A trailer line still arriving is judged as it will be once whole ("T: vv\n" would fit).
  EXPECT_EQ(scan(head + body + "0\r\nT: vv\r", l).verdict.status, 413);
  EXPECT_EQ(scan(head + body + "0\r\nT: vv", l).result, MessageScan::Result::NeedMore);
  EXPECT_EQ(scan(head + body + "0\r\nT: v", l).result, MessageScan::Result::NeedMore);
  EXPECT_EQ(scan(head + body + "0\r\n\r", l).result, MessageScan::Result::NeedMore);
  // Bytes the proxy may hold for one request: the head, the data and the framing.
  EXPECT_GE(max_request_bytes(l), l.max_head + l.max_body + l.max_chunk_framing);
}

Verdict parse(const std::string& head, RequestHead* r) { return parse_request_head(u8(head), head.size(), r); }

TEST(RequestParser, ReadsTheRequestLineAndFields) {
  RequestHead r;
  const std::string h = "HEAD /a/b?x=1&y HTTP/1.1\r\nHost: h\r\nConnection: Keep-Alive, close\r\n\r\n";
  ASSERT_EQ(parse(h, &r).status, 200);
  EXPECT_EQ(r.method, Method::Head);
  EXPECT_TRUE(r.http11);
  EXPECT_FALSE(r.keep_alive);
  EXPECT_EQ(h.substr(r.path, r.path_len), "/a/b");
  EXPECT_EQ(h.substr(r.query, r.query_len), "x=1&y");

  ASSERT_EQ(parse("GET http://example.com:80/p HTTP/1.1\r\nHost: example.com\r\n\r\n", &r).status, 200);
  EXPECT_EQ(r.path_len, 2u);
  ASSERT_EQ(parse("GET / HTTP/1.0\r\n\r\n", &r).status, 200);
  EXPECT_FALSE(r.http11);
  EXPECT_FALSE(r.keep_alive);
  ASSERT_EQ(parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &r).status, 200);
  EXPECT_TRUE(r.keep_alive);
  ASSERT_EQ(parse("GET / HTTP/1.9\r\nHost: h\r\n\r\n", &r).status, 200) << "1.x is answered as 1.1";
}

TEST(RequestParser, GivesEachMalformedPartItsStatus) {
  RequestHead r;
  const std::vector<std::pair<std::string, int>> cases = {
      {"GET / HTTP/1.1\r\n\r\n", 400},                        // no Host
      {"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400},  // two
      {"GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400},            // two spaces
      {"GET / HTTP/1.1 \r\nHost: a\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost: a\r\nX : b\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost: a\r\nX: b\r\n\tc\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost: a\r\nX: \x01\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost: a\r\n: b\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\nHost: a\r\nX\r\n\r\n", 400},
      {"GET a HTTP/1.1\r\nHost: a\r\n\r\n", 400},
      {"GET ftp://x/ HTTP/1.1\r\nHost: a\r\n\r\n", 400},
      {"GET * HTTP/1.1\r\nHost: a\r\n\r\n", 400},
      {"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", 404},
      {"CONNECT a:443 HTTP/1.1\r\nHost: a\r\n\r\n", 404},
      {"get / HTTP/1.1\r\nHost: a\r\n\r\n", 501},
      {"GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505},
      {"GET / HTTP/1.10\r\nHost: a\r\n\r\n", 400},
      {"GET / http/1.1\r\nHost: a\r\n\r\n", 400},
  };
  for (const auto& [head, status] : cases) EXPECT_EQ(parse(head, &r).status, status) << head;
}

std::string normalized(const std::string& path, int* status) {
  std::vector<std::uint8_t> out(path.size() + 1);
  std::size_t n = 0;
  *status = normalize_path(u8(path), path.size(), out.data(), &n).status;
  return *status == 200 ? std::string(reinterpret_cast<const char*>(out.data()), n) : "";
}

TEST(NormalizePath, DecodesAndRemovesDotSegmentsWithoutLeavingTheRoot) {
  const std::vector<std::pair<std::string, std::string>> ok = {
      {"/", "/"},           {"/a/b", "/a/b"},        {"/a/./b", "/a/b"},       {"/a/../b", "/b"},
      {"/a/b/..", "/a/"},   {"/a/.", "/a/"},         {"/%41%62", "/Ab"},       {"/a%2fb", "/a/b"},
      {"/a/%2e%2E/b", "/b"}, {"/a//b", "/a//b"},     {"/..a/b..", "/..a/b.."},
  };
  for (const auto& [in, out] : ok) {
    int status = 0;
    EXPECT_EQ(normalized(in, &status), out) << in;
    EXPECT_EQ(status, 200) << in;
  }
  for (const std::string bad : {"/..", "/../a", "/a/../..", "/%2e%2e/x", "/%2e%2e%2f", "/a%00", "/%", "/%4", "/%g0",
                                "a", ""}) {
    int status = 0;
    normalized(bad, &status);
    EXPECT_EQ(status, 400) << bad;
  }
}

TEST(Content, IndexFindsEveryPageWithItsType) {
  const Content c = Content::load("", 1 << 20);
  const ContentView v = c.view();
  const ContentEntry* e = v.find(u8(std::string("/contacts.html")), 14);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(v.strings) + e->type_offset, e->type_len), "text/html");
  EXPECT_EQ(e->body_len, c.page(e->page).size());
  EXPECT_EQ(v.find(u8(std::string("/nope")), 5), nullptr);
  EXPECT_EQ(Content::type_for("/a/B.PNG"), "image/png");
  EXPECT_EQ(Content::type_for("/noext"), "application/octet-stream");
}

// A worker's reply through the proxy's framing: what the client receives.
std::string through_proxy(const std::string& request, const std::shared_ptr<const Content>& content,
                          bool* close = nullptr) {
  HttpHandler h{content->view()};
  std::vector<std::uint8_t> slot(4096);
  const std::size_t n = h(ByteView{u8(request), request.size()}, MutableByteView{slot.data(), slot.size()});
  HttpFraming framing({}, 4096, content, std::make_shared<Metrics>());
  std::vector<std::uint8_t> out(framing.max_response_bytes());
  const auto w = framing.write_response(ByteView{slot.data(), n}, out.data(), {"127.0.0.1:5000"});
  if (close != nullptr) *close = w.close_after;
  return std::string(reinterpret_cast<const char*>(out.data()), w.bytes) +
         std::string(reinterpret_cast<const char*>(w.body.data), w.body.size);
}

TEST(HttpFraming, WritesTheWorkersHeadWithTheDateAndThePage) {
  const auto content = std::make_shared<const Content>(Content::load("", 1 << 20));
  bool close = true;
  const std::string r = through_proxy("GET /contacts.html HTTP/1.1\r\nHost: a\r\n\r\n", content, &close);
  EXPECT_FALSE(close);
  EXPECT_TRUE(std::regex_search(r, std::regex("^HTTP/1.1 200 OK\r\nServer: ferry\r\nDate: [A-Z][a-z]{2}, \\d\\d [A-Z][a-z]{2} "
                                              "\\d{4} \\d\\d:\\d\\d:\\d\\d GMT\r\nContent-Type: text/html\r\n")))
      << r;
  const std::string& page = content->page(content->view().find(u8(std::string("/contacts.html")), 14)->page);
  EXPECT_NE(r.find("Content-Length: " + std::to_string(page.size()) + "\r\n"), std::string::npos);
  EXPECT_EQ(r.substr(r.size() - page.size()), page);
  const std::string head = through_proxy("HEAD /contacts.html HTTP/1.1\r\nHost: a\r\n\r\n", content);
  EXPECT_EQ(head.find("<html>"), std::string::npos);
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n");
  const std::string missing = through_proxy("GET /nope HTTP/1.1\r\nHost: a\r\n\r\n", content, &close);
  EXPECT_TRUE(close);
  EXPECT_EQ(missing.rfind("HTTP/1.1 404 Not Found\r\n", 0), 0u);
  EXPECT_NE(missing.find("Connection: close"), std::string::npos);
}

// The worker's reply meta for a request (what it routed it to).
ReplyMeta handled(const std::string& request, const ContentView& view) {
  HttpHandler h{view};
  std::vector<std::uint8_t> slot(4096);
  (void)h(ByteView{u8(request), request.size()}, MutableByteView{slot.data(), slot.size()});
  ReplyMeta m;
  std::memcpy(&m, slot.data(), sizeof(m));
  return m;
}

// The built-in routes, as HttpServer registers them: no model behind the APIs.
std::vector<RouteBinding> builtins(std::shared_ptr<Metrics> metrics = std::make_shared<Metrics>()) {
  return builtin_routes(std::make_shared<const InferenceRoute>(nullptr, infer::api::Limits{}),
                        std::move(metrics));
}

TEST(HttpHandler, RoutesEveryEmbeddingEndpointWithItsMethod) {
  const Content c = Content::load("", 1 << 20, builtins());
  for (const infer::api::EndpointPath& e : infer::api::kEndpoints) {
    const std::string get = std::string("GET ") + e.path + " HTTP/1.1\r\nHost: a\r\n\r\n";
    const std::string post =
        std::string("POST ") + e.path + " HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}";
    const ReplyMeta m = handled(e.post ? post : get, c.view());
    EXPECT_EQ(m.kind, ReplyKind::Route) << e.path;
    ASSERT_LT(m.page, c.routes()) << e.path;
    EXPECT_EQ(c.route(m.page).path, e.path);
    EXPECT_EQ(handled(e.post ? get : post, c.view()).status, 405) << e.path;
    EXPECT_EQ(handled(std::string("HEAD ") + e.path + " HTTP/1.1\r\nHost: a\r\n\r\n", c.view()).status, 405)
        << e.path;
  }
}

TEST(HttpHandler, EqualConstantTimeComparesWholeStrings) {
  const auto eq = [](const std::string& a, const std::string& b) {
    return equal_constant_time(u8(a), a.size(), u8(b), b.size());
  };
  EXPECT_TRUE(eq("Bearer k3y", "Bearer k3y"));
  EXPECT_TRUE(eq("", ""));
  EXPECT_FALSE(eq("Bearer k3y", "Bearer k3z"));
  EXPECT_FALSE(eq("Bearer k3", "Bearer k3y"));   // a prefix
  EXPECT_FALSE(eq("Bearer k3y ", "Bearer k3y"));  // longer
  EXPECT_FALSE(eq(std::string("Bearer k3y\0", 11), "Bearer k3y"));  // the longer's extra byte is 0
}

// --api-key: 401 with TEI's error shape and WWW-Authenticate on every route
// but /health and /metrics, until the request carries exactly "Bearer KEY".
TEST(HttpHandler, AnApiKeyGuardsEveryRouteButHealthAndMetrics) {
  Content loaded = Content::load("", 1 << 20, builtins());
  loaded.require_api_key("s3cret");
  const auto content = std::make_shared<const Content>(std::move(loaded));
  bool close = true;
  const std::string refused = through_proxy("GET /contacts.html HTTP/1.1\r\nHost: a\r\n\r\n", content, &close);
  EXPECT_EQ(refused.rfind("HTTP/1.1 401 Unauthorized\r\n", 0), 0u) << refused;
  EXPECT_NE(refused.find("\r\nWWW-Authenticate: Bearer\r\n"), std::string::npos) << refused;
  EXPECT_NE(refused.find("Content-Type: application/json"), std::string::npos) << refused;
  EXPECT_NE(refused.find(R"("error_type":"Unauthorized")"), std::string::npos) << refused;
  EXPECT_EQ(refused.find("s3cret"), std::string::npos);
  EXPECT_FALSE(close);
  const std::string allowed =
      through_proxy("GET /contacts.html HTTP/1.1\r\nHost: a\r\nauthorization: Bearer s3cret\r\n\r\n", content);
  EXPECT_EQ(allowed.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << allowed;
  for (const char* wrong : {"Bearer s3cre", "Bearer s3crett", "bearer s3cret", "Basic s3cret", "s3cret", ""}) {
    const std::string r = through_proxy(
        std::string("GET / HTTP/1.1\r\nHost: a\r\nAuthorization: ") + wrong + "\r\n\r\n", content);
    EXPECT_EQ(r.rfind("HTTP/1.1 401", 0), 0u) << wrong;
  }
  const ContentView v = content->view();
  EXPECT_EQ(handled("POST /embed HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}", v).status, 401);
  EXPECT_EQ(handled("GET /info HTTP/1.1\r\nHost: a\r\n\r\n", v).status, 401);
  EXPECT_NE(handled("GET /health HTTP/1.1\r\nHost: a\r\n\r\n", v).status, 401);
  EXPECT_EQ(handled("GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n", v).kind, ReplyKind::Route);
  EXPECT_EQ(handled("GET / HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer s3cret\r\n"
                    "Authorization: Bearer s3cret\r\n\r\n", v).status, 400);
  // Without a key nothing is asked.
  const Content open = Content::load("", 1 << 20);
  EXPECT_EQ(handled("GET /contacts.html HTTP/1.1\r\nHost: a\r\n\r\n", open.view()).status, 200);
}

// A page goes by reference from the page store: the proxy writes only its
// head, and its room for a response does not grow with the pages.
TEST(HttpFraming, APageGoesByReferenceFromThePageStore) {
  const std::string root = ::testing::TempDir() + "ferry-http-page-store";
  std::filesystem::create_directories(root);
  constexpr std::size_t kPage = std::size_t{4} << 20;
  std::ofstream(root + "/large.bin", std::ios::binary) << std::string(kPage, 'p');
  const auto content = std::make_shared<const Content>(Content::load(root, std::uint64_t{64} << 20));
  std::filesystem::remove_all(root);
  HttpFraming framing({}, 4096, content, std::make_shared<Metrics>());
  EXPECT_LT(framing.max_response_bytes(), std::size_t{64} << 10);
  HttpHandler h{content->view()};
  const std::string& page = content->page(content->view().find(u8(std::string("/large.bin")), 10)->page);
  std::vector<std::uint8_t> slot(4096), out(framing.max_response_bytes());
  for (const std::string method : {"GET", "HEAD"}) {
    const std::string request = method + " /large.bin HTTP/1.1\r\nHost: a\r\n\r\n";
    const std::size_t n = h(ByteView{u8(request), request.size()}, MutableByteView{slot.data(), slot.size()});
    const auto w = framing.write_response(ByteView{slot.data(), n}, out.data(), {"127.0.0.1:5000"});
    const std::string head(reinterpret_cast<const char*>(out.data()), w.bytes);
    EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n") << "only the head is written";
    EXPECT_NE(head.find("Content-Length: " + std::to_string(kPage) + "\r\n"), std::string::npos) << head;
    if (method == "GET") {
      EXPECT_EQ(w.body.data, u8(page)) << "the page store's own bytes";
      EXPECT_EQ(w.body.size, kPage);
    } else {
      EXPECT_EQ(w.body.size, 0u);
    }
  }
}

// A page of a few KiB is copied after its head: the response leaves in one
// piece, and its copy is bounded as any response's is.
TEST(HttpFraming, ASmallPageIsCopiedWithItsHead) {
  const std::string root = ::testing::TempDir() + "ferry-http-small-page";
  std::filesystem::create_directories(root);
  const std::string body(HttpFraming::kCopyPagesUpTo, 's');
  std::ofstream(root + "/small.txt", std::ios::binary) << body;
  const auto content = std::make_shared<const Content>(Content::load(root, std::uint64_t{64} << 20));
  std::filesystem::remove_all(root);
  HttpFraming framing({}, 4096, content, std::make_shared<Metrics>());
  HttpHandler h{content->view()};
  std::vector<std::uint8_t> slot(4096), out(framing.max_response_bytes());
  const std::string request = "GET /small.txt HTTP/1.1\r\nHost: a\r\n\r\n";
  const std::size_t n = h(ByteView{u8(request), request.size()}, MutableByteView{slot.data(), slot.size()});
  const auto w = framing.write_response(ByteView{slot.data(), n}, out.data(), {"127.0.0.1:5000"});
  EXPECT_EQ(w.body.size, 0u) << "nothing by reference";
  const std::string whole(reinterpret_cast<const char*>(out.data()), w.bytes);
  ASSERT_GT(whole.size(), body.size());
  EXPECT_EQ(whole.substr(whole.size() - body.size()), body);
  EXPECT_NE(whole.find("Content-Length: " + std::to_string(body.size()) + "\r\n"), std::string::npos);
}

// A program's routes, as the docs' "Adding a route" registers one.
class Hello final : public Route {
  void handle(const RouteRequest& r, Responder& reply) const override {
    const std::string method = r.method == Methods::Post   ? "POST"
                               : r.method == Methods::Head ? "HEAD"
                                                           : "GET";
    reply.send(200, "text/plain",
               method + " " + std::string(r.path) + " ?" + std::string(r.query) + " " + std::string(r.body),
               "X-Route: hello\r\n");
  }
};
struct Throws final : Route {
  void handle(const RouteRequest&, Responder&) const override { throw std::runtime_error("no luck"); }
};
struct Silent final : Route {
  void handle(const RouteRequest&, Responder&) const override {}
};
struct Large final : Route {
  void handle(const RouteRequest&, Responder& reply) const override {
    reply.send(200, "application/octet-stream", std::string(std::size_t{1} << 20, 'L'));
  }
};
struct Later final : Route {
  mutable Responder::Later later;  // the test completes it
  void handle(const RouteRequest&, Responder& reply) const override { later = reply.defer(); }
};

// The server thread's side of a deferred response: holds what complete() gave.
struct HeldResponse final : offload::Framing::Deferred {
  std::function<offload::Framing::Response()> build;
  void complete(std::function<offload::Framing::Response()> b) override { build = std::move(b); }
  bool abandoned() const noexcept override { return false; }
};
struct HoldingDeferrer final : offload::Framing::Deferrer {
  std::shared_ptr<HeldResponse> held;
  std::shared_ptr<offload::Framing::Deferred> defer() override {
    return held = std::make_shared<HeldResponse>();
  }
};

// A request through the worker and the proxy's framing, with a client that can wait.
struct Exchange {
  std::string bytes;  // written at once
  offload::Framing::Written written;
};
Exchange exchange(const std::string& request, const std::shared_ptr<const Content>& content,
                  offload::Framing::Deferrer* deferrer = nullptr) {
  HttpHandler h{content->view()};
  std::vector<std::uint8_t> slot(4096);
  const std::size_t n = h(ByteView{u8(request), request.size()}, MutableByteView{slot.data(), slot.size()});
  HttpFraming framing({}, 4096, content, std::make_shared<Metrics>());
  std::vector<std::uint8_t> out(framing.max_response_bytes());
  // The proxy keeps a request's body for the route (scan()'s kept part).
  const MessageScan s = scan_message(u8(request), request.size(), {});
  const std::size_t body_at = s.head_start + s.head_bytes;
  offload::Framing::Client client{"127.0.0.1:5000", ByteView{u8(request) + body_at, s.frame_bytes - body_at},
                                  0, deferrer};
  const auto w = framing.write_response(ByteView{slot.data(), n}, out.data(), client);
  return {std::string(reinterpret_cast<const char*>(out.data()), w.bytes), w};
}

TEST(Route, AProgramsRouteIsAnsweredWithWhatTheRequestCarried) {
  const auto content = std::make_shared<const Content>(Content::load(
      "", 1 << 20, {{"/hello", Methods::Get | Methods::Head | Methods::Post, std::make_shared<Hello>()}}));
  const Exchange get = exchange("GET /hello?name=x HTTP/1.1\r\nHost: a\r\n\r\n", content);
  EXPECT_EQ(get.bytes.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << get.bytes;
  EXPECT_NE(get.bytes.find("\r\nX-Route: hello\r\n"), std::string::npos) << get.bytes;
  EXPECT_NE(get.bytes.find("Connection: keep-alive"), std::string::npos);
  EXPECT_EQ(get.bytes.substr(get.bytes.find("\r\n\r\n") + 4), "GET /hello ?name=x ");
  EXPECT_FALSE(get.written.close_after);
  const Exchange head = exchange("HEAD /hello HTTP/1.1\r\nHost: a\r\n\r\n", content);
  EXPECT_EQ(head.bytes.substr(head.bytes.size() - 4), "\r\n\r\n") << head.bytes;
  EXPECT_NE(head.bytes.find("Content-Length: 14\r\n"), std::string::npos)
      << "the body's length: " << head.bytes;
  const Exchange chunked = exchange(
      "POST /./%68ello HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: "
      "chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
      content);
  EXPECT_EQ(chunked.bytes.substr(chunked.bytes.find("\r\n\r\n") + 4), "POST /hello ? abcde") << chunked.bytes;

  const auto get_only = std::make_shared<const Content>(
      Content::load("", 1 << 20, {{"/hello", Methods::Get, std::make_shared<Hello>()}}));
  const Exchange post = exchange("POST /hello HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n\r\nx", get_only);
  EXPECT_EQ(post.bytes.rfind("HTTP/1.1 405 Method Not Allowed\r\n", 0), 0u) << post.bytes;
  EXPECT_NE(post.bytes.find("this endpoint takes GET\n"), std::string::npos) << post.bytes;
}

TEST(Route, ARouteThatFailsOrNeverAnswersGetsA500AndTheConnectionCloses) {
  const auto content =
      std::make_shared<const Content>(Content::load("", 1 << 20,
                                                    {{"/throws", Methods::Get, std::make_shared<Throws>()},
                                                     {"/silent", Methods::Get, std::make_shared<Silent>()}}));
  const Exchange thrown = exchange("GET /throws HTTP/1.1\r\nHost: a\r\n\r\n", content);
  EXPECT_EQ(thrown.bytes.rfind("HTTP/1.1 500 ", 0), 0u) << thrown.bytes;
  EXPECT_NE(thrown.bytes.find("route /throws failed: no luck"), std::string::npos) << thrown.bytes;
  EXPECT_TRUE(thrown.written.close_after);
  const Exchange silent = exchange("GET /silent HTTP/1.1\r\nHost: a\r\n\r\n", content);
  EXPECT_NE(silent.bytes.find("route /silent gave no answer"), std::string::npos) << silent.bytes;
  EXPECT_TRUE(silent.written.close_after);
}

TEST(Route, AnAnswerLargerThanItsRoomOrGivenLaterIsDeferred) {
  auto later = std::make_shared<Later>();
  const auto content = std::make_shared<const Content>(Content::load(
      "", 1 << 20, {{"/large", Methods::Get, std::make_shared<Large>()}, {"/later", Methods::Post, later}}));
  HoldingDeferrer deferrer;
  const Exchange large = exchange("GET /large HTTP/1.1\r\nHost: a\r\n\r\n", content, &deferrer);
  EXPECT_TRUE(large.written.deferred);
  EXPECT_EQ(large.written.bytes, 0u);
  ASSERT_TRUE(deferrer.held && deferrer.held->build);
  const offload::Framing::Response r = deferrer.held->build();
  EXPECT_NE(r.bytes.find("Content-Length: 1048576\r\n"), std::string::npos);
  EXPECT_EQ(r.bytes.size() - r.bytes.find("\r\n\r\n") - 4, std::size_t{1} << 20);
  // Without a client that can wait, the route cannot answer: a 500.
  EXPECT_EQ(exchange("GET /large HTTP/1.1\r\nHost: a\r\n\r\n", content).bytes.rfind("HTTP/1.1 500 ", 0), 0u);

  const Exchange deferred =
      exchange("POST /later HTTP/1.1\r\nHost: a\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", content,
               &deferrer);
  EXPECT_TRUE(deferred.written.deferred);
  EXPECT_FALSE(later->later.abandoned());
  later->later.complete([] { return RouteResponse{202, "application/json", "{}", ""}; });
  const offload::Framing::Response done = deferrer.held->build();
  EXPECT_EQ(done.bytes.rfind("HTTP/1.1 202 ", 0), 0u) << done.bytes;
  EXPECT_NE(done.bytes.find("Connection: close\r\n"), std::string::npos) << done.bytes;
  EXPECT_TRUE(done.close_after);
}

TEST(Route, TheBuiltInRoutesAnswerHealthAndMetricsWithoutAKey) {
  Content loaded = Content::load("", 1 << 20, builtins());
  loaded.require_api_key("s3cret");
  const auto content = std::make_shared<const Content>(std::move(loaded));
  const Exchange health = exchange("GET /health HTTP/1.1\r\nHost: a\r\n\r\n", content);
  EXPECT_EQ(health.bytes.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << health.bytes;
  EXPECT_EQ(health.bytes.substr(health.bytes.size() - 3), "ok\n");
  const Exchange metrics = exchange("HEAD /metrics HTTP/1.1\r\nHost: a\r\n\r\n", content);
  EXPECT_NE(metrics.bytes.find("Content-Type: text/plain; version=0.0.4\r\n"), std::string::npos)
      << metrics.bytes;
  EXPECT_EQ(metrics.bytes.substr(metrics.bytes.size() - 4), "\r\n\r\n");
  const Exchange info =
      exchange("GET /info HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer s3cret\r\n\r\n", content);
  EXPECT_EQ(info.bytes.rfind("HTTP/1.1 503 ", 0), 0u) << "no model: " << info.bytes;
  EXPECT_NE(info.bytes.find(R"("error_type":"Unhealthy")"), std::string::npos) << info.bytes;
}

TEST(Content, RoutesAreCheckedAndReplaceAPageOfTheirPath) {
  const auto hello = std::make_shared<Hello>();
  EXPECT_THROW(Content::load("", 1 << 20, {{"/a", Methods::Get, hello}, {"/a", Methods::Post, hello}}),
               Error);
  EXPECT_THROW(Content::load("", 1 << 20, {{"a", Methods::Get, hello}}), Error);
  EXPECT_THROW(Content::load("", 1 << 20, {{"/a?b", Methods::Get, hello}}), Error);
  EXPECT_THROW(Content::load("", 1 << 20, {{"/a", Methods{}, hello}}), Error);
  EXPECT_THROW(Content::load("", 1 << 20, {{"/a", Methods::Get, nullptr}}), Error);
  const auto content =
      std::make_shared<const Content>(Content::load("", 1 << 20, {{"/contacts.html", Methods::Get, hello}}));
  const Exchange r = exchange("GET /contacts.html HTTP/1.1\r\nHost: a\r\n\r\n", content);
  EXPECT_NE(r.bytes.find("X-Route: hello"), std::string::npos) << r.bytes;
  EXPECT_NE(exchange("GET / HTTP/1.1\r\nHost: a\r\n\r\n", content).bytes.find("<html>"), std::string::npos);
}

TEST(HttpFraming, AReplyItCannotTrustBecomesA500) {
  const auto content = std::make_shared<const Content>(Content::load("", 1 << 20));
  HttpFraming framing({}, 4096, content, std::make_shared<Metrics>());
  std::vector<std::uint8_t> out(framing.max_response_bytes());
  ReplyMeta m;
  m.kind = ReplyKind::Page;
  m.page = 99;  // no such page
  m.head_len = 40;
  m.date_at = 5;
  std::vector<std::uint8_t> reply(sizeof(m) + 40, 'x');
  std::memcpy(reply.data(), &m, sizeof(m));
  auto w = framing.write_response(ByteView{reply.data(), reply.size()}, out.data(), {});
  EXPECT_TRUE(w.close_after);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(out.data()), 25), "HTTP/1.1 500 Internal Ser");
  m.kind = ReplyKind::Inline;
  m.head_len = 4000;  // beyond the reply
  std::memcpy(reply.data(), &m, sizeof(m));
  w = framing.write_response(ByteView{reply.data(), reply.size()}, out.data(), {});
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(out.data()), 12), "HTTP/1.1 500");
  w = framing.write_response(ByteView{reply.data(), 3}, out.data(), {});  // shorter than the meta
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(out.data()), 12), "HTTP/1.1 500");
}

TEST(HttpFraming, ReportsTheWorkersTimeAndLogsInCommonLogFormat) {
  const auto content = std::make_shared<const Content>(Content::load("", 1 << 20));
  const std::string path = ::testing::TempDir() + "ferry-access-log-test.log";
  std::remove(path.c_str());
  {
    auto log = std::make_shared<AccessLog>(path);
    HttpFraming framing({}, 4096, content, std::make_shared<Metrics>(), log);
    HttpHandler h{content->view()};
    std::vector<std::uint8_t> slot(4096), out(framing.max_response_bytes());
    for (const std::string req : {"GET /contacts.html HTTP/1.1\r\nHost: a\r\n\r\n",
                                  "GET /\"quoted\"\x01 HTTP/1.1\r\nHost: a\r\n\r\n"}) {
      const std::size_t n = h(ByteView{u8(req), req.size()}, MutableByteView{slot.data(), slot.size()});
      const auto w = framing.write_response(ByteView{slot.data(), n}, out.data(), {"10.1.2.3:40000"});
      EXPECT_GT(w.worker_ns, 0u);
    }
  }
  std::ifstream in(path);
  std::string first, second;
  std::getline(in, first);
  std::getline(in, second);
  EXPECT_TRUE(std::regex_match(first, std::regex(R"(10\.1\.2\.3 - - \[\d\d/[A-Z][a-z]{2}/\d{4}:\d\d:\d\d:\d\d \+0000\] "GET /contacts.html HTTP/1.1" 200 \d+)")))
      << first;
  EXPECT_NE(second.find(R"("GET /\x22quoted\x22\x01 HTTP/1.1" 400 )"), std::string::npos) << second;
  std::remove(path.c_str());
}

TEST(Metrics, CountsByStatusInThePrometheusFormat) {
  Metrics m;
  m.count(200, 100);
  m.count(200, 50);
  m.count(404, 10);
  m.count(418, 1);
  m.set_server_stats([] {
    offload::ServerStats st;
    st.clients = 7;
    st.handle.counts[1] = 3;  // three requests of 1-2 us on the worker
    st.handle.counts[4] = 1;  // one of 10-20 us
    st.handle.sum_us = 20;
    return st;
  });
  const std::string text = m.render();
  EXPECT_NE(text.find("ferry_http_stage_seconds_bucket{stage=\"handle\",le=\"1e-06\"} 0\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("ferry_http_stage_seconds_bucket{stage=\"handle\",le=\"2e-06\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("ferry_http_stage_seconds_bucket{stage=\"handle\",le=\"+Inf\"} 4\n"), std::string::npos);
  EXPECT_NE(text.find("ferry_http_stage_seconds_count{stage=\"handle\"} 4\n"), std::string::npos);
  EXPECT_NE(text.find("ferry_http_stage_seconds_sum{stage=\"handle\"} 2e-05\n"), std::string::npos);
  EXPECT_NE(text.find("ferry_http_responses_total{code=\"200\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("ferry_http_responses_total{code=\"404\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("ferry_http_responses_total{code=\"other\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("ferry_http_response_bytes_total 161\n"), std::string::npos);
  EXPECT_NE(text.find("ferry_http_open_connections 7\n"), std::string::npos);
}

}  // namespace
// The chunked body the proxy keeps for the embedding APIs.
TEST(ChunkedBody, DecodesDataAndSkipsExtensionsAndTrailers) {
  const std::string body = "4;name=v\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-T: 1\r\n\r\n";
  std::string out;
  ASSERT_TRUE(decode_chunked_body(reinterpret_cast<const std::uint8_t*>(body.data()), body.size(), out));
  EXPECT_EQ(out, "Wikipedia in\r\n\r\nchunks.");
  const std::string empty = "0\r\n\r\n";
  ASSERT_TRUE(decode_chunked_body(reinterpret_cast<const std::uint8_t*>(empty.data()), empty.size(), out));
  EXPECT_EQ(out, "");
  const std::string lone_lf = "2\r\nhi\r\n0\r\nX-T: 1\n\n";  // trailer lines ending in LF, as the scan allows
  ASSERT_TRUE(decode_chunked_body(reinterpret_cast<const std::uint8_t*>(lone_lf.data()), lone_lf.size(), out));
  EXPECT_EQ(out, "hi");
}

TEST(ChunkedBody, RefusesWhatDoesNotParse) {
  for (const std::string bad : {"", "x\r\n", "4\r\nWik", "4\r\nWikiXX0\r\n\r\n", "4\r\nWiki\r\n0\r\n",
                                "ffffffffffffffffff\r\n", "0\r\n\r\nextra", "4\r\nWiki\r\n"}) {
    std::string out;
    EXPECT_FALSE(decode_chunked_body(reinterpret_cast<const std::uint8_t*>(bad.data()), bad.size(), out)) << bad;
  }
}

}  // namespace ferry::http
