// `ferry http` end to end, at the edges of its logging and limits: the access
// log reaches its file within a second and at exit, and a chunked body is
// measured by its data while its framing has a bound of its own. Part of
// http_e2e_test (one binary, run per backend under test).

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "support/ferry_processes.h"
#include "support/http_client.h"

namespace ferry::test {
namespace {

namespace fs = std::filesystem;

// The access log is in its file within a second of the last response, with no
// traffic after it, and whole once SIGTERM has stopped the server.
TEST(HttpAccessLog, LinesReachTheFileWithinASecondWithoutTrafficAndAllAtSigterm) {
  const fs::path path = fs::temp_directory_path() / ("ferry-http-access-" + std::to_string(getpid()) + ".log");
  fs::remove(path);
  FerryHttp server({"--access-log", path.string()});
  const auto lines = [&] {
    std::ifstream in(path);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return std::count(all.begin(), all.end(), '\n');
  };
  const auto serve = [&](int n) {
    HttpConnection c(server.port());
    for (int i = 0; i < n; ++i) {
      c.send(http_get("/index.html"));
      const auto r = c.read_response();
      ASSERT_TRUE(r);
      ASSERT_EQ(r->status, 200);
    }
  };
  serve(12);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(lines(), 12) << "1.5 s after the last response, with no traffic since";
  serve(12);
  server.process().signal(SIGTERM);
  const auto code = server.process().wait(30);
  ASSERT_TRUE(code) << server.log();
  EXPECT_EQ(*code, 0) << server.log();
  EXPECT_EQ(lines(), 24) << "every line at exit";
  fs::remove(path);
}

// A chunked body counts its data against --max-body, and its framing (size
// lines, extensions, trailers) against a bound of its own.
TEST(HttpLimits, AChunkedBodyIsMeasuredByItsDataAndItsFramingHasItsOwnBound) {
  std::string body;
  for (int i = 0; i < 20 * 1024; ++i) body += "1\r\nx\r\n";
  body += "0\r\n\r\n";
  const std::string request = "GET /index.html HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + body;
  FerryHttp server;  // --max-body 64KiB
  HttpConnection c(server.port());
  c.send(request);
  const auto r = c.read_response();
  ASSERT_TRUE(r) << server.log();
  EXPECT_EQ(r->status, 200) << "20 KiB of data in 1-byte chunks is within --max-body 64KiB: " << r->body;

  FerryHttp tight({"--max-chunk-framing", "64KiB"});
  HttpConnection t(tight.port());
  t.send(request);
  const auto refused = t.read_response();
  ASSERT_TRUE(refused) << tight.log();
  EXPECT_EQ(refused->status, 413);
  EXPECT_NE(refused->body.find("framing"), std::string::npos) << refused->body;
  EXPECT_NE(refused->body.find("send larger chunks"), std::string::npos) << refused->body;
}

}  // namespace
}  // namespace ferry::test
