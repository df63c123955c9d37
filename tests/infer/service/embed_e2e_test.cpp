// The embedding APIs end to end: the real `ferry http --model` serving
// all-MiniLM-L6-v2 over real sockets to curl and raw clients, checked against
// sentence-transformers' vectors. --backend=cpu runs the model on the CPU
// (CI); --backend=cuda runs it, and the HTTP workers, on the GPU.

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "support/ferry_processes.h"
#include "support/http_client.h"
#include "reference_vectors.h"

namespace ferry::test {
namespace {

using infer::test::cosine;
using infer::test::load_reference;
using infer::test::model_dir;
using infer::test::Reference;
using nlohmann::json;

const Reference& reference() {
  static const Reference r = load_reference();
  return r;
}

bool cuda() { return backend_under_test().backend == "cuda"; }

// The least cosine a vector may have to sentence-transformers' (the issue's bar).
double required_cosine() { return cuda() ? 0.999 : 0.9999; }

double norm(std::span<const float> v) {
  double s = 0;
  for (float x : v) s += double(x) * x;
  return std::sqrt(s);
}

HttpResponse exchange(std::uint16_t port, const std::string& request) {
  HttpConnection c(port, 60);
  c.send(request);
  auto r = c.read_response(false, 60);
  if (!r) throw std::runtime_error("connection closed without a response");
  return *r;
}

std::vector<float> from_base64(const std::string& s) {
  static const std::string chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes;
  unsigned acc = 0;
  int bits = 0;
  for (char c : s) {
    if (c == '=') break;
    acc = (acc << 6) | static_cast<unsigned>(chars.find(c));
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

class EmbedE2E : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::ifstream(model_dir() + "/model.safetensors"))
      GTEST_FAIL() << "no model at " << model_dir() << ": run scripts/fetch-model.sh";
    server_ = new FerryHttp({"--model", model_dir(), "--max-wait-us", "200"});
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  std::uint16_t port() const { return server_->port(); }
  static FerryHttp* server_;
};
FerryHttp* EmbedE2E::server_ = nullptr;

TEST_F(EmbedE2E, GazsiQueryMatchesTheReference) {
  // "Café au lait, naïve façade, ..." percent-encoded, '+' for spaces.
  const Reference& ref = reference();
  std::size_t k = 0;
  while (ref.texts[k].rfind("Café", 0) != 0) ++k;
  std::string q;
  for (unsigned char c : ref.texts[k]) {
    char buf[4];
    if (c == ' ') {
      q += '+';
    } else if (std::isalnum(c)) {
      q += static_cast<char>(c);
    } else {
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      q += buf;
    }
  }
  const HttpResponse r = exchange(port(), http_get("/inference?d=" + q + "&full=1"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("content-type"), "application/json");
  EXPECT_FALSE(r.header("x-inference-time").empty());
  EXPECT_FALSE(r.header("x-total-time").empty());
  const json j = json::parse(r.body);
  EXPECT_EQ(j["input"], ref.texts[k]);
  EXPECT_EQ(j["embedding_sample"].size(), 8u);
  const std::vector<float> v = j["embedding"];
  ASSERT_EQ(v.size(), 384u);
  EXPECT_NEAR(norm(v), 1.0, 1e-5);
  EXPECT_GE(cosine(v, ref.vector(k)), required_cosine());
  EXPECT_GE(j["batch_size"].get<int>(), 1);
  EXPECT_GT(j["inference_time_us"].get<double>(), 0);
  const json& st = j["stages_us"];
  double last = 0;
  for (const char* name : {"t0_received", "t1_routed", "t2_tokenized", "t3_queued", "t4_batched", "t5_launched",
                           "t6_computed", "t7_delivered", "t8_built"}) {
    ASSERT_TRUE(st.contains(name)) << name;
    EXPECT_GE(st[name].get<double>(), last) << name;  // the stages are in order
    last = st[name];
  }
}

TEST_F(EmbedE2E, TeiBatchMatchesTheReferenceWithCurl) {
  const Reference& ref = reference();
  json body;
  body["inputs"] = std::vector<std::string>(ref.texts.begin(), ref.texts.begin() + 32);
  const std::string file = testing::TempDir() + "/embed-body.json";
  std::ofstream(file) << body.dump();
  std::string out;
  std::string cmd = "curl -sS -H 'Content-Type: application/json' --data-binary @" + file +
                    " http://127.0.0.1:" + std::to_string(port()) + "/embed";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[65536];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  ASSERT_EQ(pclose(p), 0);
  const json j = json::parse(out);
  ASSERT_TRUE(j.is_array()) << out.substr(0, 300);
  ASSERT_EQ(j.size(), 32u);
  double least = 1;
  for (std::size_t i = 0; i < 32; ++i) least = std::min(least, cosine(j[i].get<std::vector<float>>(), ref.vector(i)));
  std::printf("least cosine to sentence-transformers over 32 inputs: %.7f\n", least);
  EXPECT_GE(least, required_cosine());
}

TEST_F(EmbedE2E, TeiOptions) {
  HttpResponse r = exchange(port(), json_post("/embed", R"({"inputs":"Hello world","normalize":false})"));
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<float> raw = json::parse(r.body)[0];
  EXPECT_GT(std::abs(norm(raw) - 1.0), 1e-3);  // mean-pooled, not normalised
  r = exchange(port(), json_post("/embed", R"({"inputs":["Hello world"],"dimensions":64})"));
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<float> cut = json::parse(r.body)[0];
  EXPECT_EQ(cut.size(), 64u);
  EXPECT_NEAR(norm(cut), 1.0, 1e-5);
  // Too long without truncate: TEI's 413; with it, served.
  std::string longer;
  for (int i = 0; i < 300; ++i) longer += "word ";
  r = exchange(port(), json_post("/embed", json{{"inputs", longer}}.dump()));
  EXPECT_EQ(r.status, 413) << r.body;
  EXPECT_EQ(json::parse(r.body)["error_type"], "Validation");
  r = exchange(port(), json_post("/embed", json{{"inputs", longer}, {"truncate", true}}.dump()));
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST_F(EmbedE2E, OpenAiFloatAndBase64Agree) {
  HttpResponse f = exchange(port(), json_post("/v1/embeddings", R"({"input":["Hello world","GPU"],"model":"m"})"));
  ASSERT_EQ(f.status, 200) << f.body;
  const json jf = json::parse(f.body);
  EXPECT_EQ(jf["object"], "list");
  EXPECT_EQ(jf["model"], "m");
  ASSERT_EQ(jf["data"].size(), 2u);
  EXPECT_EQ(jf["data"][1]["index"], 1);
  // usage counts every id the model saw: as many as GAZSI's "tokens" says for each input.
  const int tokens = json::parse(exchange(port(), http_get("/inference?d=Hello+world")).body)["tokens"].get<int>() +
                     json::parse(exchange(port(), http_get("/inference?d=GPU")).body)["tokens"].get<int>();
  EXPECT_EQ(jf["usage"]["prompt_tokens"], tokens);
  EXPECT_EQ(jf["usage"]["total_tokens"], tokens);
  HttpResponse b = exchange(port(),
                            json_post("/v1/embeddings", R"({"input":["Hello world","GPU"],"encoding_format":"base64"})"));
  ASSERT_EQ(b.status, 200) << b.body;
  const json jb = json::parse(b.body);
  for (int i = 0; i < 2; ++i) {
    const std::vector<float> a = jf["data"][i]["embedding"];
    const std::vector<float> c = from_base64(jb["data"][i]["embedding"]);
    ASSERT_EQ(c.size(), a.size());
    EXPECT_GE(cosine(a, c), 0.999999);
  }
}

TEST_F(EmbedE2E, BadInputGetsAJsonReason) {
  struct Case {
    std::string request;
    int status;
  };
  const Case cases[] = {
      {http_get("/inference?d="), 400},
      {http_get("/inference?d=%FF%FE"), 400},          // not UTF-8
      {http_get("/inference?d=%G1"), 400},             // bad escape
      {http_get("/inference?x=1"), 400},               // no d
      {json_post("/embed", "{\"inputs\": [}"), 422},        // not JSON
      {json_post("/embed", "{\"inputs\": []}"), 400},       // empty
      {json_post("/embed", "{\"inputs\": 5}"), 422},        // wrong type
      {json_post("/embed", "{\"inputs\": \"\\ud800\"}"), 422},  // lone surrogate
      {json_post("/v1/embeddings", "{\"input\": [1, 2, 3]}"), 422},  // token ids
      {json_post("/v1/embeddings", "{\"input\": \"a\", \"encoding_format\": \"hex\"}"), 422},
      {json_post("/embed", json{{"inputs", std::vector<std::string>(33, "a")}}.dump()), 413},
      {json_post("/embed", "{\"inputs\": \"a\", \"dimensions\": 1000}"), 422},
  };
  for (const Case& c : cases) {
    const HttpResponse r = exchange(port(), c.request);
    EXPECT_EQ(r.status, c.status) << c.request << "\n" << r.body;
    const json j = json::parse(r.body, nullptr, false);
    EXPECT_TRUE(j.is_object() && j.contains("error") && j.contains("error_type")) << r.body;
  }
  EXPECT_EQ(exchange(port(), http_get("/embed")).status, 405);
  EXPECT_EQ(exchange(port(), json_post("/inference", "{}")).status, 405);
}

TEST_F(EmbedE2E, ChunkedBodyAndPipeliningKeepOrder) {
  HttpConnection c(port(), 60);
  const std::string chunked =
      "POST /embed HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
      "9\r\n{\"inputs\"\r\n7;ext=1\r\n:\"GPU\"}\r\n0\r\n\r\n";
  // A page, an embedding, a page, an embedding: the responses come back in that order.
  c.send(http_get("/index.html") + chunked + http_get("/health") + http_get("/inference?d=hi"));
  auto r1 = c.read_response(false, 60);
  auto r2 = c.read_response(false, 60);
  auto r3 = c.read_response(false, 60);
  auto r4 = c.read_response(false, 60);
  ASSERT_TRUE(r1 && r2 && r3 && r4);
  EXPECT_EQ(r1->header("content-type"), "text/html");
  EXPECT_EQ(r2->status, 200) << r2->body;
  EXPECT_EQ(json::parse(r2->body).size(), 1u);
  EXPECT_EQ(r3->body, "ok\n");
  EXPECT_EQ(json::parse(r4->body)["input"], "hi");
}

TEST_F(EmbedE2E, InfoHealthAndMetrics) {
  const json info = json::parse(exchange(port(), http_get("/info")).body);
  EXPECT_EQ(info["dims"], 384);
  EXPECT_EQ(info["max_input_length"], 256);
  // The model's name is its folder's.
  EXPECT_EQ(info["model_id"], std::filesystem::path(model_dir()).filename().string());
  EXPECT_EQ(info["pooling"], "mean");  // all-MiniLM-L6-v2's 1_Pooling/config.json
  EXPECT_EQ(info["batch_timeout_ms"], 5000);  // --batch-timeout's default
  if (!cuda()) {
    EXPECT_EQ(info["device"].get<std::string>().rfind("cpu", 0), 0u) << info["device"];
  }
  EXPECT_EQ(exchange(port(), http_get("/inference?d=metrics")).status, 200);
  const std::string m = exchange(port(), http_get("/metrics")).body;
  for (const char* name : {"ferry_embed_duration_seconds_bucket{stage=\"inference\"", "ferry_embed_queue_size",
                           "ferry_embed_batch_size_bucket", "ferry_embed_input_tokens_total",
                           "ferry_http_responses_total{code=\"429\"}"})
    EXPECT_NE(m.find(name), std::string::npos) << name;
}

// TEI's /tokenize and /decode: ids with the bytes they came from, and back.
TEST_F(EmbedE2E, TokenizeAndDecode) {
  HttpResponse r = exchange(port(), json_post("/tokenize", R"({"inputs":"Café au lait!"})"));
  ASSERT_EQ(r.status, 200) << r.body;
  const json t = json::parse(r.body);
  ASSERT_EQ(t.size(), 1u);
  const json& tokens = t[0];
  ASSERT_GE(tokens.size(), 6u) << r.body;  // [CLS] cafe au (lait's pieces) ! [SEP]
  EXPECT_EQ(tokens[0], json::parse(R"({"id":101,"text":"[CLS]","special":true,"start":null,"stop":null})"));
  EXPECT_EQ(tokens[1]["text"], "Café");
  EXPECT_EQ(tokens[1]["special"], false);
  EXPECT_EQ(tokens[1]["start"], 0);
  EXPECT_EQ(tokens[1]["stop"], 5);
  EXPECT_EQ(tokens[2], json::parse(R"({"id":8740,"text":"au","special":false,"start":6,"stop":8})"));
  EXPECT_EQ(tokens[tokens.size() - 2], json::parse(R"({"id":999,"text":"!","special":false,"start":13,"stop":14})"));
  EXPECT_EQ(tokens.back()["id"], 102);
  std::vector<int> ids;
  for (const json& tok : tokens) ids.push_back(tok["id"]);

  r = exchange(port(), json_post("/tokenize", R"({"inputs":["a b","c"],"add_special_tokens":false})"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)[0].size(), 2u);
  EXPECT_EQ(json::parse(r.body)[1].size(), 1u);

  r = exchange(port(), json_post("/decode", json{{"ids", ids}}.dump()));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body), json::parse(R"(["cafe au lait!"])"));
  r = exchange(port(), json_post("/decode", json{{"ids", {ids, ids}}, {"skip_special_tokens", false}}.dump()));
  EXPECT_EQ(json::parse(r.body), json::parse(R"(["[CLS] cafe au lait! [SEP]","[CLS] cafe au lait! [SEP]"])"));

  for (const auto& [body, status] : std::vector<std::pair<std::string, int>>{
           {R"({"ids":[99999999]})", 422},  // outside the vocabulary
           {R"({"ids":[]})", 400},
           {R"({"ids":[-1]})", 422},
           {R"({"inputs":[]})", 400}}) {
    r = exchange(port(), json_post(body.find("ids") != std::string::npos ? "/decode" : "/tokenize", body));
    EXPECT_EQ(r.status, status) << body << " -> " << r.body;
    EXPECT_TRUE(json::parse(r.body).contains("error_type")) << r.body;
  }
  // Many inputs: an answer larger than a worker's reply slot still comes whole.
  r = exchange(port(), json_post("/tokenize", json{{"inputs", std::vector<std::string>(32, std::string(300, 'w') + " x")}}.dump()));
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body).size(), 32u);
}

// TEI's /embed_all: every token's state; their mean, normalised, is /embed's vector.
TEST_F(EmbedE2E, EmbedAllRowsAverageToTheEmbedVector) {
  HttpResponse r = exchange(port(), json_post("/embed_all", R"({"inputs":["Hello world","GPU servers batch"]})"));
  ASSERT_EQ(r.status, 200) << r.body.substr(0, 300);
  const json all = json::parse(r.body);
  const json pooled = json::parse(exchange(port(), json_post("/embed", R"({"inputs":["Hello world","GPU servers batch"]})")).body);
  const json tokens = json::parse(exchange(port(), json_post("/tokenize", R"({"inputs":["Hello world","GPU servers batch"]})")).body);
  ASSERT_EQ(all.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    ASSERT_EQ(all[i].size(), tokens[i].size());
    std::vector<float> mean(384, 0.0f);
    for (const json& row : all[i]) {
      ASSERT_EQ(row.size(), 384u);
      for (std::size_t c = 0; c < 384; ++c) mean[c] += row[c].get<float>() / static_cast<float>(all[i].size());
    }
    EXPECT_GE(cosine(mean, pooled[i].get<std::vector<float>>()), 0.99999) << "input " << i;
  }
  EXPECT_EQ(exchange(port(), json_post("/embed_all", json{{"inputs", std::string(3000, 'a') + " b c"}}.dump())).status, 200);
  std::string longer;
  for (int i = 0; i < 300; ++i) longer += "word ";
  EXPECT_EQ(exchange(port(), json_post("/embed_all", json{{"inputs", longer}}.dump())).status, 413);
}

TEST_F(EmbedE2E, OpenAiModelsListsTheModel) {
  const HttpResponse r = exchange(port(), http_get("/v1/models"));
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["id"], std::filesystem::path(model_dir()).filename().string());
  EXPECT_EQ(j["data"][0]["object"], "model");
  EXPECT_GT(j["data"][0]["created"].get<std::int64_t>(), 1600000000);
  EXPECT_EQ(j["data"][0]["owned_by"], "ferry");
}

TEST_F(EmbedE2E, ClientsThatVanishDoNotDisturbOthers) {
  for (int i = 0; i < 40; ++i) {
    HttpConnection c(port(), 10);
    c.send(json_post("/embed", json{{"inputs", std::vector<std::string>(8, "a client that leaves at once")}}.dump()));
    c.close();
  }
  // Their inputs may still fill the queue for a moment (a busy server answers
  // 429 then); once the batcher reaches them they are skipped, not computed.
  int status = 0;
  ASSERT_TRUE(wait_until([&] { return (status = exchange(port(), http_get("/inference?d=still+here")).status) != 429; }, 60));
  EXPECT_EQ(status, 200);
  const std::string m = exchange(port(), http_get("/metrics")).body;
  EXPECT_NE(m.find("ferry_embed_abandoned_total"), std::string::npos);
}

// A tiny queue: requests beyond it get 429 with Retry-After, single and
// batched alike; nothing hangs, and the server serves on afterwards.
TEST(EmbedOverload, FullQueueAnswers429) {
  FerryHttp server({"--model", model_dir(), "--queue-slots", "4", "--max-batch", "2"});
  std::atomic<int> ok{0}, busy{0}, other{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 12; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < 6; ++i) {
        const std::string req =
            t % 2 ? http_get("/inference?d=overload+" + std::to_string(i))
                  : json_post("/embed", json{{"inputs", std::vector<std::string>(3, "batched overload")}}.dump());
        const HttpResponse r = exchange(server.port(), req);
        if (r.status == 200) {
          ok++;
        } else if (r.status == 429 && r.header("retry-after") == "1" &&
                   json::parse(r.body)["error_type"] == "Overloaded") {
          busy++;
        } else {
          other++;
        }
      }
    });
  }
  for (auto& c : clients) c.join();
  std::printf("%d served, %d refused with 429\n", ok.load(), busy.load());
  EXPECT_EQ(other.load(), 0);
  EXPECT_GT(ok.load(), 0);
  EXPECT_GT(busy.load(), 0);
  EXPECT_EQ(exchange(server.port(), http_get("/inference?d=after")).status, 200);
}

// The HTTP code of a curl request, with the extra curl arguments.
int curl_status(std::uint16_t port, const std::string& path, const std::string& args) {
  const std::string cmd = "curl -sS -o /dev/null -w '%{http_code}' " + args + " http://127.0.0.1:" +
                          std::to_string(port) + path;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  char buf[16] = {};
  const std::size_t n = fread(buf, 1, sizeof(buf) - 1, p);
  pclose(p);
  return std::atoi(std::string(buf, n).c_str());
}

// --api-key from $API_KEY, and --pooling cls: 401 without the key on every
// route but /health and /metrics; the key never shows; CLS pooling is each
// input's first token state, as /embed_all gives it.
TEST(EmbedApiKeyAndPooling, KeyFromTheEnvironmentAndClsPooling) {
  const std::string key = "k3y-from-the-environment";
  ::setenv("API_KEY", key.c_str(), 1);
  FerryHttp server({"--model", model_dir(), "--pooling", "cls", "--access-log", "-"});
  ::unsetenv("API_KEY");
  // server.port() each time, not a variable: exchange(lvalue, string) would find std::exchange.
  const std::string auth = "-H 'Authorization: Bearer " + key + "'";
  const std::string json_body = "-H 'Content-Type: application/json' -d '{\"inputs\":\"Hello world\"}'";
  EXPECT_EQ(curl_status(server.port(), "/embed", json_body), 401);
  EXPECT_EQ(curl_status(server.port(), "/embed", json_body + " -H 'Authorization: Bearer wrong'"), 401);
  EXPECT_EQ(curl_status(server.port(), "/embed", json_body + " " + auth), 200);
  EXPECT_EQ(curl_status(server.port(), "/info", ""), 401);
  EXPECT_EQ(curl_status(server.port(), "/contacts.html", ""), 401);
  EXPECT_EQ(curl_status(server.port(), "/health", ""), 200);
  EXPECT_EQ(curl_status(server.port(), "/metrics", ""), 200);

  const HttpResponse refused = exchange(server.port(), json_post("/tokenize", R"({"inputs":"x"})"));
  EXPECT_EQ(refused.status, 401);
  EXPECT_EQ(json::parse(refused.body)["error_type"], "Unauthorized");
  EXPECT_EQ(refused.header("www-authenticate"), "Bearer");

  const std::string bearer = "Authorization: Bearer " + key + "\r\n";
  const HttpResponse info = exchange(server.port(), http_get("/info", bearer));
  ASSERT_EQ(info.status, 200);
  EXPECT_EQ(json::parse(info.body)["pooling"], "cls");
  EXPECT_EQ(info.body.find(key), std::string::npos);
  const json pooled = json::parse(exchange(server.port(), json_post("/embed", R"({"inputs":["Hello world","a b c"],"normalize":false})", bearer)).body);
  const json all = json::parse(exchange(server.port(), json_post("/embed_all", R"({"inputs":["Hello world","a b c"]})", bearer)).body);
  ASSERT_EQ(pooled.size(), 2u);
  ASSERT_EQ(all.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) EXPECT_EQ(pooled[i], all[i][0]) << "input " << i;
  EXPECT_EQ(server.log().find(key), std::string::npos) << "the key was logged";
}

TEST(EmbedWithoutModel, ApisAnswer503) {
  FerryHttp server;
  const HttpResponse r = exchange(server.port(), http_get("/inference?d=x"));
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(json::parse(r.body)["error_type"], "Unhealthy");
}

}  // namespace
}  // namespace ferry::test
