#pragma once
// The flags that put an embedding model behind `ferry http` (--model and the
// batching knobs), and the service they describe.

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "ferry/infer/service.h"

namespace ferry::app {

struct EmbeddingFlags {
  std::string model_dir;  // empty: no model
  std::string device;     // cpu or cuda; empty: as the workers' backend
  std::string precision = "f16";
  std::string gelu;  // tanh or exact; empty: the device's default
  std::string sha256 = "minilm";
  std::string pooling;  // mean, cls or last-token; empty: the folder's 1_Pooling/config.json
  int gpu = 0;
  int threads = 0;
  long max_wait_us = 0;
  long spin_us = 50;
  double batch_timeout_s = 5;
  infer::ServiceOptions service;
};

void add_embedding_flags(CLI::App& sub, EmbeddingFlags& flags);

// Null when no --model was given. Throws ferry::Error (a model that cannot be loaded).
std::shared_ptr<infer::EmbeddingService> make_embedding_service(EmbeddingFlags& flags, bool cuda_workers);

}  // namespace ferry::app
