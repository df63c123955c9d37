#include "ferry/infer/service.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/log.h"
#include "core/net.h"
#include "ferry/core/status.h"
#include "infer/service/request_ring.h"

namespace ferry::infer {
namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double seconds(std::int64_t ns) { return static_cast<double>(ns) / 1e9; }

// One sequence of a job, as the ring carries it.
struct Item {
  std::shared_ptr<EmbedJob> job;
  std::uint32_t index = 0;
};

}  // namespace

class EmbeddingService::Impl {
 public:
  Impl(std::unique_ptr<EmbeddingModel> model, WordPieceTokenizer tokenizer, ServiceOptions o)
      : model_(std::move(model)), tokenizer_(std::move(tokenizer)), opts_(o), ring_(o.queue_slots) {
    if (!model_) throw Error("the embedding service needs a model");
    if (opts_.queue_slots == 0) throw Error("ServiceOptions::queue_slots must be at least 1");
    if (opts_.max_batch == 0) throw Error("ServiceOptions::max_batch must be at least 1");
    if (opts_.max_tokens < 2) throw Error("ServiceOptions::max_tokens must be at least 2 ([CLS] and [SEP])");
    if (opts_.max_tokens > model_->info().max_positions)
      throw Error("ServiceOptions::max_tokens " + std::to_string(opts_.max_tokens) + " exceeds the model's " +
                  std::to_string(model_->info().max_positions) + " positions");
    if (opts_.max_batch_tokens < opts_.max_tokens)
      throw Error("ServiceOptions::max_batch_tokens must be at least ServiceOptions::max_tokens (" +
                  std::to_string(opts_.max_tokens) + ")");
    if (opts_.batch_timeout.count() < 0)
      throw Error("ServiceOptions::batch_timeout must be 0 (no deadline) or more");
    hidden_ = model_->info().hidden;
    out_.resize(opts_.max_batch * hidden_);
    std::size_t buckets = 1;
    while ((std::size_t{1} << (buckets - 1)) < opts_.max_batch) ++buckets;
    batch_sizes_ = std::make_unique<std::atomic<std::uint64_t>[]>(buckets);
    buckets_ = buckets;
  }

  ~Impl() { stop(); }

  void start() {
    if (thread_.joinable()) return;  // already running
    running_.store(true);
    thread_ = std::thread([this] { run(); });
    if (watched()) watchdog_ = std::thread([this] { watch(); });
  }

  void stop() noexcept {
    if (!thread_.joinable()) return;
    running_.store(false);
    wake();
    {
      // Under the mutex: the watchdog, and a batcher waiting for it, read
      // running_ under it before they sleep.
      std::lock_guard lock(watch_mutex_);
      watch_cv_.notify_all();
    }
    if (watchdog_.joinable()) watchdog_.join();
    if (state(flight_.load(std::memory_order_acquire)) == kStuck)
      log::app().error("embedding service: stopping waits for the model's stuck call to return");
    thread_.join();
    // Jobs still queued are dropped: their submitters' clients are told nothing
    // more (a stopping server closes their connections).
    while (auto item = next(false)) release(*item, true);
  }

  Admission submit(std::shared_ptr<EmbedJob> job) {
    const std::size_t n = job->tokens.size();
    if (n == 0 || n > opts_.queue_slots) return Admission::Invalid;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t len = job->tokens.sequence(i).size();
      if (len == 0 || len > opts_.max_tokens) return Admission::Invalid;
    }
    if (unhealthy_.load(std::memory_order_acquire)) {
      unhealthy_jobs_.fetch_add(1, std::memory_order_relaxed);
      return Admission::Unhealthy;
    }
    // The same limit for single and batched inputs: a job enters whole or not at all.
    if (queued_.fetch_add(n, std::memory_order_acq_rel) + n > opts_.queue_slots) {
      queued_.fetch_sub(n, std::memory_order_acq_rel);
      rejected_full_.fetch_add(1, std::memory_order_relaxed);
      return Admission::Full;
    }
    job->vectors.assign((job->token_vectors ? job->tokens.tokens() : n) * hidden_, 0.0f);
    job->remaining.store(static_cast<std::uint32_t>(n), std::memory_order_relaxed);
    job->queued_ns = now_ns();
    for (std::uint32_t i = 0; i < n; ++i) {
      // queued_ never exceeds queue_slots <= the ring's capacity: a push cannot fail.
      while (!ring_.try_push({job, i})) std::this_thread::yield();
    }
    jobs_.fetch_add(1, std::memory_order_relaxed);
    if (sleeping_.load(std::memory_order_seq_cst)) wake();
    // S1: pairs with W2 in stuck_period(). Either the watchdog, draining the
    // ring after it set unhealthy_, finds this job there, or this sees
    // unhealthy_ and wakes it to drain again: no job waits behind a stuck batch.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (unhealthy_.load(std::memory_order_relaxed)) {
      std::lock_guard lock(watch_mutex_);
      drain_requested_ = true;  // kept even if the watchdog is draining now, not waiting
      watch_cv_.notify_all();
    }
    return Admission::Ok;
  }

  ServiceStats stats() const {
    ServiceStats s;
    s.jobs = jobs_.load(std::memory_order_relaxed);
    s.sequences = sequences_.load(std::memory_order_relaxed);
    s.batches = batches_.load(std::memory_order_relaxed);
    s.batch_tokens = batch_tokens_.load(std::memory_order_relaxed);
    s.rejected_full = rejected_full_.load(std::memory_order_relaxed);
    s.skipped_abandoned = skipped_.load(std::memory_order_relaxed);
    s.model_errors = model_errors_.load(std::memory_order_relaxed);
    s.timed_out_batches = timed_out_batches_.load(std::memory_order_relaxed);
    s.unhealthy_jobs = unhealthy_jobs_.load(std::memory_order_relaxed);
    s.stuck = state(flight_.load(std::memory_order_relaxed)) == kStuck;
    s.queued = queued_.load(std::memory_order_relaxed);
    s.model_seconds = static_cast<double>(model_ns_.load(std::memory_order_relaxed)) / 1e9;
    return s;
  }

  std::vector<std::uint64_t> histogram() const {
    std::vector<std::uint64_t> h(buckets_);
    for (std::size_t i = 0; i < buckets_; ++i) h[i] = batch_sizes_[i].load(std::memory_order_relaxed);
    return h;
  }

  EmbeddingService::Health health() const {
    const std::uint64_t v = flight_.load(std::memory_order_acquire);
    std::lock_guard lock(health_mutex_);
    if (!fault_.empty()) return {false, fault_};
    if (state(v) == kStuck)
      return {false, stuck_reason_ + fmt::format("; running for {:.1f} s", seconds(now_ns() - launched_at(v)))};
    return {};
  }

  std::unique_ptr<EmbeddingModel> model_;
  WordPieceTokenizer tokenizer_;
  ServiceOptions opts_;

 private:
  void wake() {
    wakeups_.fetch_add(1, std::memory_order_seq_cst);
    wakeups_.notify_one();
  }

  // Waits for the next sequence: polls for ServiceOptions::spin after the
  // last one, then sleeps until a producer wakes it.
  std::optional<Item> next(bool block) {
    std::optional<Item> item = wait_for_item(block);
    // Taken off the ring, it no longer holds a queue slot.
    if (item) queued_.fetch_sub(1, std::memory_order_acq_rel);
    return item;
  }

  std::optional<Item> wait_for_item(bool block) {
    if (auto item = ring_.try_pop()) return item;
    if (!block) return std::nullopt;
    const auto spin_until = std::chrono::steady_clock::now() + opts_.spin;
    while (std::chrono::steady_clock::now() < spin_until) {
      if (auto item = ring_.try_pop()) return item;
    }
    while (running_.load(std::memory_order_relaxed)) {
      const std::uint32_t seen = wakeups_.load(std::memory_order_seq_cst);
      sleeping_.store(true, std::memory_order_seq_cst);
      // Producers push, then read sleeping_: one of the two sees the other.
      if (auto item = ring_.try_pop()) {
        sleeping_.store(false, std::memory_order_relaxed);
        return item;
      }
      wakeups_.wait(seen, std::memory_order_seq_cst);
      sleeping_.store(false, std::memory_order_relaxed);
      if (auto item = ring_.try_pop()) return item;
    }
    return std::nullopt;
  }

  // The batcher: forms a batch, runs it, hands out the vectors.
  void run() {
    if (opts_.cpu >= 0) {
      try {
        net::pin_current_thread(opts_.cpu);
      } catch (const Error& e) {
        log::app().warn("embedding batcher: {}; running unpinned", e.what());
      }
    }
    while (running_.load(std::memory_order_relaxed)) {
      batch_.clear();
      members_.clear();
      std::int64_t first_ns = 0;
      while (members_.size() < opts_.max_batch) {
        std::optional<Item> item = held_ ? held_ : next(members_.empty());
        held_.reset();
        if (!item) {
          if (members_.empty()) break;  // stopping
          // Wait for more only as long as the batch may wait.
          if (opts_.max_wait.count() == 0 || now_ns() - first_ns >= opts_.max_wait.count() * 1000) break;
          continue;
        }
        EmbedJob& job = *item->job;
        if (job.finished.load(std::memory_order_acquire)) {  // answered already: the watchdog failed it
          release(*item, true);
          continue;
        }
        if (job.abandoned && job.abandoned()) {
          skipped_.fetch_add(1, std::memory_order_relaxed);
          release(*item, true);
          continue;
        }
        const auto seq = job.tokens.sequence(item->index);
        if (!members_.empty() && batch_.tokens() + seq.size() > opts_.max_batch_tokens) {
          held_ = item;  // the token budget is spent: it starts the next batch
          break;
        }
        // A batch returns pooled vectors or token states, not both: the
        // other kind starts the next batch.
        if (!members_.empty() && job.token_vectors != token_batch_) {
          held_ = item;
          break;
        }
        if (members_.empty()) {
          first_ns = now_ns();
          token_batch_ = job.token_vectors;
        }
        batch_.add(seq);
        members_.push_back(*item);
      }
      if (members_.empty()) continue;
      run_batch();
    }
    if (held_) release(*held_, true);
    held_.reset();
  }

  void run_batch() {
    const std::int64_t batched = now_ns();
    std::string error;
    const std::int64_t launched = now_ns();
    if (faulted_.load(std::memory_order_acquire)) {
      // The model can run no more batches (EmbeddingModel::fault): 503, not another call.
      const std::string why = health().reason;
      for (const Item& item : members_) fail(item, why);
      return;
    }
    // W0: the release pairs with the watchdog's claim (W1): members_ and batch_,
    // as written for this batch, are the watchdog's to read once it claims it.
    const std::uint64_t running = flight_word(launched, kRunning);
    if (watched()) flight_.store(running, std::memory_order_release);
    try {
      if (token_batch_) {
        if (token_out_.empty()) token_out_.resize(opts_.max_batch_tokens * hidden_);  // on the first /embed_all
        model_->embed_tokens(batch_, token_out_.data());
      } else {
        model_->embed(batch_, out_.data());
      }
    } catch (const std::exception& e) {
      error = e.what();
      model_errors_.fetch_add(1, std::memory_order_relaxed);
      log::app().error("embedding model failed on a batch of {} sequences: {}", members_.size(), error);
    }
    const std::int64_t computed = now_ns();
    if (!error.empty()) note_fault();
    // Back first or claimed: the CAS and the watchdog's (W1) take the batch once.
    std::uint64_t expected = running;
    const bool claimed =
        watched() && !flight_.compare_exchange_strong(expected, kIdle, std::memory_order_acq_rel,
                                                      std::memory_order_acquire);
    model_ns_.fetch_add(static_cast<std::uint64_t>(computed - launched), std::memory_order_relaxed);
    batches_.fetch_add(1, std::memory_order_relaxed);
    sequences_.fetch_add(members_.size(), std::memory_order_relaxed);
    batch_tokens_.fetch_add(batch_.tokens(), std::memory_order_relaxed);
    std::size_t bucket = 0;
    while ((std::size_t{1} << bucket) < members_.size()) ++bucket;
    batch_sizes_[std::min(bucket, buckets_ - 1)].fetch_add(1, std::memory_order_relaxed);

    if (claimed) {
      // The watchdog has answered this batch's jobs: what the model wrote is
      // nobody's. Wait for it to hand the ring back.
      come_back(launched, computed, error);
      return;
    }
    for (std::size_t m = 0; m < members_.size(); ++m) {
      EmbedJob& job = *members_[m].job;
      if (job.finished.load(std::memory_order_relaxed)) {  // answered already: nothing may write to it
        release(members_[m], false);
        continue;
      }
      if (token_batch_) {
        // The member's rows: its sequence's place in the batch, to its place in the job.
        const std::size_t rows = batch_.starts[m + 1] - batch_.starts[m];
        std::memcpy(job.vectors.data() + std::size_t(job.tokens.starts[members_[m].index]) * hidden_,
                    token_out_.data() + std::size_t(batch_.starts[m]) * hidden_, rows * hidden_ * sizeof(float));
      } else {
        std::memcpy(job.vectors.data() + std::size_t(members_[m].index) * hidden_, out_.data() + m * hidden_,
                    hidden_ * sizeof(float));
      }
      if (!error.empty() && job.error.empty()) job.error = error;
      job.batch_size = members_.size();
      job.batch_tokens = batch_.tokens();
      job.batched_ns = batched;
      job.launched_ns = launched;
      job.computed_ns = computed;
      release(members_[m], false);
    }
  }

  // One of the job's sequences is finished with; the last one calls done
  // (unless some were skipped for a client that went away) and lets it go.
  // Only the batcher calls it (stop() too, after joining it).
  void release(const Item& item, bool skipped) {
    EmbedJob& job = *item.job;
    if (skipped) job.skipped = true;
    if (job.remaining.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    if (!job.skipped) complete(job);
  }

  // Calls done unless someone has: the batcher and the watchdog may both
  // reach a job, and only the first to claim it answers it.
  static void complete(EmbedJob& job) {
    if (job.finished.exchange(true, std::memory_order_acq_rel)) return;
    if (job.done) job.done(job);
  }

  // Answers the job of item unhealthy (503) with why, unless it is answered
  // already or its client has gone. The watchdog while it holds the ring, or
  // the batcher.
  void fail(const Item& item, const std::string& why) {
    EmbedJob& job = *item.job;
    job.remaining.fetch_sub(1, std::memory_order_acq_rel);
    if (job.finished.load(std::memory_order_acquire)) return;
    if (job.abandoned && job.abandoned()) {
      skipped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    if (job.finished.exchange(true, std::memory_order_acq_rel)) return;
    job.error = why;
    job.unhealthy = true;
    unhealthy_jobs_.fetch_add(1, std::memory_order_relaxed);
    if (job.done) job.done(job);
  }

  // After a call threw: a model that can run no more batches makes the
  // service unhealthy for good, with the model's reason.
  void note_fault() {
    std::string why = model_->fault();
    if (why.empty()) return;
    {
      std::lock_guard lock(health_mutex_);
      if (!fault_.empty()) return;
      fault_ = "the embedding model can run no more batches: " + why;
    }
    log::app().error("embedding service: {}; every request gets 503 until the server restarts", why);
    faulted_.store(true, std::memory_order_release);
    unhealthy_.store(true, std::memory_order_seq_cst);
  }

  // The watchdog: sleeps until the batch on the model now is due, and claims
  // one that is still running then. Idle, it wakes once a batch_timeout.
  void watch() {
    const std::int64_t limit = std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.batch_timeout).count();
    std::unique_lock lock(watch_mutex_);
    while (running_.load(std::memory_order_relaxed)) {
      std::uint64_t v = flight_.load(std::memory_order_acquire);
      std::int64_t wake_at = now_ns() + limit;
      if (state(v) == kRunning) {
        const std::int64_t due = launched_at(v) + limit;
        if (now_ns() >= due) {
          // W1: acquire pairs with W0: this batch's members_ are ours to read.
          // A batch that came back first, or a newer one, fails the CAS.
          if (flight_.compare_exchange_strong(v, flight_word(launched_at(v), kStuck), std::memory_order_acq_rel,
                                              std::memory_order_acquire))
            stuck_period(lock, launched_at(v));
          continue;
        }
        wake_at = due;
      }
      watch_cv_.wait_until(lock, std::chrono::steady_clock::time_point(std::chrono::nanoseconds(wake_at)));
    }
  }

  // From the claim of a stuck batch until its call returns (or the service
  // stops): fails its jobs and every job in the ring, refuses new ones
  // (unhealthy_), and is the ring's consumer while the batcher is away.
  void stuck_period(std::unique_lock<std::mutex>& lock, std::int64_t launched) {
    const std::size_t inputs = members_.size(), tokens = batch_.tokens();
    const double ran = seconds(now_ns() - launched);
    const double limit = std::chrono::duration<double>(opts_.batch_timeout).count();
    const std::string why = fmt::format(
        "a batch of {} inputs ({} tokens) has run past the ServiceOptions::batch_timeout of {:g} s on the "
        "embedding model",
        inputs, tokens, limit);
    {
      std::lock_guard health(health_mutex_);
      stuck_reason_ = why;
    }
    timed_out_batches_.fetch_add(1, std::memory_order_relaxed);
    unhealthy_.store(true, std::memory_order_seq_cst);
    // W2: pairs with S1 in submit().
    std::atomic_thread_fence(std::memory_order_seq_cst);
    log::app().error(
        "embedding model: a batch of {} inputs ({} tokens) has run {:.3g} s, past "
        "ServiceOptions::batch_timeout "
        "{:g} s; its requests and those waiting get 503, and /health says so, until it returns",
        inputs, tokens, ran, limit);
    lock.unlock();
    for (const Item& item : members_) fail(item, why);
    // The sequence that did not fit this batch waits outside the ring: it is
    // the watchdog's too until the batcher is back (W3), and then gone.
    if (held_) fail(*held_, why);
    held_.reset();
    drain(why);
    lock.lock();
    while (!batcher_back_ && running_.load(std::memory_order_relaxed)) {
      // Woken by a submit() that slipped in (S1), the batcher's return, or stop().
      watch_cv_.wait_for(lock, opts_.batch_timeout, [&] {
        return drain_requested_ || batcher_back_ || !running_.load(std::memory_order_relaxed);
      });
      drain_requested_ = false;
      lock.unlock();
      drain(why);
      lock.lock();
    }
    if (!batcher_back_) return;  // stopping: stop() drops what is left
    batcher_back_ = false;
    // The batcher noted any fault before it came back: only a fault keeps new jobs out.
    unhealthy_.store(faulted_.load(std::memory_order_acquire), std::memory_order_seq_cst);
    // W3: the release pairs with the batcher's acquire in come_back(): every
    // job this thread touched is done with before the batcher runs again.
    flight_.store(kIdle, std::memory_order_release);
    watch_cv_.notify_all();
  }

  // Fails every job in the ring. Only the watchdog, while the batcher is away.
  void drain(const std::string& why) {
    while (auto item = next(false)) fail(*item, why);
  }

  // The batcher, back from a call the watchdog claimed: hands itself in and
  // waits until the watchdog gives the ring back (W3).
  void come_back(std::int64_t launched, std::int64_t computed, const std::string& error) {
    {
      std::unique_lock lock(watch_mutex_);
      batcher_back_ = true;
      watch_cv_.notify_all();
      watch_cv_.wait(lock, [&] {
        return flight_.load(std::memory_order_acquire) == kIdle || !running_.load(std::memory_order_relaxed);
      });
    }
    const bool faulted = faulted_.load(std::memory_order_acquire);
    const bool stopping = !running_.load(std::memory_order_relaxed);
    // Stopping, the watchdog may be gone without handing back: nothing runs after this batch.
    if (stopping) flight_.store(kIdle, std::memory_order_release);
    log::app().error(
        "embedding model: the batch past ServiceOptions::batch_timeout returned after {:.3g} s{}{}; {}",
        seconds(computed - launched), error.empty() ? "" : " with an error: ", error,
        stopping  ? "stopping"
        : faulted ? "the model has faulted and the service stays unhealthy"
                  : "serving again");
  }

  bool watched() const noexcept { return opts_.batch_timeout.count() > 0; }

  // flight_: the batch on the model now, as its launch time (steady-clock ns,
  // which fits in 62 bits for 146 years of uptime) and a state. A batch's
  // launch time names it: two batches launched in the same nanosecond would
  // be equally late.
  static constexpr std::uint64_t kIdle = 0, kRunning = 1, kStuck = 2, kStateMask = 3;
  static std::uint64_t flight_word(std::int64_t launched, std::uint64_t s) noexcept {
    return (static_cast<std::uint64_t>(launched) << 2) | s;
  }
  static std::uint64_t state(std::uint64_t v) noexcept { return v & kStateMask; }
  static std::int64_t launched_at(std::uint64_t v) noexcept { return static_cast<std::int64_t>(v >> 2); }

  RequestRing<Item> ring_;
  std::size_t hidden_ = 0;
  std::thread thread_;
  std::atomic<bool> running_{false};
  std::atomic<bool> sleeping_{false};
  std::atomic<std::uint32_t> wakeups_{0};
  std::atomic<std::size_t> queued_{0};

  // The watchdog's. flight_ is written by the batcher (Running, then Idle if
  // it is back first) and the watchdog (Stuck, then Idle when it hands back).
  std::thread watchdog_;
  std::atomic<std::uint64_t> flight_{kIdle};
  std::atomic<bool> unhealthy_{false};  // submit() refuses: a batch is stuck, or the model has faulted
  std::atomic<bool> faulted_{false};    // the model has faulted: for good
  std::mutex watch_mutex_;              // the watchdog's sleep, and its handover with the batcher
  std::condition_variable watch_cv_;
  bool batcher_back_ = false;           // under watch_mutex_: the batcher is back from a claimed call
  bool drain_requested_ = false;        // under watch_mutex_: a submit() while unhealthy asks for a drain
  mutable std::mutex health_mutex_;
  std::string stuck_reason_, fault_;    // under health_mutex_
  std::atomic<std::uint64_t> timed_out_batches_{0}, unhealthy_jobs_{0};

  // The batcher's own.
  TokenBatch batch_;
  std::vector<Item> members_;
  // A sequence taken from the ring that did not fit the batch before it: it
  // starts the next one. Written before W0, so a watchdog that claims the
  // batch (W1) fails it with the rest.
  std::optional<Item> held_;
  bool token_batch_ = false;      // batch_ is of token_vectors jobs
  std::vector<float> out_;        // [max_batch][hidden]: pooled vectors
  std::vector<float> token_out_;  // [max_batch_tokens][hidden]: token states, once needed

  std::atomic<std::uint64_t> jobs_{0}, sequences_{0}, batches_{0}, batch_tokens_{0};
  std::atomic<std::uint64_t> rejected_full_{0}, skipped_{0}, model_errors_{0}, model_ns_{0};
  std::unique_ptr<std::atomic<std::uint64_t>[]> batch_sizes_;
  std::size_t buckets_ = 1;
};

EmbeddingService::EmbeddingService(std::unique_ptr<EmbeddingModel> model, WordPieceTokenizer tokenizer,
                                   ServiceOptions options)
    : impl_(std::make_unique<Impl>(std::move(model), std::move(tokenizer), options)) {}
EmbeddingService::~EmbeddingService() = default;
void EmbeddingService::start() { impl_->start(); }
void EmbeddingService::stop() noexcept { impl_->stop(); }
Admission EmbeddingService::submit(std::shared_ptr<EmbedJob> job) { return impl_->submit(std::move(job)); }
const WordPieceTokenizer& EmbeddingService::tokenizer() const noexcept { return impl_->tokenizer_; }
const ModelInfo& EmbeddingService::model_info() const noexcept { return impl_->model_->info(); }
const ServiceOptions& EmbeddingService::options() const noexcept { return impl_->opts_; }
ServiceStats EmbeddingService::stats() const { return impl_->stats(); }
EmbeddingService::Health EmbeddingService::health() const { return impl_->health(); }
std::vector<std::uint64_t> EmbeddingService::batch_size_histogram() const { return impl_->histogram(); }

}  // namespace ferry::infer
