// ferry-model-bench: the embedding model's own throughput and latency, with
// no tokenizer or server around it. For each sequence length L and batch size
// B it builds B sequences of exactly L ids ([CLS], random ordinary-vocabulary
// ids, [SEP]), warms up (on CUDA the second call of a shape captures its
// graph), then calls embed() back to back for --seconds and reports
// sentences/s and the median and 99th-percentile milliseconds per batch.
// embed() is synchronous, so wall-clock time around it is the whole cost:
// staging, copies, the forward pass and the copy back.
//
//   ferry-model-bench [--model DIR] [--device cpu|cuda] [--precision f16|bf16|f32]
//                     [--batches 1,8,32,128] [--lengths 32,128] [--seconds 2] [--json FILE]
//
// bench/infer/st_baseline.py measures sentence-transformers on the same shapes.

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "ferry/core/status.h"
#include "ferry/infer/bert.h"
#include "ferry/infer/model.h"

namespace {

using ferry::infer::BertOptions;
using ferry::infer::EmbeddingModel;
using ferry::infer::Precision;
using ferry::infer::TokenBatch;
using Clock = std::chrono::steady_clock;

constexpr std::int32_t kCls = 101;
constexpr std::int32_t kSep = 102;
constexpr int kWarmupCalls = 5;

struct Row {
  std::size_t length = 0;
  std::size_t batch = 0;
  std::size_t calls = 0;
  double sentences_per_s = 0;
  double p50_ms = 0;
  double p99_ms = 0;
};

Precision parse_precision(const std::string& s) {
  if (s == "f16") return Precision::F16;
  if (s == "bf16") return Precision::BF16;
  if (s == "f32") return Precision::F32;
  throw ferry::Error("--precision " + s + ": expected f16, bf16 or f32");
}

TokenBatch make_batch(std::size_t length, std::size_t batch, std::size_t vocab, std::mt19937& rng) {
  // Ids from 1000 up skip [PAD], [UNK], [CLS], [SEP], [MASK] and the unused slots.
  std::uniform_int_distribution<std::int32_t> word(1000, static_cast<std::int32_t>(vocab) - 1);
  TokenBatch b;
  std::vector<std::int32_t> ids(length);
  for (std::size_t s = 0; s < batch; ++s) {
    for (auto& id : ids) id = word(rng);
    ids.front() = kCls;
    if (length > 1) ids.back() = kSep;
    b.add(ids);
  }
  return b;
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

Row measure(EmbeddingModel& model, std::size_t length, std::size_t batch, double seconds, std::mt19937& rng) {
  const TokenBatch b = make_batch(length, batch, model.info().vocab, rng);
  std::vector<float> out(batch * model.info().hidden);
  for (int i = 0; i < kWarmupCalls; ++i) model.embed(b, out.data());
  std::vector<double> ms;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration<double>(seconds);
  auto now = start;
  do {
    const auto t0 = Clock::now();
    model.embed(b, out.data());
    now = Clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(now - t0).count());
  } while (now < deadline);
  const double elapsed = std::chrono::duration<double>(now - start).count();
  Row r;
  r.length = length;
  r.batch = batch;
  r.calls = ms.size();
  r.sentences_per_s = static_cast<double>(batch * ms.size()) / elapsed;
  r.p50_ms = percentile(ms, 0.50);
  r.p99_ms = percentile(ms, 0.99);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ferry-model-bench: the embedding model's sentences/s and ms per batch"};
  std::string model_dir;
  if (const char* env = std::getenv("FERRY_MODEL_DIR"); env != nullptr && *env != '\0')
    model_dir = env;
  else
    model_dir = FERRY_MODEL_DIR;
  std::string device = "cuda";
  std::string precision = "f16";
  std::vector<std::size_t> batches{1, 8, 32, 128};
  std::vector<std::size_t> lengths{32, 128};
  double seconds = 2.0;
  int threads = 0;
  std::string json_path;
  app.add_option("--model", model_dir, "the model's folder (config.json, model.safetensors)");
  app.add_option("--device", device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--precision", precision, "f16, bf16 or f32 (cuda only; the CPU computes in f32)")
      ->check(CLI::IsMember({"f16", "bf16", "f32"}));
  app.add_option("--batches", batches, "batch sizes, comma-separated")->delimiter(',');
  app.add_option("--lengths", lengths,
                 "sequence lengths in tokens, [CLS] and [SEP] included, comma-separated")
      ->delimiter(',');
  app.add_option("--seconds", seconds, "timed seconds per shape")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "the CPU model's threads (0: one per core)");
  app.add_option("--json", json_path, "write the rows as JSON to this file");
  CLI11_PARSE(app, argc, argv);

  try {
    if (batches.empty() || lengths.empty())
      throw ferry::Error("--batches and --lengths need at least one value");
    BertOptions options;
    options.model_dir = model_dir;
    options.cuda = device == "cuda";
    options.precision = parse_precision(precision);
    options.cpu_threads = threads;
    options.max_batch = *std::max_element(batches.begin(), batches.end());
    options.max_batch_tokens = options.max_batch * *std::max_element(lengths.begin(), lengths.end());
    const auto model = ferry::infer::make_bert_model(options);
    const auto& info = model->info();
    for (const std::size_t l : lengths)
      if (l == 0 || l > info.max_positions)
        throw ferry::Error("--lengths " + std::to_string(l) + ": must be 1.." +
                           std::to_string(info.max_positions));

    std::printf("ferry-model-bench: %s on %s, %s, %.1f s per shape\n", info.name.c_str(), info.device.c_str(),
                info.precision.c_str(), seconds);
    std::printf("%8s %8s %14s %10s %10s %8s\n", "length", "batch", "sentences/s", "p50 ms", "p99 ms",
                "calls");
    std::mt19937 rng(18);
    nlohmann::json rows = nlohmann::json::array();
    for (const std::size_t length : lengths) {
      for (const std::size_t batch : batches) {
        const Row r = measure(*model, length, batch, seconds, rng);
        std::printf("%8zu %8zu %14.0f %10.3f %10.3f %8zu\n", r.length, r.batch, r.sentences_per_s, r.p50_ms,
                    r.p99_ms, r.calls);
        std::fflush(stdout);
        rows.push_back({{"length", r.length},
                        {"batch", r.batch},
                        {"sentences_per_s", r.sentences_per_s},
                        {"p50_ms", r.p50_ms},
                        {"p99_ms", r.p99_ms},
                        {"calls", r.calls}});
      }
    }
    if (!json_path.empty()) {
      std::ofstream f(json_path);
      f << nlohmann::json{{"bench", "ferry-model-bench"}, {"model", info.name}, {"device", info.device},
                          {"precision", info.precision},  {"seconds", seconds}, {"rows", rows}}
               .dump(2)
        << "\n";
      if (!f) throw ferry::Error("cannot write " + json_path);
    }
  } catch (const ferry::Error& e) {
    std::fprintf(stderr, "ferry-model-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
