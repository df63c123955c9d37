// The batch deadline end to end: `ferry http`'s server hosted in this process
// (as an application embeds it) with CPU workers and a model whose call
// sticks until the test lets it go, over real sockets. A stuck batch is a
// fault clients see: 503 in TEI's shape for its request and for new ones,
// /health 503 with the reason, the metrics; static pages, /info and /metrics
// still answer; and all is well again once the call returns.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "ferry/http/server.h"
#include "ferry/infer/service.h"
#include "infer/service/gated_model.h"
#include "support/ferry_processes.h"
#include "support/http_client.h"

namespace ferry::test {
namespace {

using infer::test::GatedModel;
using nlohmann::json;

infer::WordPieceTokenizer tiny_tokenizer() {
  const std::string path = testing::TempDir() + "/watchdog-test-vocab.txt";
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n", f);
  std::fclose(f);
  return infer::WordPieceTokenizer::load(path);
}

HttpResponse ask(std::uint16_t port, const std::string& request, bool head_only = false) {
  HttpConnection c(port, 30);
  c.send(request);
  auto r = c.read_response(head_only, 30);
  if (!r) throw std::runtime_error("connection closed without a response");
  return *r;
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

TEST(EmbedWatchdog, AStuckBatchIsA503ThatHealthAndMetricsReportUntilItReturns) {
  auto model_owned = std::make_unique<GatedModel>();
  GatedModel* model = model_owned.get();
  infer::ServiceOptions so;
  so.batch_timeout = std::chrono::milliseconds(300);
  auto service = std::make_shared<infer::EmbeddingService>(std::move(model_owned), tiny_tokenizer(), so);
  http::HttpOptions o;
  o.listen_address = "127.0.0.1";
  o.port = 0;
  o.cpus = {0};
  o.pin_threads = false;
  o.embedding = service;
  http::HttpServer server(o);
  server.start();
  const std::uint16_t port = server.port();

  const HttpResponse healthy = ask(port, http_get("/health"));
  EXPECT_EQ(healthy.status, 200);
  EXPECT_EQ(healthy.body, "ok\n");

  model->hold();
  auto t0 = std::chrono::steady_clock::now();
  const HttpResponse stuck = ask(port, json_post("/embed", R"({"inputs": "hello"})"));
  const double waited = seconds_since(t0);
  EXPECT_EQ(stuck.status, 503) << stuck.body;
  EXPECT_EQ(json::parse(stuck.body)["error_type"], "Unhealthy");
  EXPECT_NE(stuck.body.find("ServiceOptions::batch_timeout"), std::string::npos) << stuck.body;
  EXPECT_GE(waited, 0.25);
  EXPECT_LT(waited, 3.0);

  // While the call is stuck: new requests fail at once, /health says why.
  t0 = std::chrono::steady_clock::now();
  const HttpResponse refused = ask(port, json_post("/v1/embeddings", R"({"input": "hello"})"));
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_EQ(json::parse(refused.body)["error_type"], "Unhealthy");
  EXPECT_LT(seconds_since(t0), 1.0);
  const HttpResponse health = ask(port, http_get("/health"));
  EXPECT_EQ(health.status, 503);
  EXPECT_EQ(health.header("content-type"), "application/json");
  const json why = json::parse(health.body);
  EXPECT_EQ(why["error_type"], "Unhealthy");
  EXPECT_NE(why["error"].get<std::string>().find("a batch of 1 inputs (3 tokens)"), std::string::npos) << why;
  EXPECT_EQ(ask(port, http_get("/health", "", "HEAD"), true).status, 503);
  // The rest of the server serves on.
  EXPECT_EQ(ask(port, http_get("/info")).status, 200);
  EXPECT_EQ(ask(port, http_get("/")).status, 200);
  const std::string m = ask(port, http_get("/metrics")).body;
  for (const char* line : {"ferry_embed_batch_stuck 1\n", "ferry_embed_batch_timeouts_total 1\n",
                           "ferry_embed_unhealthy_total 2\n", "ferry_http_responses_total{code=\"503\"}"})
    EXPECT_NE(m.find(line), std::string::npos) << line;

  model->release();
  ASSERT_TRUE(wait_until([&] { return ask(port, http_get("/health")).status == 200; }, 10));
  const HttpResponse after = ask(port, json_post("/embed", R"({"inputs": "hello", "normalize": false})"));
  EXPECT_EQ(after.status, 200) << after.body;
  EXPECT_EQ(json::parse(after.body)[0][0], 2.0 + 4.0 + 3.0);  // [CLS] hello [SEP]
  EXPECT_NE(ask(port, http_get("/metrics")).body.find("ferry_embed_batch_stuck 0\n"), std::string::npos);
  server.stop();
  EXPECT_EQ(server.wait(), 0);
}

}  // namespace
}  // namespace ferry::test
