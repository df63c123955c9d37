// The embedding service's ring and batcher, with a stand-in model whose
// output is a function of its input (a mock is fine here: the real model has
// its own tests, and the end-to-end test serves it).

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "ferry/core/status.h"
#include "ferry/infer/service.h"
#include "infer/service/gated_model.h"

namespace ferry::infer {
namespace {

constexpr std::size_t kHidden = 4;

// Row i: (sum of ids, length, first id, batch size). Can be held at the start
// of a call to let requests pile up, and made to fail.
class StandInModel final : public EmbeddingModel {
 public:
  StandInModel() {
    info_.name = "stand-in";
    info_.hidden = kHidden;
    info_.max_positions = 512;
    info_.vocab = 30522;
    info_.precision = "f32";
    info_.device = "cpu";
  }
  const ModelInfo& info() const noexcept override { return info_; }
  void embed(const TokenBatch& batch, float* out) override {
    {
      std::unique_lock lock(mutex_);
      ++calls_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return !held_; });
      batch_sizes_.push_back(batch.size());
      batch_tokens_.push_back(batch.tokens());
    }
    if (fail_.load()) throw Error("stand-in failure");
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const auto seq = batch.sequence(i);
      float sum = 0;
      for (auto id : seq) sum += static_cast<float>(id);
      out[i * kHidden + 0] = sum;
      out[i * kHidden + 1] = static_cast<float>(seq.size());
      out[i * kHidden + 2] = static_cast<float>(seq[0]);
      out[i * kHidden + 3] = static_cast<float>(batch.size());
    }
  }
  // Row t: (id, place in its sequence, the sequence's length, -1): the
  // last column tells token rows from pooled ones.
  void embed_tokens(const TokenBatch& batch, float* out) override {
    {
      std::lock_guard lock(mutex_);
      ++calls_;
      token_batch_sizes_.push_back(batch.size());
    }
    if (fail_.load()) throw Error("stand-in failure");
    for (std::size_t s = 0; s < batch.size(); ++s) {
      for (std::size_t t = batch.starts[s]; t < batch.starts[s + 1]; ++t) {
        out[t * kHidden + 0] = static_cast<float>(batch.ids[t]);
        out[t * kHidden + 1] = static_cast<float>(t - batch.starts[s]);
        out[t * kHidden + 2] = static_cast<float>(batch.starts[s + 1] - batch.starts[s]);
        out[t * kHidden + 3] = -1.0f;
      }
    }
  }
  std::vector<std::size_t> token_batch_sizes() {
    std::lock_guard lock(mutex_);
    return token_batch_sizes_;
  }
  void hold() {
    std::lock_guard lock(mutex_);
    held_ = true;
  }
  void release() {
    std::lock_guard lock(mutex_);
    held_ = false;
    cv_.notify_all();
  }
  void wait_for_calls(int n) {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return calls_ >= n; });
  }
  std::vector<std::size_t> batch_sizes() {
    std::lock_guard lock(mutex_);
    return batch_sizes_;
  }
  std::vector<std::size_t> batch_tokens() {
    std::lock_guard lock(mutex_);
    return batch_tokens_;
  }
  std::atomic<bool> fail_{false};

 private:
  ModelInfo info_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool held_ = false;
  int calls_ = 0;
  std::vector<std::size_t> batch_sizes_, batch_tokens_, token_batch_sizes_;
};

// A tokenizer is required by the service but unused here: the jobs arrive tokenized.
WordPieceTokenizer tiny_tokenizer() {
  const std::string path = testing::TempDir() + "/service-test-vocab.txt";
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs("[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n", f);
  std::fclose(f);
  return WordPieceTokenizer::load(path);
}

struct Fixture {
  explicit Fixture(ServiceOptions o) {
    auto m = std::make_unique<StandInModel>();
    model = m.get();
    service = std::make_unique<EmbeddingService>(std::move(m), tiny_tokenizer(), o);
    service->start();
  }
  StandInModel* model;
  std::unique_ptr<EmbeddingService> service;
};

// A job of the given sequences; done counts into `finished`.
std::shared_ptr<EmbedJob> job_of(const std::vector<std::vector<std::int32_t>>& seqs, std::atomic<int>& finished) {
  auto j = std::make_shared<EmbedJob>();
  for (const auto& s : seqs) j->tokens.add(s);
  j->done = [&finished](EmbedJob&) { finished.fetch_add(1); };
  return j;
}

bool wait_for(const std::function<bool()>& ok, double seconds = 10) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!ok()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST(EmbeddingService, EachSequenceGetsItsOwnVector) {
  Fixture f(ServiceOptions{});
  std::atomic<int> finished{0};
  auto j = job_of({{101, 5, 102}, {101, 7, 8, 9, 102}}, finished);
  ASSERT_EQ(f.service->submit(j), Admission::Ok);
  ASSERT_TRUE(wait_for([&] { return finished.load() == 1; }));
  ASSERT_EQ(j->vectors.size(), 2 * kHidden);
  EXPECT_EQ(j->vectors[0], 208.0f);
  EXPECT_EQ(j->vectors[1], 3.0f);
  EXPECT_EQ(j->vectors[kHidden + 0], 227.0f);
  EXPECT_EQ(j->vectors[kHidden + 1], 5.0f);
  EXPECT_TRUE(j->error.empty());
  EXPECT_GE(j->batched_ns, j->queued_ns);
  EXPECT_GE(j->computed_ns, j->launched_ns);
}

TEST(EmbeddingService, TokenJobsGetEveryTokensRowAndAreBatchedApart) {
  Fixture f(ServiceOptions{});
  f.model->hold();  // both jobs queue before the batcher takes either
  std::atomic<int> finished{0};
  auto warm = job_of({{101, 102}}, finished);
  ASSERT_EQ(f.service->submit(warm), Admission::Ok);
  f.model->wait_for_calls(1);
  auto pooled = job_of({{101, 5, 102}}, finished);
  auto tokens = job_of({{101, 7, 8, 102}, {101, 9, 102}}, finished);
  tokens->token_vectors = true;
  auto pooled_after = job_of({{101, 6, 102}}, finished);
  ASSERT_EQ(f.service->submit(pooled), Admission::Ok);
  ASSERT_EQ(f.service->submit(tokens), Admission::Ok);
  ASSERT_EQ(f.service->submit(pooled_after), Admission::Ok);
  f.model->release();
  ASSERT_TRUE(wait_for([&] { return finished.load() == 4; }));
  // The batches: warm, pooled (a token job ends it), tokens, pooled_after.
  EXPECT_EQ(f.model->batch_sizes(), (std::vector<std::size_t>{1, 1, 1}));
  EXPECT_EQ(f.model->token_batch_sizes(), (std::vector<std::size_t>{2}));
  ASSERT_EQ(tokens->vectors.size(), 7 * kHidden);
  const float expected[7][3] = {{101, 0, 4}, {7, 1, 4}, {8, 2, 4}, {102, 3, 4}, {101, 0, 3}, {9, 1, 3}, {102, 2, 3}};
  for (std::size_t t = 0; t < 7; ++t) {
    for (std::size_t c = 0; c < 3; ++c) EXPECT_EQ(tokens->vectors[t * kHidden + c], expected[t][c]) << t << "," << c;
    EXPECT_EQ(tokens->vectors[t * kHidden + 3], -1.0f);
  }
  ASSERT_EQ(pooled->vectors.size(), kHidden);
  EXPECT_EQ(pooled->vectors[0], 208.0f);
  EXPECT_EQ(pooled_after->vectors[0], 209.0f);
}

TEST(EmbeddingService, BatchesAreCappedBySequencesAndTokens) {
  ServiceOptions o;
  o.max_batch = 4;
  o.max_batch_tokens = 20;
  o.max_tokens = 10;
  Fixture f(o);
  f.model->hold();
  std::atomic<int> finished{0};
  std::vector<std::shared_ptr<EmbedJob>> jobs;
  // The first call takes the first job alone; the rest pile up behind it.
  jobs.push_back(job_of({{1, 2}}, finished));
  ASSERT_EQ(f.service->submit(jobs.back()), Admission::Ok);
  f.model->wait_for_calls(1);
  for (int i = 0; i < 10; ++i) {
    jobs.push_back(job_of({std::vector<std::int32_t>(i < 5 ? 2 : 8, 3)}, finished));
    ASSERT_EQ(f.service->submit(jobs.back()), Admission::Ok);
  }
  f.model->release();
  ASSERT_TRUE(wait_for([&] { return finished.load() == 11; }));
  for (std::size_t s : f.model->batch_sizes()) EXPECT_LE(s, 4u);
  for (std::size_t t : f.model->batch_tokens()) EXPECT_LE(t, 20u);
  // 5 short then 5 long: [1] [2,2,2,2] [2,8,8] [8,8] -- or any split within both caps.
  EXPECT_GE(f.model->batch_sizes().size(), 4u);
}

TEST(EmbeddingService, FullQueueRefusesWholeJobs) {
  ServiceOptions o;
  o.queue_slots = 4;
  o.max_batch = 1;
  Fixture f(o);
  f.model->hold();
  std::atomic<int> finished{0};
  auto first = job_of({{1}}, finished);
  ASSERT_EQ(f.service->submit(first), Admission::Ok);
  f.model->wait_for_calls(1);  // taken off the ring: it no longer counts
  std::vector<std::shared_ptr<EmbedJob>> jobs;
  jobs.push_back(job_of({{1}, {2}, {3}}, finished));
  EXPECT_EQ(f.service->submit(jobs.back()), Admission::Ok);
  // Two more inputs would make 5 waiting of 4: refused whole, even though one would fit.
  EXPECT_EQ(f.service->submit(job_of({{4}, {5}}, finished)), Admission::Full);
  jobs.push_back(job_of({{6}}, finished));
  EXPECT_EQ(f.service->submit(jobs.back()), Admission::Ok);
  EXPECT_EQ(f.service->submit(job_of({{7}}, finished)), Admission::Full);
  EXPECT_EQ(f.service->submit(job_of({{1}, {2}, {3}, {4}, {5}}, finished)), Admission::Invalid);  // can never fit
  EXPECT_EQ(f.service->submit(job_of({}, finished)), Admission::Invalid);
  EXPECT_EQ(f.service->stats().rejected_full, 2u);
  f.model->release();
  ASSERT_TRUE(wait_for([&] { return finished.load() == 3; }));
  EXPECT_EQ(f.service->stats().queued, 0u);
  EXPECT_EQ(f.service->submit(job_of({{8}}, finished)), Admission::Ok);  // room again
  ASSERT_TRUE(wait_for([&] { return finished.load() == 4; }));
}

TEST(EmbeddingService, TooLongSequencesAreInvalid) {
  ServiceOptions o;
  o.max_tokens = 4;
  o.max_batch_tokens = 4;
  Fixture f(o);
  std::atomic<int> finished{0};
  EXPECT_EQ(f.service->submit(job_of({{1, 2, 3, 4, 5}}, finished)), Admission::Invalid);
  EXPECT_EQ(f.service->submit(job_of({{1, 2, 3, 4}}, finished)), Admission::Ok);
  ASSERT_TRUE(wait_for([&] { return finished.load() == 1; }));
}

TEST(EmbeddingService, AbandonedJobsAreSkipped) {
  ServiceOptions o;
  o.max_batch = 1;
  Fixture f(o);
  f.model->hold();
  std::atomic<int> finished{0};
  auto blocker = job_of({{1}}, finished);
  ASSERT_EQ(f.service->submit(blocker), Admission::Ok);
  f.model->wait_for_calls(1);
  std::atomic<bool> gone{false};
  auto j = job_of({{2}, {3}}, finished);
  j->abandoned = [&gone] { return gone.load(); };
  ASSERT_EQ(f.service->submit(j), Admission::Ok);
  auto kept = job_of({{4}}, finished);
  ASSERT_EQ(f.service->submit(kept), Admission::Ok);
  gone = true;
  f.model->release();
  ASSERT_TRUE(wait_for([&] { return finished.load() == 2; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(finished.load(), 2);  // the abandoned job's done never ran
  EXPECT_EQ(f.service->stats().skipped_abandoned, 2u);
  EXPECT_EQ(f.model->batch_sizes().size(), 2u);  // only the blocker and `kept` reached the model
  EXPECT_EQ(f.service->stats().queued, 0u);
}

TEST(EmbeddingService, ModelFailureReachesEveryJobOfTheBatch) {
  Fixture f(ServiceOptions{});
  f.model->fail_ = true;
  std::atomic<int> finished{0};
  auto j = job_of({{1}, {2}}, finished);
  ASSERT_EQ(f.service->submit(j), Admission::Ok);
  ASSERT_TRUE(wait_for([&] { return finished.load() == 1; }));
  EXPECT_NE(j->error.find("stand-in failure"), std::string::npos);
  EXPECT_EQ(f.service->stats().model_errors, 1u);
  f.model->fail_ = false;  // and it serves on
  auto k = job_of({{5}}, finished);
  ASSERT_EQ(f.service->submit(k), Admission::Ok);
  ASSERT_TRUE(wait_for([&] { return finished.load() == 2; }));
  EXPECT_TRUE(k->error.empty());
  EXPECT_EQ(k->vectors[0], 5.0f);
}

TEST(EmbeddingService, WaitLetsABatchFill) {
  ServiceOptions o;
  o.max_wait = std::chrono::microseconds(200000);
  o.max_batch = 8;
  Fixture f(o);
  std::atomic<int> finished{0};
  std::vector<std::shared_ptr<EmbedJob>> jobs;
  for (int i = 0; i < 8; ++i) {
    jobs.push_back(job_of({{i + 1}}, finished));
    ASSERT_EQ(f.service->submit(jobs.back()), Admission::Ok);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(wait_for([&] { return finished.load() == 8; }));
  // 8 arrivals 5 ms apart, well inside a 200 ms wait: one full batch.
  EXPECT_EQ(f.model->batch_sizes(), std::vector<std::size_t>{8});
}

// Many producers at once (TSan runs this): every job gets its own sequences' vectors.
TEST(EmbeddingService, ConcurrentProducersGetTheirOwnResults) {
  ServiceOptions o;
  o.queue_slots = 64;
  o.max_batch = 16;
  Fixture f(o);
  const int threads = 4;
  const int per_thread = std::getenv("FERRY_FUZZ_MESSAGES") ? 3000 : 1000;
  std::atomic<int> wrong{0}, refused{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        auto j = std::make_shared<EmbedJob>();
        const std::int32_t a = t * 100000 + i, n = 1 + i % 3;
        for (std::int32_t s = 0; s < n; ++s) j->tokens.add(std::vector<std::int32_t>(1 + s, a));
        std::atomic<bool> done{false};
        j->done = [&done](EmbedJob&) { done.store(true, std::memory_order_release); };
        Admission r;
        while ((r = f.service->submit(j)) == Admission::Full) {
          refused.fetch_add(1);
          std::this_thread::yield();
        }
        if (r != Admission::Ok) {
          wrong.fetch_add(1);
          continue;
        }
        while (!done.load(std::memory_order_acquire)) std::this_thread::yield();
        for (std::int32_t s = 0; s < n; ++s)
          if (j->vectors[s * kHidden + 0] != static_cast<float>(a) * static_cast<float>(1 + s) ||
              j->vectors[s * kHidden + 1] != static_cast<float>(1 + s))
            wrong.fetch_add(1);
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(f.service->stats().queued, 0u);
  std::printf("%d jobs from %d threads; %d refusals while full\n", threads * per_thread, threads, refused.load());
}

// A program embedding the service has no flags: each refusal names the
// ServiceOptions field to change.
TEST(EmbeddingService, BadOptionsAreRefusedNamingTheField) {
  auto refusal = [](ServiceOptions o) -> std::string {
    try {
      EmbeddingService(std::make_unique<StandInModel>(), tiny_tokenizer(), o);
    } catch (const Error& e) {
      return e.what();
    }
    return "accepted";
  };
  ServiceOptions o;
  o.max_tokens = 1000;  // beyond the model's 512 positions
  EXPECT_EQ(refusal(o).rfind("ServiceOptions::max_tokens 1000 exceeds", 0), 0u) << refusal(o);
  o = {};
  o.queue_slots = 0;
  EXPECT_EQ(refusal(o), "ServiceOptions::queue_slots must be at least 1");
  o = {};
  o.max_batch = 0;
  EXPECT_EQ(refusal(o), "ServiceOptions::max_batch must be at least 1");
  o = {};
  o.max_batch_tokens = 100;  // below max_tokens 256
  EXPECT_EQ(refusal(o), "ServiceOptions::max_batch_tokens must be at least ServiceOptions::max_tokens (256)");
  EXPECT_EQ(refusal(o).find("--"), std::string::npos) << "no flag in a library error";
}

using test::GatedModel;

// What a job's done saw, as the HTTP route takes it: the vectors are moved
// out, so a later write into the job's vectors would be caught by ASan.
struct Answer {
  std::atomic<int> calls{0};
  std::vector<float> vectors;
  std::string error;
  bool unhealthy = false;
  std::int64_t at_ns = 0;
};

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::shared_ptr<EmbedJob> watched_job(const std::vector<std::vector<std::int32_t>>& seqs, Answer& a) {
  auto j = std::make_shared<EmbedJob>();
  for (const auto& s : seqs) j->tokens.add(s);
  j->done = [&a](EmbedJob& job) {
    a.vectors = std::move(job.vectors);
    a.error = std::move(job.error);
    a.unhealthy = job.unhealthy;
    a.at_ns = steady_ns();
    a.calls.fetch_add(1, std::memory_order_release);
  };
  return j;
}

struct GatedFixture {
  explicit GatedFixture(ServiceOptions o) {
    auto m = std::make_unique<GatedModel>();
    model = m.get();
    service = std::make_unique<EmbeddingService>(std::move(m), tiny_tokenizer(), o);
    service->start();
  }
  ~GatedFixture() {
    model->release();  // a call still held would keep stop() waiting
    service.reset();
  }
  GatedModel* model;
  std::unique_ptr<EmbeddingService> service;
};

TEST(EmbeddingServiceWatchdog, AStuckBatchIsAnswered503AndTheServiceRecoversWhenItReturns) {
  ServiceOptions o;
  o.batch_timeout = std::chrono::milliseconds(300);
  o.max_batch = 2;
  GatedFixture f(o);
  ASSERT_TRUE(f.service->health().ok);
  f.model->hold();
  Answer stuck, behind, refused_answer;
  // Three inputs: two in the batch that sticks, one left in the ring.
  const std::int64_t submitted = steady_ns();
  auto a = watched_job({{1, 2}, {3}, {4}}, stuck);
  ASSERT_EQ(f.service->submit(a), Admission::Ok);
  f.model->wait_for_calls(1);
  auto b = watched_job({{5}}, behind);
  ASSERT_EQ(f.service->submit(b), Admission::Ok);

  ASSERT_TRUE(wait_for([&] { return stuck.calls.load() == 1 && behind.calls.load() == 1; }, 5));
  const double answered_s = static_cast<double>(stuck.at_ns - submitted) / 1e9;
  EXPECT_GE(answered_s, 0.3);
  EXPECT_LT(answered_s, 1.5);  // within about the deadline, not at the model's return
  EXPECT_TRUE(stuck.unhealthy);
  EXPECT_NE(stuck.error.find("ServiceOptions::batch_timeout"), std::string::npos) << stuck.error;
  EXPECT_TRUE(behind.unhealthy);  // queued behind the stuck batch: answered, not left waiting
  const auto h = f.service->health();
  EXPECT_FALSE(h.ok);
  EXPECT_NE(h.reason.find("2 inputs (3 tokens)"), std::string::npos) << h.reason;
  EXPECT_NE(h.reason.find("running for"), std::string::npos) << h.reason;
  ServiceStats s = f.service->stats();
  EXPECT_TRUE(s.stuck);
  EXPECT_EQ(s.timed_out_batches, 1u);
  EXPECT_EQ(s.queued, 0u);
  // New jobs are refused at once while it is stuck.
  EXPECT_EQ(f.service->submit(watched_job({{6}}, refused_answer)), Admission::Unhealthy);
  EXPECT_EQ(f.service->stats().unhealthy_jobs, 3u);

  f.model->release();  // the stuck call returns: its vectors are nobody's
  ASSERT_TRUE(wait_for([&] { return f.service->health().ok; }, 5));
  EXPECT_FALSE(f.service->stats().stuck);
  Answer after;
  auto c = watched_job({{7, 8}}, after);
  ASSERT_EQ(f.service->submit(c), Admission::Ok);
  ASSERT_TRUE(wait_for([&] { return after.calls.load() == 1; }, 5));
  EXPECT_FALSE(after.unhealthy);
  ASSERT_EQ(after.vectors.size(), kHidden);
  EXPECT_EQ(after.vectors[0], 15.0f);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(stuck.calls.load(), 1);  // answered once, whatever came back later
  EXPECT_EQ(behind.calls.load(), 1);
  EXPECT_EQ(refused_answer.calls.load(), 0);
  EXPECT_EQ(f.service->stats().timed_out_batches, 1u);
}

// A job split over the stuck batch and a sequence the batcher held back for
// the next one: answered once, and its held sequence never reaches the model.
TEST(EmbeddingServiceWatchdog, AJobSplitAcrossAStuckBatchIsAnsweredOnce) {
  ServiceOptions o;
  o.batch_timeout = std::chrono::milliseconds(100);
  o.max_tokens = 4;
  o.max_batch_tokens = 4;
  GatedFixture f(o);
  f.model->hold();
  Answer split;
  // 3 tokens then 2: the second does not fit the first batch's 4 and is held.
  ASSERT_EQ(f.service->submit(watched_job({{1, 2, 3}, {4, 5}}, split)), Admission::Ok);
  f.model->wait_for_calls(1);
  ASSERT_TRUE(wait_for([&] { return split.calls.load() == 1; }, 5));
  EXPECT_TRUE(split.unhealthy);
  f.model->release();
  ASSERT_TRUE(wait_for([&] { return f.service->health().ok; }, 5));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(split.calls.load(), 1);
  EXPECT_EQ(f.model->calls(), 1);
}

// A job whose only sequence the batcher held back for the next batch (it did
// not fit the token budget) is answered 503 with the stuck batch, not when the
// stuck call returns.
TEST(EmbeddingServiceWatchdog, AJobHeldForTheNextBatchIsAnsweredWithTheStuckOne) {
  ServiceOptions o;
  o.batch_timeout = std::chrono::milliseconds(100);
  o.max_tokens = 4;
  o.max_batch_tokens = 4;
  o.max_wait = std::chrono::microseconds(200000);  // the batcher waits for more, so it takes the second job
  GatedFixture f(o);
  f.model->hold();
  Answer first, held;
  ASSERT_EQ(f.service->submit(watched_job({{1, 2, 3}}, first)), Admission::Ok);
  ASSERT_EQ(f.service->submit(watched_job({{4, 5}}, held)), Admission::Ok);  // 3 + 2 > 4: held
  f.model->wait_for_calls(1);
  ASSERT_TRUE(wait_for([&] { return first.calls.load() == 1 && held.calls.load() == 1; }, 5))
      << "the held job was not answered while the batch stayed stuck";
  EXPECT_TRUE(held.unhealthy);
  EXPECT_EQ(f.service->stats().queued, 0u);
  f.model->release();
  ASSERT_TRUE(wait_for([&] { return f.service->health().ok; }, 5));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(held.calls.load(), 1);
  EXPECT_EQ(f.model->calls(), 1);  // the held sequence never reached the model
}

// A call that returns with a sticky device error: the service stays unhealthy,
// with the model's reason, and answers 503 without calling the model again.
TEST(EmbeddingServiceWatchdog, AFaultAfterTheDeadlineLasts) {
  ServiceOptions o;
  o.batch_timeout = std::chrono::milliseconds(100);
  GatedFixture f(o);
  f.model->hold();
  Answer first;
  ASSERT_EQ(f.service->submit(watched_job({{1}}, first)), Admission::Ok);
  ASSERT_TRUE(wait_for([&] { return first.calls.load() == 1; }, 5));
  f.model->release("an illegal memory access was encountered");
  ASSERT_TRUE(wait_for([&] { return !f.service->stats().stuck; }, 5));
  const auto h = f.service->health();
  EXPECT_FALSE(h.ok);
  EXPECT_NE(h.reason.find("illegal memory access"), std::string::npos) << h.reason;
  Answer later;
  EXPECT_EQ(f.service->submit(watched_job({{2}}, later)), Admission::Unhealthy);
  EXPECT_EQ(f.model->calls(), 1);
  EXPECT_EQ(first.calls.load(), 1);
}

// Calls that end around the deadline, from several producers (TSan runs it):
// every job is answered exactly once, with its own vectors or a 503.
TEST(EmbeddingServiceWatchdog, CallsEndingAtTheDeadlineAnswerEachJobOnce) {
  ServiceOptions o;
  o.batch_timeout = std::chrono::milliseconds(5);
  o.max_batch = 4;
  GatedFixture f(o);
  const int threads = 3, per_thread = 150;
  std::atomic<int> wrong{0}, unhealthy{0}, ok{0};
  std::atomic<bool> stop_wobble{false};
  // The model's calls take 0 to 9 ms: some end before the deadline, some after.
  std::thread wobble([&] {
    long us = 0;
    while (!stop_wobble.load()) {
      f.model->sleep_us_ = us;
      us = (us + 1300) % 9000;
      std::this_thread::sleep_for(std::chrono::microseconds(700));
    }
  });
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        Answer a;
        const std::int32_t id = t * 1000 + i + 1;
        auto j = watched_job({{id}, {id, id}}, a);
        Admission r;
        while ((r = f.service->submit(j)) == Admission::Full || r == Admission::Unhealthy)
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        if (r != Admission::Ok) {
          wrong.fetch_add(1);
          continue;
        }
        if (!wait_for([&] { return a.calls.load(std::memory_order_acquire) >= 1; }, 10)) {
          wrong.fetch_add(1);
          continue;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));  // a second answer would come by now
        if (a.calls.load() != 1) wrong.fetch_add(1);
        if (a.unhealthy) {
          unhealthy.fetch_add(1);
        } else if (a.vectors.size() != 2 * kHidden || a.vectors[0] != float(id) || a.vectors[kHidden] != 2.0f * id) {
          wrong.fetch_add(1);
        } else {
          ok.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  stop_wobble = true;
  wobble.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(ok.load() + unhealthy.load(), threads * per_thread);
  std::printf("%d answered, %d with 503; %llu batches past the deadline\n", ok.load() + unhealthy.load(),
              unhealthy.load(), static_cast<unsigned long long>(f.service->stats().timed_out_batches));
}

TEST(EmbeddingServiceWatchdog, ANegativeTimeoutIsRefusedAndZeroMeansNone) {
  ServiceOptions o;
  o.batch_timeout = std::chrono::milliseconds(-1);
  EXPECT_THROW(EmbeddingService(std::make_unique<GatedModel>(), tiny_tokenizer(), o), Error);
  o.batch_timeout = std::chrono::milliseconds(0);
  GatedFixture f(o);
  f.model->hold();
  Answer a;
  ASSERT_EQ(f.service->submit(watched_job({{1}}, a)), Admission::Ok);
  f.model->wait_for_calls(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(a.calls.load(), 0);
  EXPECT_TRUE(f.service->health().ok);
  f.model->release();
  ASSERT_TRUE(wait_for([&] { return a.calls.load() == 1; }, 5));
  EXPECT_FALSE(a.unhealthy);
}

}  // namespace
}  // namespace ferry::infer
