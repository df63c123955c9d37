#pragma once
// What the embedding tests compare against: all-MiniLM-L6-v2's folder, and
// sentence-transformers' own vectors for 240 sentences
// (tests/infer/fixtures/reference/, made by make_reference.py there).

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ferry::infer::test {

// $FERRY_MODEL_DIR, else the build's FERRY_MODEL_DIR.
std::string model_dir();

struct Reference {
  std::size_t dims = 0;
  std::vector<std::string> texts;
  std::vector<std::vector<std::int32_t>> ids;  // the reference tokenizer's, cut at 256
  std::vector<float> embeddings;               // texts.size() rows of dims, L2-normalised
  std::span<const float> vector(std::size_t i) const { return {embeddings.data() + i * dims, dims}; }
};

// From $FERRY_REFERENCE_DIR (where the binary runs from a copy, as on the GPU
// machine), else the source tree's. Throws ferry::Error if it cannot be read whole.
Reference load_reference();

// Another vector file of the reference folder (as embeddings.f32: ref's
// count rows of dims little-endian floats), e.g. embeddings_cls.f32. Empty when
// the file does not exist; throws ferry::Error when it holds another size.
std::vector<float> load_reference_vectors(const std::string& name, const Reference& ref);

double cosine(std::span<const float> a, std::span<const float> b);

}  // namespace ferry::infer::test
