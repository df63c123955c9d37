// ferry_http_parser_bench: nanoseconds per request of Ferry's HTTP/1.1 request
// parsing, beside llhttp's, on one core, for typical requests of 80 to 700 bytes:
//
//   ferry scan    the proxy's scan_message: where the request ends
//   ferry parse   a worker's parse_request_head on the head the scan framed
//   ferry both    the two in turn, as a request goes through Ferry
//   llhttp        llhttp (Node.js's parser), built strict (LLHTTP_STRICT_MODE=1),
//                 no lenient flag, callbacks for the method, target, version,
//                 fields and body that only record spans
//
//   ferry_http_parser_bench [--min-time 0.3] [--repeats 5] [--json-out FILE]
//
// Each measurement repeats the same request in a loop for at least --min-time
// seconds, --repeats times, and reports the median (and the fastest run in the
// JSON). The request stays in the cache, so these are parsing costs alone; an
// empty asm statement that clobbers memory between iterations keeps the
// compiler from hoisting the parse out of the loop, and the results go to a
// volatile sink.

#include <llhttp.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "http/message_scan.h"
#include "http/request_parser.h"

namespace {

using ferry::http::Limits;
using ferry::http::MessageScan;
using ferry::http::RequestHead;

volatile std::uint64_t g_sink;

// Tells the compiler that memory (the request among it) may have changed and
// that `v` is used: the next iteration must parse again.
template <class T>
inline void keep(const T& v) {
  asm volatile("" : : "r,m"(v) : "memory");
}

struct Request {
  const char* name;
  std::string bytes;
};

// A POST of `body`, its head ending with the right Content-Length.
std::string post(const std::string& head_fields, const std::string& body) {
  return "POST /api/v1/items HTTP/1.1\r\n" + head_fields + "Content-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

std::vector<Request> requests() {
  return {
      {"curl GET",
       "GET /index.html HTTP/1.1\r\n"
       "Host: localhost:8080\r\n"
       "User-Agent: curl/8.5.0\r\n"
       "Accept: */*\r\n"
       "\r\n"},
      {"browser GET",
       "GET /docs/getting-started.html HTTP/1.1\r\n"
       "Host: www.example.com\r\n"
       "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0\r\n"
       "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8\r\n"
       "Accept-Language: en-US,en;q=0.5\r\n"
       "Accept-Encoding: gzip, deflate, br\r\n"
       "Connection: keep-alive\r\n"
       "Cookie: session=7f3a9c2e41b84d0f; theme=dark; lang=en\r\n"
       "Upgrade-Insecure-Requests: 1\r\n"
       "Sec-Fetch-Dest: document\r\n"
       "\r\n"},
      {"browser GET, more cookies",
       "GET /account/orders?page=2&sort=date HTTP/1.1\r\n"
       "Host: shop.example.com\r\n"
       "User-Agent: Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
       "Chrome/124.0.0.0 Safari/537.36\r\n"
       "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8\r\n"
       "Accept-Language: en-GB,en;q=0.9,de;q=0.8\r\n"
       "Accept-Encoding: gzip, deflate, br, zstd\r\n"
       "Referer: https://shop.example.com/account/orders\r\n"
       "Cookie: session=7f3a9c2e41b84d0f9a1c; cart=3; theme=dark; _ga=GA1.2.1234567890.1700000000; "
       "_gid=GA1.2.987654321.1714000000; consent=analytics%3Dno%2Cads%3Dno\r\n"
       "Sec-Fetch-Dest: document\r\n"
       "Sec-Fetch-Mode: navigate\r\n"
       "Sec-Fetch-Site: same-origin\r\n"
       "Cache-Control: max-age=0\r\n"
       "Connection: keep-alive\r\n"
       "\r\n"},
      {"POST with Content-Length",
       post("Host: api.example.com\r\n"
            "User-Agent: python-requests/2.31.0\r\n"
            "Accept: application/json\r\n"
            "Accept-Encoding: gzip, deflate\r\n"
            "Authorization: Bearer 0123456789abcdef0123456789abcdef\r\n"
            "Content-Type: application/json\r\n",
            "{\"name\": \"widget\", \"count\": 3, \"tags\": [\"blue\", \"small\"]}\n")},
  };
}

// ---------------------------------------------------------------------------
// The parsers, one request per call; each returns something of what it found.

constexpr Limits kLimits{};  // the server's defaults

const std::uint8_t* u8(const std::string& s) {
  return reinterpret_cast<const std::uint8_t*>(s.data());
}

std::uint64_t ferry_scan(const std::string& req) {
  const MessageScan s = ferry::http::scan_message(u8(req), req.size(), kLimits);
  return s.frame_bytes + s.head_bytes;
}

// The worker gets the head the proxy framed: found once, outside the loop.
struct Head {
  std::size_t start = 0, bytes = 0;
};

std::uint64_t ferry_parse(const std::string& req, Head head) {
  RequestHead r;
  const ferry::http::Verdict v = ferry::http::parse_request_head(u8(req) + head.start, head.bytes, &r);
  return v.status + r.target_len + r.content_length;
}

std::uint64_t ferry_both(const std::string& req) {
  const MessageScan s = ferry::http::scan_message(u8(req), req.size(), kLimits);
  RequestHead r;
  const ferry::http::Verdict v = ferry::http::parse_request_head(u8(req) + s.head_start, s.head_bytes, &r);
  return s.frame_bytes + v.status + r.target_len;
}

// llhttp's callbacks record where the method, target and fields are, and
// count the fields and body bytes: what a server needs to go on.
struct Span {
  const char* at = nullptr;
  std::size_t len = 0;
};
struct LlhttpRecord {
  Span method, url, version, last_field, last_value;
  std::uint32_t fields = 0;
  std::uint64_t body = 0;
  bool complete = false;
};

LlhttpRecord* record(llhttp_t* p) {
  return static_cast<LlhttpRecord*>(p->data);
}
int on_method(llhttp_t* p, const char* at, std::size_t n) {
  record(p)->method = {at, n};
  return 0;
}
int on_url(llhttp_t* p, const char* at, std::size_t n) {
  record(p)->url = {at, n};
  return 0;
}
int on_version(llhttp_t* p, const char* at, std::size_t n) {
  record(p)->version = {at, n};
  return 0;
}
int on_header_field(llhttp_t* p, const char* at, std::size_t n) {
  ++record(p)->fields;
  record(p)->last_field = {at, n};
  return 0;
}
int on_header_value(llhttp_t* p, const char* at, std::size_t n) {
  record(p)->last_value = {at, n};
  return 0;
}
int on_headers_complete(llhttp_t*) {
  return 0;
}
int on_body(llhttp_t* p, const char*, std::size_t n) {
  record(p)->body += n;
  return 0;
}
int on_message_complete(llhttp_t* p) {
  record(p)->complete = true;
  return 0;
}

llhttp_settings_t llhttp_callbacks() {
  llhttp_settings_t s;
  llhttp_settings_init(&s);
  s.on_method = on_method;
  s.on_url = on_url;
  s.on_version = on_version;
  s.on_header_field = on_header_field;
  s.on_header_value = on_header_value;
  s.on_headers_complete = on_headers_complete;
  s.on_body = on_body;
  s.on_message_complete = on_message_complete;
  return s;
}

// One parser for a whole measurement, as for a keep-alive connection: after
// a complete request llhttp waits for the next one, which is the same again.
struct Llhttp {
  llhttp_settings_t settings = llhttp_callbacks();
  llhttp_t parser;
  LlhttpRecord rec;
  Llhttp() {
    llhttp_init(&parser, HTTP_REQUEST, &settings);
    parser.data = &rec;
  }
  std::uint64_t run(const std::string& req) {
    rec = LlhttpRecord{};
    const llhttp_errno_t err = llhttp_execute(&parser, req.data(), req.size());
    return static_cast<std::uint64_t>(err) + rec.url.len + rec.fields + rec.body + rec.complete;
  }
};

// ---------------------------------------------------------------------------
// Timing.

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Seconds for `iters` calls of f.
template <class F>
double time_loop(F& f, std::uint64_t iters) {
  std::uint64_t acc = 0;
  const double t0 = now_s();
  for (std::uint64_t i = 0; i < iters; ++i) {
    acc += f();
    keep(acc);
  }
  const double t = now_s() - t0;
  g_sink = acc;
  return t;
}

struct Measurement {
  double median_ns = 0, min_ns = 0;
  std::vector<double> runs_ns;
  std::uint64_t iters = 0;  // per run
};

// Calibrates the loop to about min_time seconds, then times `repeats` runs.
template <class F>
Measurement measure(F f, double min_time, int repeats) {
  std::uint64_t iters = 1000;
  double t = time_loop(f, iters);  // also warms caches and branch predictors
  while (t < min_time / 8) {
    iters *= 2;
    t = time_loop(f, iters);
  }
  Measurement m;
  m.iters = static_cast<std::uint64_t>(static_cast<double>(iters) * min_time / t) + 1;
  for (int r = 0; r < repeats; ++r)
    m.runs_ns.push_back(time_loop(f, m.iters) * 1e9 / static_cast<double>(m.iters));
  std::vector<double> sorted = m.runs_ns;
  std::sort(sorted.begin(), sorted.end());
  m.median_ns = sorted[sorted.size() / 2];
  m.min_ns = sorted.front();
  return m;
}

// Each request must be one Ferry accepts whole and llhttp parses without an
// error: otherwise the numbers would time an error path.
bool check(const Request& r, Head* head) {
  const MessageScan s = ferry::http::scan_message(u8(r.bytes), r.bytes.size(), kLimits);
  RequestHead h;
  const bool ferry_ok =
      s.result == MessageScan::Result::Complete && s.frame_bytes == r.bytes.size() &&
      ferry::http::parse_request_head(u8(r.bytes) + s.head_start, s.head_bytes, &h).status == 200;
  Llhttp ll;
  ll.run(r.bytes);
  const bool llhttp_ok = llhttp_get_errno(&ll.parser) == HPE_OK && ll.rec.complete;
  if (!ferry_ok || !llhttp_ok) {
    std::fprintf(stderr, "ferry_http_parser_bench: request \"%s\" is not parsed whole by %s\n", r.name,
                 ferry_ok ? "llhttp" : "Ferry");
    return false;
  }
  *head = {s.head_start, s.head_bytes};
  return true;
}

nlohmann::json to_json(const Measurement& m) {
  return {
      {"median_ns", m.median_ns}, {"min_ns", m.min_ns}, {"runs_ns", m.runs_ns}, {"iters_per_run", m.iters}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ferry_http_parser_bench: ns per request of Ferry's HTTP/1.1 parsing and of llhttp"};
  double min_time = 0.3;
  int repeats = 5;
  std::string json_out;
  app.add_option("--min-time", min_time, "seconds each timed run lasts at least")
      ->check(CLI::Range(0.001, 60.0));
  app.add_option("--repeats", repeats, "timed runs per measurement (the median is reported)")
      ->check(CLI::Range(1, 100));
  app.add_option("--json-out", json_out, "write the results as JSON to this file");
  CLI11_PARSE(app, argc, argv);

  std::printf("%-28s %6s %12s %12s %12s %12s   (ns per request, median of %d runs of >= %.2f s)\n", "request",
              "bytes", "ferry scan", "ferry parse", "ferry both", "llhttp", repeats, min_time);
  nlohmann::json rows = nlohmann::json::array();
  for (const Request& r : requests()) {
    Head head;
    if (!check(r, &head)) return 1;
    Llhttp ll;
    const Measurement scan = measure([&] { return ferry_scan(r.bytes); }, min_time, repeats);
    const Measurement parse = measure([&] { return ferry_parse(r.bytes, head); }, min_time, repeats);
    const Measurement both = measure([&] { return ferry_both(r.bytes); }, min_time, repeats);
    const Measurement llhttp = measure([&] { return ll.run(r.bytes); }, min_time, repeats);
    std::printf("%-28s %6zu %12.1f %12.1f %12.1f %12.1f\n", r.name, r.bytes.size(), scan.median_ns,
                parse.median_ns, both.median_ns, llhttp.median_ns);
    std::fflush(stdout);
    rows.push_back({{"request", r.name},
                    {"bytes", r.bytes.size()},
                    {"ferry_scan", to_json(scan)},
                    {"ferry_parse", to_json(parse)},
                    {"ferry_scan_and_parse", to_json(both)},
                    {"llhttp", to_json(llhttp)}});
  }
  if (!json_out.empty()) {
    const nlohmann::json out{
        {"benchmark", "ferry_http_parser_bench"},
        {"llhttp_version", std::to_string(LLHTTP_VERSION_MAJOR) + "." + std::to_string(LLHTTP_VERSION_MINOR) +
                               "." + std::to_string(LLHTTP_VERSION_PATCH)},
        {"llhttp_mode", "strict build (LLHTTP_STRICT_MODE=1), no lenient flags"},
        {"min_time_s", min_time},
        {"repeats", repeats},
        {"requests", rows}};
    std::ofstream(json_out) << out.dump(2) << "\n";
  }
  return 0;
}
