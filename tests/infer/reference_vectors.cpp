#include "reference_vectors.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "ferry/core/status.h"

namespace ferry::infer::test {
namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* env = std::getenv(name);
  return env != nullptr && *env != '\0' ? env : fallback;
}

std::string reference_dir() { return env_or("FERRY_REFERENCE_DIR", FERRY_REFERENCE_DIR); }

}  // namespace

std::string model_dir() { return env_or("FERRY_MODEL_DIR", FERRY_MODEL_DIR); }

Reference load_reference() {
  const std::string dir = reference_dir();
  std::ifstream json_in(dir + "/sentences.json");
  if (!json_in) throw Error("cannot read " + dir + "/sentences.json: run make_reference.py there");
  const auto doc = nlohmann::json::parse(json_in);
  Reference r;
  r.dims = doc.at("dims").get<std::size_t>();
  for (const auto& item : doc.at("items")) {
    r.texts.push_back(item.at("text").get<std::string>());
    r.ids.push_back(item.at("ids").get<std::vector<std::int32_t>>());
  }
  if (r.ids.size() != doc.at("count").get<std::size_t>()) throw Error("sentences.json: count differs from items");
  r.embeddings.resize(r.ids.size() * r.dims);
  std::ifstream f32_in(dir + "/embeddings.f32", std::ios::binary);
  f32_in.read(reinterpret_cast<char*>(r.embeddings.data()), static_cast<std::streamsize>(r.embeddings.size() * 4));
  if (!f32_in || f32_in.peek() != EOF) throw Error(dir + "/embeddings.f32 does not hold count * dims floats");
  return r;
}

std::vector<float> load_reference_vectors(const std::string& name, const Reference& ref) {
  const std::string path = reference_dir() + "/" + name;
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::vector<float> v(ref.ids.size() * ref.dims);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * 4));
  if (!in || in.peek() != EOF) throw Error(path + " does not hold count * dims floats");
  return v;
}

double cosine(std::span<const float> a, std::span<const float> b) {
  double ab = 0, aa = 0, bb = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    ab += static_cast<double>(a[i]) * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

}  // namespace ferry::infer::test
