// `ferry http --model` under minutes of mixed traffic: 64 clients at once send
// single inputs, batches of 7 long inputs, GAZSI queries over 120 sentences,
// OpenAI requests, bad requests, and requests they abandon mid-way. Every
// answer must come back within a deadline, and every vector must match
// sentence-transformers' for its text. With --backend=cuda the HTTP workers'
// launch method and the model share one GPU, which is what this test is for:
// mixed shapes make the model capture new CUDA graphs as the traffic runs.
//
// FERRY_SOAK_SECONDS sets how long the traffic runs (default 120).
// FERRY_SOAK_ON_FAILURE names a command to run on the server's pid when it fails.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "reference_vectors.h"
#include "support/ferry_processes.h"
#include "support/http_client.h"

namespace ferry::test {
namespace {

using infer::test::cosine;
using infer::test::load_reference;
using infer::test::model_dir;
using infer::test::Reference;
using nlohmann::json;

constexpr int kClients = 64;
constexpr double kAnswerDeadlineS = 15;  // far above any batch; a hang shows as a missed deadline

double soak_seconds() {
  const char* s = std::getenv("FERRY_SOAK_SECONDS");
  return s != nullptr ? std::atof(s) : 120;
}

bool cuda() {
  return backend_under_test().backend == "cuda";
}
double required_cosine() {
  return cuda() ? 0.999 : 0.9999;
}

std::string percent_encode(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// What the traffic found; any failure names the request that showed it.
struct Tally {
  std::atomic<long> answered{0}, vectors{0}, bad_requests{0}, abandoned{0}, overloaded{0};
  std::mutex mu;
  std::vector<std::string> failures;
  void fail(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    if (failures.size() < 20) failures.push_back(what);
  }
  bool failed() {
    std::lock_guard<std::mutex> lock(mu);
    return !failures.empty();
  }
};

class Traffic {
 public:
  Traffic(const Reference& ref, std::uint16_t port) : ref_(ref), port_(port) {
    for (std::size_t i = 0; i < ref.texts.size(); ++i) {
      (ref.ids[i].size() >= 200 ? long_ : short_).push_back(i);
      if (ref.ids[i].size() < 200 && gazsi_.size() < 120) gazsi_.push_back(i);
    }
  }

  // One client's loop until `until`.
  void run(int client, std::chrono::steady_clock::time_point until, Tally& t) {
    std::mt19937 rng(1234 + client);
    std::optional<HttpConnection> conn;
    while (std::chrono::steady_clock::now() < until && !t.failed()) {
      const int kind = static_cast<int>(rng() % 20);
      try {
        if (kind < 7) {
          single(conn, pick(short_, rng), t);
        } else if (kind < 10) {
          batch_of_long(conn, rng, t);
        } else if (kind < 15) {
          gazsi(conn, gazsi_[rng() % gazsi_.size()], t);
        } else if (kind < 17) {
          openai(conn, rng, t);
        } else if (kind < 19) {
          bad(conn, rng, t);
        } else {
          abandon(rng, t);
          continue;
        }
      } catch (const std::exception& e) {
        t.fail("client " + std::to_string(client) + ", request kind " + std::to_string(kind) + ": " +
               e.what());
        return;
      }
      if (rng() % 8 == 0) conn.reset();  // new connections now and then
    }
  }

 private:
  std::size_t pick(const std::vector<std::size_t>& from, std::mt19937& rng) {
    return from[rng() % from.size()];
  }

  // Opens a connection when there is none, and forgets one the server closes.
  HttpResponse exchange(std::optional<HttpConnection>& c, const std::string& request) {
    if (!c) c.emplace(port_, kAnswerDeadlineS);
    c->send(request);
    auto r = c->read_response(false, kAnswerDeadlineS);
    if (!r) throw std::runtime_error("the server closed the connection without answering");
    if (r->header("connection") == "close") c.reset();
    return *r;
  }

  // 429 is a fair answer under this load; anything else but 200 is a failure.
  bool ok(const HttpResponse& r, Tally& t, const std::string& what) {
    if (r.status == 429) {
      t.overloaded++;
      return false;
    }
    if (r.status != 200) {
      t.fail(what + ": status " + std::to_string(r.status) + ": " + r.body.substr(0, 200));
      return false;
    }
    t.answered++;
    return true;
  }

  void check_vector(const json& v, std::size_t ref_index, Tally& t, const std::string& what) {
    std::vector<float> got = v.get<std::vector<float>>();
    if (got.size() != ref_.dims) {
      t.fail(what + ": " + std::to_string(got.size()) + " dimensions");
      return;
    }
    const double c = cosine(got, ref_.vector(ref_index));
    if (c < required_cosine()) t.fail(what + ": cosine " + std::to_string(c) + " to its reference");
    t.vectors++;
  }

  void single(std::optional<HttpConnection>& c, std::size_t i, Tally& t) {
    const HttpResponse r = exchange(c, json_post("/embed", json{{"inputs", ref_.texts[i]}}.dump()));
    if (ok(r, t, "/embed single #" + std::to_string(i)))
      check_vector(json::parse(r.body)[0], i, t, "/embed single");
  }

  void batch_of_long(std::optional<HttpConnection>& c, std::mt19937& rng, Tally& t) {
    std::vector<std::size_t> which;
    std::vector<std::string> inputs;
    for (int k = 0; k < 7; ++k) {
      which.push_back(k % 2 ? pick(short_, rng) : pick(long_, rng));
      inputs.push_back(ref_.texts[which.back()]);
    }
    const HttpResponse r = exchange(c, json_post("/embed", json{{"inputs", inputs}, {"truncate", true}}.dump()));
    if (!ok(r, t, "/embed batch of 7")) return;
    const json out = json::parse(r.body);
    if (out.size() != 7) return t.fail("/embed batch of 7: " + std::to_string(out.size()) + " vectors");
    for (int k = 0; k < 7; ++k)
      check_vector(out[k], which[k], t, "/embed batch of 7, input " + std::to_string(k));
  }

  void gazsi(std::optional<HttpConnection>& c, std::size_t i, Tally& t) {
    const HttpResponse r = exchange(c, http_get("/inference?d=" + percent_encode(ref_.texts[i]) + "&full=1"));
    if (ok(r, t, "/inference #" + std::to_string(i)))
      check_vector(json::parse(r.body)["embedding"], i, t, "/inference");
  }

  void openai(std::optional<HttpConnection>& c, std::mt19937& rng, Tally& t) {
    const std::size_t a = pick(short_, rng), b = pick(long_, rng);
    const HttpResponse r =
        exchange(c, json_post("/v1/embeddings", json{{"input", {ref_.texts[a], ref_.texts[b]}}}.dump()));
    if (!ok(r, t, "/v1/embeddings")) return;
    const json data = json::parse(r.body)["data"];
    check_vector(data[0]["embedding"], a, t, "/v1/embeddings input 0");
    check_vector(data[1]["embedding"], b, t, "/v1/embeddings input 1");
  }

  void bad(std::optional<HttpConnection>& c, std::mt19937& rng, Tally& t) {
    static const char* bodies[] = {"{\"inputs\": ", "{\"inputs\": []}", "{\"inputs\": 42}", "[1,2,3]"};
    const std::string request =
        rng() % 5 == 0 ? http_get("/no-such-page") : json_post("/embed", bodies[rng() % std::size(bodies)]);
    const HttpResponse r = exchange(c, request);
    if (r.status < 400 || r.status >= 500) t.fail("a bad request got " + std::to_string(r.status));
    t.bad_requests++;
  }

  // A client that leaves mid-request: half a body, or a whole request and no read.
  void abandon(std::mt19937& rng, Tally& t) {
    HttpConnection c(port_, kAnswerDeadlineS);
    const std::string whole =
        json_post("/embed",
             json{{"inputs", std::vector<std::string>(5, ref_.texts[pick(long_, rng)])}, {"truncate", true}}
                 .dump());
    c.send(rng() % 2 ? whole.substr(0, whole.size() / 2) : whole);
    c.close();
    t.abandoned++;
  }

  const Reference& ref_;
  std::uint16_t port_;
  std::vector<std::size_t> short_, long_, gazsi_;
};

TEST(EmbedSoak, MixedTrafficFromManyClientsIsAnsweredAndCorrect) {
  if (!std::ifstream(model_dir() + "/model.safetensors"))
    GTEST_FAIL() << "no model at " << model_dir() << ": run scripts/fetch-model.sh";
  const Reference ref = load_reference();
  // Four proxy threads, as GAZSI's configuration runs (--cpu 0,1,2,3).
  FerryHttp server({"--model", model_dir(), "--max-wait-us", "200", "--queue-slots", "512"}, 4);
  Traffic traffic(ref, server.port());
  Tally tally;
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<long>(soak_seconds() * 1000));
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) clients.emplace_back([&, c] { traffic.run(c, until, tally); });
  for (auto& c : clients) c.join();
  std::printf(
      "%ld answered (%ld vectors checked), %ld bad requests refused, %ld abandoned, %ld refused with 429\n",
      tally.answered.load(), tally.vectors.load(), tally.bad_requests.load(), tally.abandoned.load(),
      tally.overloaded.load());
  for (const std::string& f : tally.failures) ADD_FAILURE() << f;
  if (tally.failed()) {
    // FERRY_SOAK_ON_FAILURE=CMD runs `CMD PID` while the server still runs
    // (e.g. a script that attaches cuda-gdb and prints every thread's stack).
    if (const char* hook = std::getenv("FERRY_SOAK_ON_FAILURE"))
      std::system((std::string(hook) + " " + std::to_string(server.process().pid())).c_str());
    std::printf("server log (tail):\n%s\n",
                server.log().substr(server.log().size() > 4000 ? server.log().size() - 4000 : 0).c_str());
    return;
  }
  EXPECT_GT(tally.vectors.load(),
            static_cast<long>(soak_seconds() * (cuda() ? 100 : 5)));  // traffic did flow
  // Still serving afterwards.
  HttpConnection c(server.port(), kAnswerDeadlineS);
  c.send(json_post("/embed", json{{"inputs", ref.texts[0]}}.dump()));
  auto r = c.read_response(false, kAnswerDeadlineS);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
}

}  // namespace
}  // namespace ferry::test
