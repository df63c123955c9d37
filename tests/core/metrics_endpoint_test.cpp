// The metrics endpoint (src/core/metrics_endpoint.h) over real sockets, its
// request-head parser, and the Prometheus writer (src/core/prometheus.h) as
// read back by a strict parser of the format.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "core/metrics_endpoint.h"
#include "core/prometheus.h"
#include "support/http_client.h"
#include "support/prometheus_text.h"

namespace ferry {
namespace {

TEST(MetricsRequest, TakesGetAndHeadOfTheTwoPathsOnly) {
  EXPECT_EQ(parse_metrics_request("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").status, 200);
  EXPECT_TRUE(parse_metrics_request("GET /metrics?x=1 HTTP/1.0\r\n\r\n").metrics);
  const MetricsRequest health = parse_metrics_request("HEAD /health HTTP/1.1\r\n\r\n");
  EXPECT_EQ(health.status, 200);
  EXPECT_TRUE(health.head);
  EXPECT_FALSE(health.metrics);
  EXPECT_EQ(parse_metrics_request("GET /other HTTP/1.1\r\n\r\n").status, 404);
  EXPECT_EQ(parse_metrics_request("POST /metrics HTTP/1.1\r\n\r\n").status, 405);
  for (const char* bad : {"", "\r\n\r\n", "GET /metrics\r\n\r\n", "GET  /metrics HTTP/1.1\r\n\r\n",
                          "GET metrics HTTP/1.1\r\n\r\n", "GET /metrics HTTP/2\r\n\r\n",
                          "GET /metrics HTTP/1.1\r\nno colon\r\n\r\n", "GET /metrics HTTP/1.1\r\n: x\r\n\r\n",
                          "GET /met\x01rics HTTP/1.1\r\n\r\n", "GET /metrics HTTP/1.1\r\nA: b\x7f\r\n\r\n",
                          "G\"T /metrics HTTP/1.1\r\n\r\n", "GET /metrics HTTP/1.1\r\n"})
    EXPECT_EQ(parse_metrics_request(bad).status, 400) << bad;
}

TEST(PrometheusWriter, WritesWhatAStrictParserReads) {
  prom::TextWriter w;
  w.counter("c_total", "A counter\nwith a \\ in its help.", 7);
  w.family("g", "gauge", "Labelled.");
  w.sample("g", {{"a", "x\"y\\z\nw"}, {"b", "2"}}, 1.5);
  w.family("h_seconds", "histogram", "A histogram.");
  prom::DurationHistogram h;
  h.record(500);             // 0.5 us: the first bucket
  h.record(3'000'000);       // 3 ms
  h.record(60'000'000'000);  // a minute: +Inf
  h.write(w, "h_seconds", {{"stage", "s"}});
  const test::PrometheusText t = test::parse_prometheus(w.text());
  EXPECT_EQ(t.at("c_total"), 7);
  EXPECT_EQ(t.at("g{a=\"x\\\"y\\\\z\\nw\",b=\"2\"}"), 1.5);
  EXPECT_EQ(t.at("h_seconds_bucket{stage=\"s\",le=\"1e-06\"}"), 1);
  EXPECT_EQ(t.at("h_seconds_bucket{stage=\"s\",le=\"0.005\"}"), 2);
  EXPECT_EQ(t.at("h_seconds_bucket{stage=\"s\",le=\"10\"}"), 2);
  EXPECT_EQ(t.at("h_seconds_bucket{stage=\"s\",le=\"+Inf\"}"), 3);
  EXPECT_EQ(t.at("h_seconds_count{stage=\"s\"}"), 3);
  EXPECT_NEAR(t.at("h_seconds_sum{stage=\"s\"}"), 60.0030005, 1e-6);
  EXPECT_EQ(h.count(), 3u);
}

TEST(PrometheusParser, RefusesWhatPrometheusWould) {
  for (const char* bad : {"x 1\n", "# TYPE x counter\nx{a=\"1} 1\n", "# TYPE x counter\nx one\n",
                          "# TYPE x counter\n# TYPE x counter\n", "# TYPE x counter\nx 1",
                          "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n",
                          "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 1\n"})
    EXPECT_THROW(test::parse_prometheus(bad), std::runtime_error) << bad;
}

class Endpoint : public ::testing::Test {
 protected:
  std::atomic<int> renders{0};
  MetricsEndpoint endpoint{"127.0.0.1", 0,
                           [this] {
                             prom::TextWriter w;
                             w.counter("renders_total", "Times rendered.", ++renders);
                             return w.take();
                           },
                           std::chrono::milliseconds(300)};
};

TEST_F(Endpoint, AnswersMetricsAndHealth) {
  ASSERT_NE(endpoint.port(), 0);
  const test::Scrape m = test::scrape(endpoint.port());
  EXPECT_EQ(m.status, 200);
  EXPECT_EQ(m.content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(test::parse_prometheus(m.body).at("renders_total"), 1);
  const test::Scrape h = test::scrape(endpoint.port(), "/health");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.body, "ok\n");
  EXPECT_EQ(test::scrape(endpoint.port(), "/nothing").status, 404);
  EXPECT_EQ(endpoint.requests(), 3u);
}

TEST_F(Endpoint, AnswersMalformedRequestsWith400AndKeepsServing) {
  for (const std::string& bad :
       {std::string("GARBAGE\r\n\r\n"), std::string("GET /metrics HTTP/1.1\r\nX\r\n\r\n"),
        std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 15)}) {
    test::HttpConnection c(endpoint.port());
    c.send(bad);
    const auto r = c.read_response();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400);
    EXPECT_TRUE(c.closed_by_peer(2));
  }
  {
    test::HttpConnection c(endpoint.port());
    c.send("POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    EXPECT_EQ(c.read_response()->status, 405);
  }
  {
    // A head that never ends gets 431 once it outgrows the limit.
    test::HttpConnection c(endpoint.port());
    c.send("GET /metrics HTTP/1.1\r\nX: " + std::string(MetricsEndpoint::kMaxHead, 'a'));
    EXPECT_EQ(c.read_response()->status, 431);
  }
  EXPECT_EQ(test::scrape(endpoint.port()).status, 200);
  EXPECT_EQ(renders.load(), 1);
}

TEST_F(Endpoint, ClosesIdleClientsAndServesOthersMeanwhile) {
  std::vector<test::HttpConnection> idle;
  for (std::size_t i = 0; i < MetricsEndpoint::kMaxClients; ++i) idle.emplace_back(endpoint.port());
  test::HttpConnection half(endpoint.port());
  half.send("GET /metr");
  // Every slot is held by a silent client: they go after the idle timeout, and
  // then the waiting ones are served.
  for (auto& c : idle) EXPECT_TRUE(c.closed_by_peer(3));
  EXPECT_TRUE(half.closed_by_peer(3));
  EXPECT_EQ(test::scrape(endpoint.port()).status, 200);
}

TEST_F(Endpoint, ATrickledHeadGainsNoTime) {
  test::HttpConnection slow(endpoint.port());
  const auto begun = std::chrono::steady_clock::now();
  // A byte every 100 ms would keep a timer that counted from the last byte at
  // bay forever; the head's deadline counts from the connection.
  bool closed = false;
  for (const char c : std::string("GET /metrics HTTP/1.1\r\nX-Slow: " + std::string(20, 'a'))) {
    try {
      slow.send(std::string(1, c));
    } catch (const std::exception&) {
      closed = true;
      break;
    }
    if ((closed = slow.closed_by_peer(0.1))) break;
  }
  EXPECT_TRUE(closed);
  EXPECT_LT(std::chrono::steady_clock::now() - begun, std::chrono::seconds(2));
}

}  // namespace
}  // namespace ferry
