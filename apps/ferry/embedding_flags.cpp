#include "embedding_flags.h"

#include <cmath>

#include "core/log.h"
#include "ferry/core/status.h"
#include "ferry/infer/bert.h"
#include "general_flags.h"

namespace ferry::app {

void add_embedding_flags(CLI::App& sub, EmbeddingFlags& f) {
  sub.add_option("--model", f.model_dir,
                 "Serve embeddings from this BERT model folder (config.json, model.safetensors, vocab.txt), e.g. "
                 "all-MiniLM-L6-v2 as scripts/fetch-model.sh unpacks it; without it the embedding APIs answer 503");
  sub.add_option("--model-device", f.device, "Where the model runs: cpu or cuda (default: as --backend)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  sub.add_option("--precision", f.precision, "cuda model: f16, bf16 or f32 (f32 accumulation in every case)")
      ->check(CLI::IsMember({"f16", "bf16", "f32"}))
      ->capture_default_str();
  sub.add_option("--gelu", f.gelu,
                 "The feed-forward GELU: tanh (within 5e-4 of exact; on the GPU it runs in the matrix product's "
                 "epilogue, as TEI's does) or exact (erf, as BERT was trained; on the GPU one more kernel per "
                 "layer). Default: tanh on the GPU, exact on the CPU")
      ->check(CLI::IsMember({"tanh", "exact"}));
  sub.add_option("--model-gpu", f.gpu, "cuda model: device ordinal")->capture_default_str();
  sub.add_option("--model-threads", f.threads, "cpu model: threads, each running its share of the rows (0: one per core)")->capture_default_str();
  sub.add_option("--model-sha256", f.sha256,
                 "Expected sha256 of model.safetensors: 'minilm' (all-MiniLM-L6-v2's), a hex digest, or 'none'")
      ->capture_default_str();
  sub.add_option("--pooling", f.pooling,
                 "How a sequence's token states become its vector (TEI's --pooling): mean, cls or last-token "
                 "(default: as the model folder's 1_Pooling/config.json says, else mean); /info reports it")
      ->check(CLI::IsMember({"mean", "cls", "last-token", "last_token"}));
  sub.add_option("--queue-slots", f.service.queue_slots,
                 "Inputs waiting for a batch at most; beyond, requests get 429 with Retry-After")
      ->check(at_least(1))
      ->capture_default_str();
  sub.add_option("--max-batch", f.service.max_batch, "Inputs in one model batch at most")
      ->check(at_least(1))
      ->capture_default_str();
  sub.add_option("--max-batch-tokens", f.service.max_batch_tokens, "Tokens in one model batch at most")
      ->capture_default_str();
  sub.add_option("--max-wait-us", f.max_wait_us,
                 "Microseconds a batch may wait to fill after its first input (0: run what is queued)")
      ->check(duration_check("microseconds"))
      ->capture_default_str();
  sub.add_option(
         "--max-tokens", f.service.max_tokens,
         "Tokens of one input, [CLS] and [SEP] included; longer inputs are cut (TEI: 413 unless truncate)")
      ->check(at_least(2))
      ->capture_default_str();
  sub.add_option("--batch-timeout", f.batch_timeout_s,
                 "Seconds a model call may run; a batch past it is a fault: its requests, and those waiting or "
                 "arriving until it returns, get 503 and /health reports it (0: no deadline)")
      ->check(duration_check("seconds"))
      ->capture_default_str();
  sub.add_option("--batcher-cpu", f.service.cpu, "Core to pin the batcher thread to (-1: unpinned)")
      ->capture_default_str();
  sub.add_option("--batcher-spin-us", f.spin_us,
                 "Microseconds an idle batcher polls before it sleeps: longer saves a lone request its wake-up "
                 "(~14 us) at the cost of a busy core")
      ->check(duration_check("microseconds"))
      ->capture_default_str();
}

std::shared_ptr<infer::EmbeddingService> make_embedding_service(EmbeddingFlags& f, bool cuda_workers) {
  if (f.model_dir.empty()) return nullptr;
  f.service.max_wait = std::chrono::microseconds(f.max_wait_us);
  f.service.spin = std::chrono::microseconds(f.spin_us);
  // Rounded up: a deadline under a millisecond is still one.
  f.service.batch_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(f.batch_timeout_s * 1e3)));
  infer::BertOptions b;
  b.model_dir = f.model_dir;
  b.expected_sha256 = f.sha256 == "minilm" ? infer::kMiniLmSha256 : f.sha256 == "none" ? "" : f.sha256;
  b.cuda = f.device.empty() ? cuda_workers : f.device == "cuda";
  b.gpu = f.gpu;
  b.precision = f.precision == "f32" ? infer::Precision::F32
                : f.precision == "bf16" ? infer::Precision::BF16
                                        : infer::Precision::F16;
  if (!f.gelu.empty()) b.gelu = f.gelu == "exact" ? infer::Gelu::Exact : infer::Gelu::Tanh;
  b.cpu_threads = f.threads;
  if (!f.pooling.empty()) b.pooling = infer::pooling_from_name(f.pooling);
  b.max_batch = f.service.max_batch;
  b.max_batch_tokens = f.service.max_batch_tokens;
  auto model = infer::make_bert_model(b);
  auto tokenizer = infer::WordPieceTokenizer::load(f.model_dir + "/vocab.txt");
  log::app().info("embedding model {} on {} ({}, {} GELU, {} dims); batches of up to {} inputs / {} tokens, wait {} us, "
                  "queue {} inputs",
                  model->info().name, model->info().device, model->info().precision,
                  infer::gelu_name(b.gelu.value_or(b.cuda ? infer::Gelu::Tanh : infer::Gelu::Exact)), model->info().hidden,
                  f.service.max_batch, f.service.max_batch_tokens, f.max_wait_us, f.service.queue_slots);
  return std::make_shared<infer::EmbeddingService>(std::move(model), std::move(tokenizer), f.service);
}

}  // namespace ferry::app
