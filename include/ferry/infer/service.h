#pragma once
// The embedding service: requests of one or more token sequences enter a
// bounded lock-free ring; one batcher thread forms batches from it by a token
// budget, a sequence cap and a wait, runs the model, and hands each request
// its vectors. Callers tokenize on their own threads (a proxy thread each), so
// tokenization, JSON and HTTP work overlap the model and never wait for it.
//
//   EmbeddingService service(make_bert_model(...), WordPieceTokenizer::load(...), options);
//   service.start();
//   auto job = std::make_shared<EmbedJob>();  ... tokenize into job->tokens, set job->done
//   if (service.submit(job) == Admission::Full) -> answer 429

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ferry/infer/model.h"
#include "ferry/infer/tokenizer.h"

namespace ferry::infer {

struct ServiceOptions {
  // Under load a batch takes what queued while the last one ran. Short inputs
  // cost the GPU about the same per batch up to a few hundred, so the cap on a
  // batch's sequences is what caps requests/s: 256 takes more single inputs a
  // second than 32 did (docs/bench/inference.md, the --max-batch defaults).
  std::size_t queue_slots = 1024;          // sequences waiting at most; more: Admission::Full
  std::size_t max_batch = kDefaultMaxBatch;               // sequences in one batch
  std::size_t max_batch_tokens = kDefaultMaxBatchTokens;  // tokens in one batch (TEI's --max-batch-tokens)
  std::chrono::microseconds max_wait{0};   // how long a batch waits to fill after its first sequence
  std::size_t max_tokens = 256;            // a sequence's ids at most, [CLS] and [SEP] included
  int cpu = -1;                            // pin the batcher to this core; -1: unpinned
  // How long an idle batcher polls the ring before it sleeps. A sleeping
  // batcher costs a lone request its wake-up; polling longer saves that but cost
  // throughput under load (docs/bench/inference.md, --batcher-spin-us).
  std::chrono::microseconds spin{50};
  // A model call that runs longer is a fault: a watchdog thread answers its
  // jobs, and every job that waits or arrives until the call returns, with
  // EmbedJob::unhealthy (HTTP 503), and health() says why. 0: no deadline.
  std::chrono::milliseconds batch_timeout{5000};
};

// One request: its sequences, and what the service fills in.
struct EmbedJob {
  TokenBatch tokens;
  // Called once, on the batcher thread, when every sequence is computed (or
  // the model failed: error is set). Keep it short: hand the work on.
  std::function<void(EmbedJob&)> done;
  // Polled before the job's sequences are computed: true skips them (the
  // client went away), and done is then not called.
  std::function<bool()> abandoned;
  // TEI's /embed_all: vectors holds every token's state, not one pooled
  // vector per sequence. Such jobs are batched apart from pooled ones.
  bool token_vectors = false;

  // tokens.size() rows of hidden floats, pooled as the model says, or with
  // token_vectors tokens.tokens() rows (sequence i's from row
  // tokens.starts[i]); not normalised.
  std::vector<float> vectors;
  std::string error;            // the model's failure, if any
  // error is the service's, not the model's: its batch ran past
  // batch_timeout, or the model can run no more batches (EmbeddingModel::fault).
  bool unhealthy = false;
  std::size_t batch_size = 0;   // sequences in the batch that computed the last of this job's
  std::size_t batch_tokens = 0;
  // steady-clock nanoseconds
  std::int64_t queued_ns = 0;    // submit()
  std::int64_t batched_ns = 0;   // the batcher took its last sequence into a batch
  std::int64_t launched_ns = 0;  // that batch's model call began
  std::int64_t computed_ns = 0;  // and returned

  // The service's own.
  std::atomic<std::uint32_t> remaining{0};
  bool skipped = false;
  // Set by whoever calls done (the batcher, or the watchdog failing the job):
  // done runs once, and nothing writes to a job after it.
  std::atomic<bool> finished{false};
};

// Unhealthy: a batch is stuck past ServiceOptions::batch_timeout or the model
// has faulted (health() says why); nothing is queued.
enum class Admission { Ok, Full, Invalid, Unhealthy };

struct ServiceStats {
  std::uint64_t jobs = 0, sequences = 0, batches = 0, batch_tokens = 0;
  std::uint64_t rejected_full = 0, skipped_abandoned = 0, model_errors = 0;
  // Batches that ran past batch_timeout; jobs answered unhealthy (failed by
  // the watchdog or the model's fault, or refused by submit()).
  std::uint64_t timed_out_batches = 0, unhealthy_jobs = 0;
  bool stuck = false;  // a batch is past batch_timeout now
  std::size_t queued = 0;  // sequences waiting now
  double model_seconds = 0;
};

class EmbeddingService {
 public:
  EmbeddingService(std::unique_ptr<EmbeddingModel> model, WordPieceTokenizer tokenizer, ServiceOptions options);
  ~EmbeddingService();
  EmbeddingService(const EmbeddingService&) = delete;
  EmbeddingService& operator=(const EmbeddingService&) = delete;

  void start();          // idempotent
  void stop() noexcept;  // idempotent; waiting jobs are dropped

  // Takes a job whose tokens hold 1..queue_slots sequences, each of
  // 1..max_tokens ids. Full: the ring has no room for all of them (none is
  // queued). Invalid: the job breaks those bounds. Any thread.
  Admission submit(std::shared_ptr<EmbedJob> job);

  const WordPieceTokenizer& tokenizer() const noexcept;
  const ModelInfo& model_info() const noexcept;
  const ServiceOptions& options() const noexcept;
  ServiceStats stats() const;
  // ok, or why not: a batch stuck past batch_timeout (its size, tokens and
  // time so far), or the model's fault, which lasts. Any thread.
  struct Health {
    bool ok = true;
    std::string reason;
  };
  Health health() const;
  // Sizes of the batches run so far, as a histogram over 1, 2, 4, ... max_batch.
  std::vector<std::uint64_t> batch_size_histogram() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ferry::infer
