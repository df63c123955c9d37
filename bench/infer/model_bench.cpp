// ferry-model-bench: the embedding model's own throughput and latency, with
// no tokenizer or server around it. For each sequence length L and batch size
// B it builds B sequences of exactly L ids ([CLS], random ordinary-vocabulary
// ids, [SEP]), warms up (on CUDA the second call of a shape captures its
// graph), then calls embed() back to back for --seconds and reports
// sentences/s, tokens/s and the median and 99th-percentile milliseconds per
// batch. embed() is synchronous, so wall-clock time around it is the whole
// cost: staging, copies, the forward pass and the copy back. With --callers N,
// N threads call at once (the CUDA model gets N lanes): while one call copies
// and synchronises, another's kernels run, as torch.compile's calls enqueued
// back to back overlap (st_baseline.py's compile-stream).
//
// With --lengths-file it measures mixed lengths instead: the file's batches,
// one a line, each sequence of its own length and unpadded (as the server
// batches them). Every batch is warmed up, then the whole sequence of batches
// is called in order, pass after pass, until --seconds have passed, so each
// batch weighs the same as in st_baseline.py --mixed, which writes the file
// and pads each batch to its longest sequence for PyTorch.
//
//   ferry-model-bench [--model DIR] [--device cpu|cuda] [--precision f16|bf16|f32] [--gelu tanh|exact]
//                     [--batches 1,8,32,128] [--lengths 32,128] [--callers 1] [--seconds 2] [--json FILE]
//   ferry-model-bench --lengths-file FILE [--seconds 2] [--json FILE] ...
//
// bench/infer/st_baseline.py measures PyTorch (eager and torch.compile) and
// sentence-transformers on the same shapes, and runs this for the ratio.

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
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
// Mixed lengths: every batch of the file is called this many times before the
// timed passes (on CUDA the second call of a shape captures its graph).
constexpr int kWarmupPasses = 3;

struct Row {
  std::size_t length = 0;
  std::size_t batch = 0;
  std::size_t callers = 1;
  std::size_t calls = 0;
  double sentences_per_s = 0;
  double tokens_per_s = 0;
  double p50_ms = 0;
  double p99_ms = 0;
};

Precision parse_precision(const std::string& s) {
  if (s == "f16") return Precision::F16;
  if (s == "bf16") return Precision::BF16;
  if (s == "f32") return Precision::F32;
  throw ferry::Error("--precision " + s + ": expected f16, bf16 or f32");
}

// One sequence per entry of lengths, each [CLS], random ids, [SEP].
TokenBatch make_batch(const std::vector<std::size_t>& lengths, std::size_t vocab, std::mt19937& rng) {
  // Ids from 1000 up skip [PAD], [UNK], [CLS], [SEP], [MASK] and the unused slots.
  std::uniform_int_distribution<std::int32_t> word(1000, static_cast<std::int32_t>(vocab) - 1);
  TokenBatch b;
  std::vector<std::int32_t> ids;
  for (const std::size_t length : lengths) {
    ids.resize(length);
    for (auto& id : ids) id = word(rng);
    ids.front() = kCls;
    if (length > 1) ids.back() = kSep;
    b.add(ids);
  }
  return b;
}

// The batches of a --lengths-file: one a line, its sequences' lengths in
// tokens separated by commas or spaces; blank lines and '#' comments are
// skipped. Throws ferry::Error naming the line of a value that is not a
// positive integer (main() checks them against the model's max_positions).
std::vector<std::vector<std::size_t>> read_lengths_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw ferry::Error("--lengths-file " + path + ": cannot open it");
  std::vector<std::vector<std::size_t>> batches;
  std::string line;
  for (int n = 1; std::getline(f, line); ++n) {
    line = line.substr(0, line.find('#'));
    std::replace(line.begin(), line.end(), ',', ' ');
    std::istringstream words(line);
    std::vector<std::size_t> lengths;
    for (std::string w; words >> w;) {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(w.c_str(), &end, 10);
      if (*end != '\0' || v == 0)
        throw ferry::Error("--lengths-file " + path + " line " + std::to_string(n) + ": '" + w +
                           "' is not a positive length");
      lengths.push_back(static_cast<std::size_t>(v));
    }
    if (!lengths.empty()) batches.push_back(std::move(lengths));
  }
  if (batches.empty()) throw ferry::Error("--lengths-file " + path + ": no batch in it");
  return batches;
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// Calls embed(b) back to back from `callers` threads at once for `seconds`
// (after a warm-up from each), and returns every call's milliseconds and the
// seconds from the start to the last call's end.
std::pair<std::vector<double>, double> call_back_to_back(EmbeddingModel& model, const TokenBatch& b,
                                                         std::size_t callers, double seconds) {
  std::vector<std::vector<double>> ms(callers);
  std::vector<Clock::time_point> ends(callers);
  std::vector<std::string> errors(callers);
  std::barrier start_line(static_cast<std::ptrdiff_t>(callers));
  Clock::time_point start;
  std::vector<std::thread> threads;
  for (std::size_t c = 0; c < callers; ++c) {
    threads.emplace_back([&, c] {
      try {
        std::vector<float> out(b.size() * model.info().hidden);
        for (int i = 0; i < kWarmupCalls; ++i) model.embed(b, out.data());
        start_line.arrive_and_wait();
        if (c == 0) start = Clock::now();
        start_line.arrive_and_wait();
        const auto deadline = start + std::chrono::duration<double>(seconds);
        auto now = start;
        do {
          const auto t0 = Clock::now();
          model.embed(b, out.data());
          now = Clock::now();
          ms[c].push_back(std::chrono::duration<double, std::milli>(now - t0).count());
        } while (now < deadline);
        ends[c] = now;
      } catch (const std::exception& e) {
        errors[c] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors)
    if (!e.empty()) throw ferry::Error(e);
  std::vector<double> all;
  for (const auto& m : ms) all.insert(all.end(), m.begin(), m.end());
  const auto last = *std::max_element(ends.begin(), ends.end());
  return {std::move(all), std::chrono::duration<double>(last - start).count()};
}

Row measure(EmbeddingModel& model, std::size_t length, std::size_t batch, std::size_t callers, double seconds,
            std::mt19937& rng) {
  const TokenBatch b = make_batch(std::vector<std::size_t>(batch, length), model.info().vocab, rng);
  const auto [ms, elapsed] = call_back_to_back(model, b, callers, seconds);
  Row r;
  r.length = length;
  r.batch = batch;
  r.callers = callers;
  r.calls = ms.size();
  r.sentences_per_s = static_cast<double>(batch * ms.size()) / elapsed;
  r.tokens_per_s = static_cast<double>(batch * length * ms.size()) / elapsed;
  r.p50_ms = percentile(ms, 0.50);
  r.p99_ms = percentile(ms, 0.99);
  return r;
}

struct MixedRow {
  std::size_t batches = 0;  // in the file
  std::size_t passes = 0;   // over all of them, timed
  std::size_t calls = 0;
  std::size_t sentences = 0, tokens = 0;  // per pass
  double sentences_per_s = 0;
  double tokens_per_s = 0;  // real tokens: there is no padding
  double p50_ms = 0;
  double p99_ms = 0;
};

// The file's batches, in order, whole passes until seconds have passed.
MixedRow measure_mixed(EmbeddingModel& model, const std::vector<std::vector<std::size_t>>& lengths, double seconds,
                       std::mt19937& rng) {
  std::vector<TokenBatch> batches;
  MixedRow r;
  std::size_t most = 0;
  for (const auto& l : lengths) {
    batches.push_back(make_batch(l, model.info().vocab, rng));
    r.sentences += batches.back().size();
    r.tokens += batches.back().tokens();
    most = std::max(most, batches.back().size());
  }
  r.batches = batches.size();
  std::vector<float> out(most * model.info().hidden);
  for (int i = 0; i < kWarmupPasses; ++i)
    for (const auto& b : batches) model.embed(b, out.data());
  std::vector<double> ms;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration<double>(seconds);
  auto now = start;
  do {
    for (const auto& b : batches) {
      const auto t0 = Clock::now();
      model.embed(b, out.data());
      now = Clock::now();
      ms.push_back(std::chrono::duration<double, std::milli>(now - t0).count());
    }
    ++r.passes;
  } while (now < deadline);
  const double elapsed = std::chrono::duration<double>(now - start).count();
  r.calls = ms.size();
  r.sentences_per_s = static_cast<double>(r.sentences * r.passes) / elapsed;
  r.tokens_per_s = static_cast<double>(r.tokens * r.passes) / elapsed;
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
  std::string gelu;  // empty: the model's default for the device
  std::vector<std::size_t> batches{1, 8, 32, 128};
  std::vector<std::size_t> lengths{32, 128};
  double seconds = 2.0;
  int threads = 0;
  std::size_t callers = 1;
  std::string json_path;
  std::string lengths_file;
  app.add_option("--model", model_dir, "the model's folder (config.json, model.safetensors)");
  app.add_option("--device", device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--precision", precision, "f16, bf16 or f32 (cuda only; the CPU computes in f32)")
      ->check(CLI::IsMember({"f16", "bf16", "f32"}));
  app.add_option("--gelu", gelu, "tanh (fused into the product on cuda) or exact (erf); default: tanh on cuda, exact on cpu")
      ->check(CLI::IsMember({"tanh", "exact"}));
  app.add_option("--batches", batches, "batch sizes, comma-separated")->delimiter(',');
  app.add_option("--lengths", lengths,
                 "sequence lengths in tokens, [CLS] and [SEP] included, comma-separated")
      ->delimiter(',');
  app.add_option("--lengths-file", lengths_file,
                 "mixed lengths instead of --batches x --lengths: one batch a line, its sequences' lengths "
                 "in tokens ([CLS] and [SEP] included), comma- or space-separated, run unpadded "
                 "(st_baseline.py --mixed writes it)");
  app.add_option("--seconds", seconds, "timed seconds per shape (with --lengths-file: at least, in whole passes)")
      ->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "the CPU model's threads (0: one per core)");
  app.add_option(
         "--callers", callers,
         "uniform shapes: threads calling embed() at once, and the CUDA model's lanes (each call's copies "
         "and synchronise overlap another's kernels); 1: one call at a time, each synchronised")
      ->check(CLI::Range(1, 16));
  app.add_option("--json", json_path, "write the rows as JSON to this file");
  CLI11_PARSE(app, argc, argv);

  try {
    if (batches.empty() || lengths.empty())
      throw ferry::Error("--batches and --lengths need at least one value");
    BertOptions options;
    options.model_dir = model_dir;
    options.cuda = device == "cuda";
    options.precision = parse_precision(precision);
    if (!gelu.empty()) options.gelu = gelu == "exact" ? ferry::infer::Gelu::Exact : ferry::infer::Gelu::Tanh;
    options.cpu_threads = threads;
    options.lanes = callers;
    std::vector<std::vector<std::size_t>> mixed;
    if (!lengths_file.empty()) {
      mixed = read_lengths_file(lengths_file);
      lengths.clear();
      for (const auto& b : mixed) {
        options.max_batch = std::max(options.max_batch, b.size());
        std::size_t tokens = 0;
        for (const std::size_t l : b) tokens += l;
        options.max_batch_tokens = std::max(options.max_batch_tokens, tokens);
        lengths.insert(lengths.end(), b.begin(), b.end());
      }
    } else {
      options.max_batch = *std::max_element(batches.begin(), batches.end());
      options.max_batch_tokens = options.max_batch * *std::max_element(lengths.begin(), lengths.end());
    }
    const auto model = ferry::infer::make_bert_model(options);
    const auto& info = model->info();
    if (model->concurrency() < callers)
      throw ferry::Error("--callers " + std::to_string(callers) + ": this model runs " +
                         std::to_string(model->concurrency()) + " call(s) at once (the CPU model runs one)");
    for (const std::size_t l : lengths)
      if (l == 0 || l > info.max_positions)
        throw ferry::Error((lengths_file.empty() ? "--lengths " : "--lengths-file: length ") + std::to_string(l) +
                           ": must be 1.." + std::to_string(info.max_positions));
    const nlohmann::json head{{"bench", "ferry-model-bench"}, {"model", info.name}, {"device", info.device},
                              {"precision", info.precision},
                              {"gelu", gelu_name(options.gelu.value_or(options.cuda ? ferry::infer::Gelu::Tanh : ferry::infer::Gelu::Exact))}, {"seconds", seconds}};
    std::mt19937 rng(18);

    if (!mixed.empty()) {
      std::printf("ferry-model-bench: %s on %s, %s, %zu batches of mixed lengths from %s, unpadded, %.1f s\n",
                  info.name.c_str(), info.device.c_str(), info.precision.c_str(), mixed.size(),
                  lengths_file.c_str(), seconds);
      const MixedRow r = measure_mixed(*model, mixed, seconds, rng);
      std::printf("%14s %12s %10s %10s %8s %8s\n", "sentences/s", "tokens/s", "p50 ms", "p99 ms", "calls", "passes");
      std::printf("%14.0f %12.0f %10.3f %10.3f %8zu %8zu\n", r.sentences_per_s, r.tokens_per_s, r.p50_ms, r.p99_ms,
                  r.calls, r.passes);
      if (!json_path.empty()) {
        nlohmann::json j = head;
        j["mixed"] = {{"lengths_file", lengths_file},
                      {"batches", r.batches},
                      {"sentences_per_pass", r.sentences},
                      {"tokens_per_pass", r.tokens},
                      {"passes", r.passes},
                      {"calls", r.calls},
                      {"sentences_per_s", r.sentences_per_s},
                      {"tokens_per_s", r.tokens_per_s},
                      {"p50_ms", r.p50_ms},
                      {"p99_ms", r.p99_ms}};
        std::ofstream f(json_path);
        f << j.dump(2) << "\n";
        if (!f) throw ferry::Error("cannot write " + json_path);
      }
      return 0;
    }

    std::printf("ferry-model-bench: %s on %s, %s, %.1f s per shape, %zu caller(s) at once\n",
                info.name.c_str(), info.device.c_str(), info.precision.c_str(), seconds, callers);
    std::printf("%8s %8s %14s %12s %10s %10s %8s\n", "length", "batch", "sentences/s", "tokens/s", "p50 ms",
                "p99 ms", "calls");
    nlohmann::json rows = nlohmann::json::array();
    for (const std::size_t length : lengths) {
      for (const std::size_t batch : batches) {
        const Row r = measure(*model, length, batch, callers, seconds, rng);
        std::printf("%8zu %8zu %14.0f %12.0f %10.3f %10.3f %8zu\n", r.length, r.batch, r.sentences_per_s,
                    r.tokens_per_s, r.p50_ms, r.p99_ms, r.calls);
        std::fflush(stdout);
        rows.push_back({{"length", r.length},
                        {"batch", r.batch},
                        {"callers", r.callers},
                        {"sentences_per_s", r.sentences_per_s},
                        {"tokens_per_s", r.tokens_per_s},
                        {"p50_ms", r.p50_ms},
                        {"p99_ms", r.p99_ms},
                        {"calls", r.calls}});
      }
    }
    if (!json_path.empty()) {
      nlohmann::json j = head;
      j["rows"] = rows;
      std::ofstream f(json_path);
      f << j.dump(2) << "\n";
      if (!f) throw ferry::Error("cannot write " + json_path);
    }
  } catch (const ferry::Error& e) {
    std::fprintf(stderr, "ferry-model-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
