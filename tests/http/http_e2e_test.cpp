// `ferry http` end to end: the real binary, real sockets, real clients (curl,
// Python's http.client, raw bytes). Run with --backend=cpu here and with every
// GPU launch method on a GPU machine (the same cases).

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/ferry_processes.h"
#include "support/http_client.h"
#include "support/proc_stats.h"
#include "support/raw_client.h"

namespace ferry::test {
namespace {

namespace fs = std::filesystem;

// Runs a shell command; returns its exit status and stdout.
int sh(const std::string& cmd, std::string* out) {
  out->clear();
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out->append(buf, n);
  const int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string url(std::uint16_t port, const std::string& path) {
  return "http://127.0.0.1:" + std::to_string(port) + path;
}

// A --root with text, JSON, a nested file, a page larger than any slot, and a
// symbolic link to a file outside it (which must not be served).
class Site {
 public:
  Site() {
    dir_ = fs::temp_directory_path() / ("ferry-http-root-" + std::to_string(getpid()));
    fs::create_directories(dir_ / "sub");
    write("hello.txt", "hello from the root\n");
    write("sub/data.json", "{\"a\": 1}\n");
    big_.resize(300 * 1024);
    for (std::size_t i = 0; i < big_.size(); ++i) big_[i] = static_cast<char>('a' + (i * 7 + i / 13) % 26);
    write("big.bin", big_);
    write("index.html", "<h1>the root's own index</h1>\n");
    std::ofstream(fs::temp_directory_path() / "ferry-http-secret.txt") << "secret\n";
    fs::create_symlink(fs::temp_directory_path() / "ferry-http-secret.txt", dir_ / "secret.txt");
  }
  ~Site() {
    fs::remove_all(dir_);
    fs::remove(fs::temp_directory_path() / "ferry-http-secret.txt");
  }
  std::string dir() const { return dir_.string(); }
  const std::string& big() const { return big_; }

 private:
  void write(const std::string& name, const std::string& body) { std::ofstream(dir_ / name, std::ios::binary) << body; }
  fs::path dir_;
  std::string big_;
};

class Http : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    site_ = new Site();
    server_ = new FerryHttp({"--root", site_->dir(), "--header-timeout", "1", "--max-body", "1KiB",
                             "--max-request-line", "1024", "--max-head", "4096"},
                            2);
  }
  static void TearDownTestSuite() {
    delete server_;
    delete site_;
  }
  static std::uint16_t port() { return server_->port(); }
  static Site* site_;
  static FerryHttp* server_;
};
Site* Http::site_ = nullptr;
FerryHttp* Http::server_ = nullptr;

TEST_F(Http, CurlKeepsTheConnectionForSeveralRequests) {
  std::string out;
  const std::string cmd = "curl -sv " + url(port(), "/index.html") + " " + url(port(), "/contacts.html") + " 2>&1";
  ASSERT_EQ(sh(cmd, &out), 0) << out;
  EXPECT_NE(out.find("Re-using existing connection"), std::string::npos) << out;
  EXPECT_NE(out.find("the root's own index"), std::string::npos) << out;
  EXPECT_NE(out.find("<h1>Contacts</h1>"), std::string::npos) << out;
}

TEST_F(Http, HeadersAreCorrect) {
  HttpConnection c(port());
  c.send(http_get("/hello.txt"));
  const auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status_line, "HTTP/1.1 200 OK");
  EXPECT_EQ(r->body, "hello from the root\n");
  EXPECT_EQ(r->header("content-length"), "20");
  EXPECT_EQ(r->header("content-type"), "text/plain");
  EXPECT_EQ(r->header("connection"), "keep-alive");
  EXPECT_EQ(r->header("server"), "ferry");
  EXPECT_TRUE(std::regex_match(r->header("date"),
                               std::regex(R"((Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d\d:\d\d:\d\d GMT)")))
      << r->header("date");
}

TEST_F(Http, CurlHeadGivesTheLengthWithoutABody) {
  std::string out;
  ASSERT_EQ(sh("curl -sI " + url(port(), "/sub/data.json"), &out), 0);
  EXPECT_NE(out.find("HTTP/1.1 200 OK"), std::string::npos) << out;
  EXPECT_NE(out.find("Content-Length: 9"), std::string::npos) << out;
  EXPECT_NE(out.find("Content-Type: application/json"), std::string::npos) << out;
  HttpConnection c(port());
  c.send(http_get("/sub/data.json", "", "HEAD") + http_get("/sub/data.json"));
  const auto head = c.read_response(true);
  const auto get = c.read_response();
  ASSERT_TRUE(head && get);
  EXPECT_EQ(head->body, "");
  EXPECT_EQ(get->body, "{\"a\": 1}\n");
}

TEST_F(Http, CurlGets404WithConnectionClose) {
  std::string out;
  ASSERT_EQ(sh("curl -s -o /dev/null -w '%{http_code} %header{connection}' " + url(port(), "/missing.html"), &out),
            0);
  EXPECT_EQ(out, "404 close");
}

TEST_F(Http, RootFilesAreServedAndALinkOutOfTheRootIsNot) {
  std::string out;
  ASSERT_EQ(sh("curl -s " + url(port(), "/big.bin") + " | md5sum", &out), 0);
  std::string expect;
  {
    std::ofstream(fs::temp_directory_path() / "ferry-http-big.expect", std::ios::binary) << site_->big();
    sh("md5sum < " + (fs::temp_directory_path() / "ferry-http-big.expect").string(), &expect);
    fs::remove(fs::temp_directory_path() / "ferry-http-big.expect");
  }
  EXPECT_EQ(out, expect) << "a page larger than a slot comes whole";
  ASSERT_EQ(sh("curl -s -o /dev/null -w '%{http_code}' " + url(port(), "/secret.txt"), &out), 0);
  EXPECT_EQ(out, "404");
  ASSERT_EQ(sh("curl -s " + url(port(), "/"), &out), 0);
  EXPECT_EQ(out, "<h1>the root's own index</h1>\n") << "/ is /index.html, and the root's replaces the built-in";
}

TEST_F(Http, PythonHttpClientReusesItsConnection) {
  const std::string script =
      "import http.client\n"
      "c = http.client.HTTPConnection('127.0.0.1', " + std::to_string(port()) + ", timeout=10)\n"
      "for p in ['/hello.txt', '/contacts.html', '/hello.txt']:\n"
      "    c.request('GET', p)\n"
      "    r = c.getresponse()\n"
      "    body = r.read()\n"
      "    assert r.status == 200, (p, r.status)\n"
      "    assert len(body) == int(r.getheader('Content-Length'))\n"
      "c.request('HEAD', '/hello.txt')\n"
      "r = c.getresponse(); r.read()\n"
      "assert r.status == 200 and r.getheader('Content-Length') == '20'\n"
      "c.request('GET', '/nope')\n"
      "r = c.getresponse(); r.read()\n"
      "assert r.status == 404 and r.getheader('Connection') == 'close'\n"
      "print('ok')\n";
  const auto path = fs::temp_directory_path() / ("ferry-http-client-" + std::to_string(getpid()) + ".py");
  std::ofstream(path) << script;
  std::string out;
  const int rc = sh("python3 " + path.string() + " 2>&1", &out);
  fs::remove(path);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_EQ(out, "ok\n");
}

TEST_F(Http, PipelinedRequestsAreAnsweredInOrder) {
  HttpConnection c(port());
  std::string batch;
  const char* paths[] = {"/hello.txt", "/sub/data.json", "/contacts.html"};
  for (int i = 0; i < 300; ++i) batch += http_get(paths[i % 3]);  // beyond the 128 in flight
  c.send(batch);
  for (int i = 0; i < 300; ++i) {
    const auto r = c.read_response();
    ASSERT_TRUE(r) << i;
    ASSERT_EQ(r->status, 200) << i;
    if (i % 3 == 0) {
      ASSERT_EQ(r->body, "hello from the root\n") << i;
    } else if (i % 3 == 1) {
      ASSERT_EQ(r->body, "{\"a\": 1}\n") << i;
    } else {
      ASSERT_NE(r->body.find("Contacts"), std::string::npos) << i;
    }
  }
}

TEST_F(Http, ARequestSentAByteAtATimeIsServed) {
  HttpConnection c(port());
  for (char ch : http_get("/hello.txt")) c.send(std::string(1, ch));
  const auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello from the root\n");
}

TEST_F(Http, ConnectionCloseAndHttp10) {
  {
    HttpConnection c(port());
    c.send(http_get("/hello.txt", "Connection: close\r\n"));
    const auto r = c.read_response();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->header("connection"), "close");
    EXPECT_TRUE(c.closed_by_peer(5));
  }
  {
    HttpConnection c(port());
    c.send("GET /hello.txt HTTP/1.0\r\n\r\n");
    const auto r = c.read_response();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->header("connection"), "close");
    EXPECT_TRUE(c.closed_by_peer(5));
  }
  {
    HttpConnection c(port());
    c.send("GET /hello.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    const auto r = c.read_response();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->header("connection"), "keep-alive");
    c.send("GET /hello.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    EXPECT_TRUE(c.read_response());
  }
}

struct BadCase {
  const char* name;
  std::string request;
  int status;
};

// Each malformed or hostile request gets its status and the connection closes;
// a well-behaved client on the side goes on being served.
TEST_F(Http, BadAndHostileRequestsGetTheirStatusAndOthersAreServed) {
  const std::string long_uri = "/" + std::string(2000, 'a');
  const std::vector<BadCase> cases = {
      {"no method", " / HTTP/1.1\r\nHost: x\r\n\r\n", 400},
      {"bad request line", "GET /\r\nHost: x\r\n\r\n", 400},
      {"NUL in a field", std::string("GET / HTTP/1.1\r\nHost: x\r\nX: a\0b\r\n\r\n", 36), 400},
      {"bare CR in a field", "GET / HTTP/1.1\r\nHost: x\r\nX: a\rb\r\n\r\n", 400},
      {"obs-fold", "GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n", 400},
      {"space before colon", "GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400},
      {"no Host in 1.1", "GET / HTTP/1.1\r\n\r\n", 400},
      {"two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
      {"bad Content-Length", "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n", 400},
      {"negative Content-Length", "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400},
      {"CL and TE", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
      {"duplicate CL", "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nab", 400},
      {"differing CL", "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400},
      {"obfuscated TE", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n", 400},
      {"TE with a space", "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n", 400},
      {"TE in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
      {"URI too long", "GET " + long_uri + " HTTP/1.1\r\nHost: x\r\n\r\n", 414},
      {"head too large", "GET / HTTP/1.1\r\nHost: x\r\nX: " + std::string(5000, 'b') + "\r\n\r\n", 431},
      {"body too large", "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n", 413},
      {"unknown method", "BREW / HTTP/1.1\r\nHost: x\r\n\r\n", 501},
      {"HTTP/2.0", "GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505},
      {"traversal", "GET /../../etc/passwd HTTP/1.1\r\nHost: x\r\n\r\n", 400},
      {"encoded traversal", "GET /%2e%2e%2f%2e%2e%2fetc/passwd HTTP/1.1\r\nHost: x\r\n\r\n", 400},
      {"encoded NUL", "GET /hello.txt%00.html HTTP/1.1\r\nHost: x\r\n\r\n", 400},
      {"bad escape", "GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n", 400},
      {"POST is not served", "POST /hello.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi", 404},
  };
  HttpConnection good(port());
  for (const auto& bad : cases) {
    HttpConnection c(port());
    c.send(bad.request);
    const auto r = c.read_response();
    ASSERT_TRUE(r) << bad.name << ": closed without a response";
    EXPECT_EQ(r->status, bad.status) << bad.name << ": " << r->body;
    EXPECT_EQ(r->header("connection"), "close") << bad.name;
    EXPECT_TRUE(c.closed_by_peer(5)) << bad.name;
    good.send(http_get("/hello.txt"));
    const auto g = good.read_response();
    ASSERT_TRUE(g) << "after " << bad.name;
    EXPECT_EQ(g->status, 200) << "after " << bad.name;
  }
}

TEST_F(Http, EdgesOfTheProtocol) {
  {  // a client that stops sending after its requests still gets every answer
    HttpConnection c(port());
    c.send(http_get("/hello.txt") + http_get("/sub/data.json"));
    c.shutdown_write();
    const auto a = c.read_response();
    const auto b = c.read_response();
    ASSERT_TRUE(a && b) << "answers to a half-closed connection";
    EXPECT_EQ(b->body, "{\"a\": 1}\n");
    EXPECT_TRUE(c.closed_by_peer(5));
  }
  {  // HEAD refused: the head of the error, no body
    HttpConnection c(port());
    c.send("HEAD /hello.txt HTTP/1.1\r\n\r\n");  // no Host
    const auto r = c.read_response(true);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400);
    EXPECT_FALSE(c.read_response(true, 5)) << "nothing after the head";
  }
  {  // an absolute-form target without a path is "/"
    HttpConnection c(port());
    c.send("GET http://localhost HTTP/1.1\r\nHost: localhost\r\n\r\n");
    const auto r = c.read_response();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "<h1>the root's own index</h1>\n");
  }
  {  // nothing follows a response that closes: not even a refusal of what came next
    HttpConnection c(port());
    c.send(http_get("/missing") + "BAD REQUEST LINE\r\n\r\n");
    const auto r = c.read_response();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 404);
    EXPECT_FALSE(c.read_response(false, 5)) << "no second response";
  }
}

TEST_F(Http, AChunkedBodyIsFramedAndAnEncodedPathIsDecoded) {
  HttpConnection c(port());
  c.send("GET /hello.txt HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n0\r\nT: v\r\n\r\n" +
         http_get("/sub/%64ata.json") + http_get("/sub/./x/../data.json"));
  for (const char* body : {"hello from the root\n", "{\"a\": 1}\n", "{\"a\": 1}\n"}) {
    const auto r = c.read_response();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, body);
  }
}

TEST_F(Http, ASlowClientIsCutOffWithoutHoldingBackOthers) {
  HttpConnection slow(port());
  HttpConnection good(port());
  const auto start = std::chrono::steady_clock::now();
  bool cut = false;
  for (int i = 0; i < 40 && !cut; ++i) {  // one byte every 100 ms: never a whole head
    try {
      slow.send("G");
    } catch (const std::exception&) {
      cut = true;
    }
    good.send(http_get("/hello.txt"));
    const auto g = good.read_response(false, 2);
    ASSERT_TRUE(g);
    ASSERT_EQ(g->status, 200);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(3)) break;
  }
  const auto r = slow.read_response(false, 5);
  ASSERT_TRUE(r) << "the slow client gets an answer";
  EXPECT_EQ(r->status, 408);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4)) << "--header-timeout is 1 s";
}

TEST_F(Http, TwoHundredKeepAliveConnectionsAtOnce) {
  std::vector<HttpConnection> conns;
  for (int i = 0; i < 200; ++i) conns.emplace_back(port());
  for (int round = 0; round < 3; ++round) {
    for (auto& c : conns) c.send(http_get("/hello.txt"));
    for (auto& c : conns) {
      const auto r = c.read_response();
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 200);
    }
  }
}

TEST_F(Http, AClientThatClosesMidResponseLeavesTheServerServing) {
  for (int i = 0; i < 20; ++i) {
    HttpConnection c(port());
    c.send(http_get("/big.bin") + http_get("/big.bin"));
    c.close();  // before reading 600 KiB of responses
  }
  HttpConnection c(port());
  c.send(http_get("/big.bin"));
  const auto r = c.read_response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, site_->big());
}

TEST_F(Http, HealthAndMetrics) {
  HttpConnection c(port());
  c.send(http_get("/health") + http_get("/metrics") + http_get("/inference?d=hello"));
  const auto health = c.read_response();
  const auto metrics = c.read_response();
  const auto inference = c.read_response();
  ASSERT_TRUE(health && metrics && inference);
  EXPECT_EQ(health->body, "ok\n");
  EXPECT_EQ(metrics->header("content-type"), "text/plain; version=0.0.4");
  EXPECT_TRUE(std::regex_search(metrics->body, std::regex(R"(ferry_http_responses_total\{code="200"\} [1-9])")))
      << metrics->body;
  EXPECT_TRUE(std::regex_search(metrics->body, std::regex(R"(ferry_http_open_connections [1-9])"))) << metrics->body;
  EXPECT_EQ(inference->status, 503);
  EXPECT_EQ(inference->header("content-type"), "application/json");
}

// Limits of its own server: an idle timeout and a connection limit.
TEST(HttpLimits, IdleConnectionsCloseAndConnectionsBeyondTheLimitGet503) {
  FerryHttp server({"--idle-timeout", "1", "--max-connections-per-thread", "2"});
  HttpConnection a(server.port()), b(server.port());
  a.send(http_get("/index.html"));
  b.send(http_get("/index.html"));
  ASSERT_TRUE(a.read_response());
  ASSERT_TRUE(b.read_response());
  HttpConnection extra(server.port());
  const auto r = extra.read_response();
  ASSERT_TRUE(r) << server.log();
  EXPECT_EQ(r->status, 503);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(a.closed_by_peer(5)) << "idle for --idle-timeout 1 s";
  EXPECT_GT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));
}

// A cgroup (v2) with memory.max, for a server that must live within it: a
// child of the nearest of this process's cgroup and its ancestors that hands
// the memory controller to its children. make() says why when there is none
// (no cgroup v2, or a container that keeps the controller from its processes).
class MemoryCgroup {
 public:
  static std::optional<MemoryCgroup> make(std::uint64_t max_bytes, std::string* why) {
    std::string mount;
    {
      std::ifstream mounts("/proc/self/mounts");
      std::string dev, dir, type, rest;
      while (mounts >> dev >> dir >> type && std::getline(mounts, rest))
        if (type == "cgroup2") mount = dir;
    }
    if (mount.empty()) return fail(why, "no cgroup v2 hierarchy is mounted");
    std::string own;
    {
      std::ifstream self("/proc/self/cgroup");
      std::string line;
      while (std::getline(self, line))
        if (line.rfind("0::", 0) == 0) own = line.substr(3);
    }
    fs::path parent;
    for (std::string at = own;; at = at.substr(0, at.rfind('/'))) {  // "/a/b", "/a", "": the root
      if (read(mount + at + "/cgroup.subtree_control").find("memory") != std::string::npos) {
        parent = mount + at;
        break;
      }
      if (at.empty() || at == "/") break;
    }
    if (parent.empty())
      return fail(why, "no cgroup from " + own + " up to " + mount + " gives its children the memory controller");
    MemoryCgroup g;
    g.dir_ = parent / ("ferry-http-test-" + std::to_string(getpid()));
    std::error_code ec;
    fs::create_directory(g.dir_, ec);
    if (ec) return fail(why, "cannot create " + g.dir_.string() + ": " + ec.message());
    if (!write(g.dir_ / "memory.max", std::to_string(max_bytes)))
      return fail(why, "cannot set " + (g.dir_ / "memory.max").string());
    write(g.dir_ / "memory.swap.max", "0");  // absent without swap accounting: then there is no swap to use
    return g;
  }
  MemoryCgroup(MemoryCgroup&& o) noexcept : dir_(std::move(o.dir_)) { o.dir_.clear(); }
  ~MemoryCgroup() {
    if (dir_.empty()) return;
    // Its process has been killed by now; rmdir fails while one is still in it.
    for (int i = 0; i < 100 && ::rmdir(dir_.c_str()) != 0 && errno == EBUSY; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const fs::path& dir() const { return dir_; }
  bool add(pid_t pid) const { return write(dir_ / "cgroup.procs", std::to_string(pid)); }
  std::uint64_t oom_kills() const {
    std::istringstream events(read(dir_ / "memory.events"));
    std::string key;
    std::uint64_t value = 0;
    while (events >> key >> value)
      if (key == "oom_kill") return value;
    return 0;
  }

 private:
  MemoryCgroup() = default;
  static std::optional<MemoryCgroup> fail(std::string* why, const std::string& reason) {
    *why = reason;
    return std::nullopt;
  }
  static std::string read(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static bool write(const fs::path& p, const std::string& value) {
    std::ofstream out(p);
    out << value;
    out.flush();
    return static_cast<bool>(out);
  }
  fs::path dir_;
};

// Reads one whole response from fd (a 200 with Content-Length) and returns its body.
std::string read_whole_response(int fd) {
  std::string buf;
  std::size_t body_at = std::string::npos, length = 0;
  char tmp[65536];
  for (;;) {
    if (body_at == std::string::npos && (body_at = buf.find("\r\n\r\n")) != std::string::npos) {
      body_at += 4;
      const std::size_t cl = buf.find("Content-Length: ");
      if (cl == std::string::npos || cl > body_at) return {};
      length = std::stoull(buf.substr(cl + 16));
    }
    if (body_at != std::string::npos && buf.size() >= body_at + length) return buf.substr(body_at, length);
    pollfd pf{fd, POLLIN, 0};
    if (poll(&pf, 1, 10000) <= 0) return {};
    const ssize_t r = ::recv(fd, tmp, sizeof(tmp), 0);
    if (r <= 0) return {};
    buf.append(tmp, static_cast<std::size_t>(r));
  }
}

// True once every fd has bytes to read (the server has begun each one's response), within timeout_s.
bool all_readable(const std::vector<int>& fds, double timeout_s) {
  std::vector<pollfd> pfds;
  for (int fd : fds) pfds.push_back({fd, POLLIN, 0});
  return wait_until(
      [&] {
        ::poll(pfds.data(), pfds.size(), 0);
        for (const pollfd& p : pfds)
          if ((p.revents & POLLIN) == 0) return false;
        return true;
      },
      timeout_s);
}

// The slow readers, and the test's --root, removed however the test ends.
struct SlowReaders {
  fs::path dir;
  std::vector<RawClient> clients;
  std::vector<int> fds() const {
    std::vector<int> out;
    for (const RawClient& c : clients) out.push_back(c.fd());
    return out;
  }
  ~SlowReaders() { fs::remove_all(dir); }
};

// Hundreds of clients ask for a large page and read none of it. Each page is
// sent from the one copy in the page store, so a connection costs the server
// its socket buffer and a cursor, not a copy of the page: its memory stays
// within a bound that does not grow with the page, and it goes on serving
// others. Where a cgroup v2 memory controller can be delegated, the server
// also runs in a memory cgroup smaller than the copies would need.
TEST(HttpMemory, SlowReadersOfALargePageShareOneCopyAndOthersAreServed) {
  constexpr int kReaders = 300;
  constexpr std::size_t kPage = std::size_t{8} << 20;
  // Per slow reader, besides its socket buffer (kernel memory): its
  // connection's state and the few pages of buffers its request and its
  // response's head touch.
  constexpr std::uint64_t kPerReaderKib = 64;
  // The channel's slots, which requests touch as they go round its rings, and allocator arenas.
  constexpr std::uint64_t kSlackKib = 48 * 1024;

  SlowReaders readers;
  readers.dir = fs::temp_directory_path() / ("ferry-http-memory-" + std::to_string(getpid()));
  const fs::path& dir = readers.dir;
  fs::create_directories(dir);
  std::string page(kPage, '\0');
  for (std::size_t i = 0; i < page.size(); ++i) page[i] = static_cast<char>('a' + (i * 7 + i / 4099) % 26);
  std::ofstream(dir / "large.bin", std::ios::binary) << page;
  std::ofstream(dir / "small.txt") << "small\n";

  std::string no_cgroup;
  // What the server allocates once moved in, and the slow readers' socket
  // buffers: far below kReaders copies of the page, far above what the server
  // needs. Made before the server, so that it is removed after the server is gone.
  const auto cgroup = MemoryCgroup::make(std::uint64_t{384} << 20, &no_cgroup);
  FerryHttp server({"--root", dir.string()});
  const pid_t pid = server.process().pid();
  if (cgroup) {
    ASSERT_TRUE(cgroup->add(pid)) << "cannot move the server into its memory cgroup";
    std::cerr << "the server runs in " << cgroup->dir() << ", memory.max 384 MiB\n";
  } else {
    std::cerr << "[ SKIPPED  ] the memory-cgroup part: " << no_cgroup << "; the RSS bound is still checked\n";
    ::testing::Test::RecordProperty("memory_cgroup", "skipped: " + no_cgroup);
  }

  const std::uint64_t base_kib = rss_kib(pid);
  std::uint64_t rss = 0;
  // In steps, each checked, so a server that copies pages fails before it takes the machine's memory.
  for (int step = 0; step < kReaders / 50; ++step) {
    for (int i = 0; i < 50; ++i) {
      readers.clients.push_back(RawClient::slow_reader(server.port()));
      readers.clients.back().send_bytes(http_get("/large.bin"));
    }
    // A reader whose server has died is readable too (its end of file).
    ASSERT_TRUE(all_readable(readers.fds(), 20)) << "the server did not answer " << readers.clients.size()
                                                 << " slow readers";
    const std::optional<int> exited = server.process().wait(0);
    ASSERT_FALSE(exited) << "the server died (exit status " << exited.value_or(0) << ") with "
                         << readers.clients.size() << " slow readers"
                         << (cgroup ? ", OOM kills in its memory cgroup: " + std::to_string(cgroup->oom_kills()) : "");
    rss = rss_kib(pid);
    const std::uint64_t bound = base_kib + readers.clients.size() * kPerReaderKib + kSlackKib;
    ASSERT_LE(rss, bound) << "RSS " << rss << " KiB with " << readers.clients.size() << " slow readers of an "
                          << (kPage >> 20) << " MiB page (" << base_kib << " KiB before)";

    // Others are served meanwhile: a small page, and the large one read whole.
    HttpConnection good(server.port());
    good.send(http_get("/small.txt") + http_get("/large.bin"));
    const auto small = good.read_response(false, 5);
    ASSERT_TRUE(small);
    EXPECT_EQ(small->body, "small\n");
    const auto large = good.read_response(false, 10);
    ASSERT_TRUE(large);
    ASSERT_TRUE(large->body == page) << "the large page came back different";
  }
  std::cerr << "server RSS: " << base_kib << " KiB before, " << rss << " KiB with " << readers.clients.size()
            << " slow readers of an " << (kPage >> 20) << " MiB page\n";
  if (cgroup) {
    EXPECT_EQ(cgroup->oom_kills(), 0u);
  }

  // The slow readers' cursors still stand where they stopped: each gets the whole page.
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(read_whole_response(readers.clients[i * 100].fd()) == page) << "reader " << i * 100;
}

}  // namespace
}  // namespace ferry::test
