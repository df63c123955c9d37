#pragma once
// Builds safetensors files for the tests: a header from named tensors, their
// bytes packed back to back, and helpers to put a small BERT model on disk.

#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace ferry::infer::test {

struct RawTensor {
  std::string name;
  std::string dtype;  // "F32", "F16", "BF16", "I64", ...
  std::vector<std::size_t> shape;
  std::vector<std::uint8_t> bytes;
};

inline std::vector<std::uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<std::uint8_t> b(v.size() * 4);
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

inline std::vector<std::uint8_t> u16_bytes(const std::vector<std::uint16_t>& v) {
  std::vector<std::uint8_t> b(v.size() * 2);
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// The 8-byte length, the JSON header as given, then data.
inline std::vector<std::uint8_t> frame(const std::string& header, const std::vector<std::uint8_t>& data) {
  std::vector<std::uint8_t> file(8);
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) file[i] = static_cast<std::uint8_t>(n >> (8 * i));
  file.insert(file.end(), header.begin(), header.end());
  file.insert(file.end(), data.begin(), data.end());
  return file;
}

// A well-formed file holding tensors in the order given.
inline std::vector<std::uint8_t> safetensors_file(const std::vector<RawTensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::vector<std::uint8_t> data;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data.insert(data.end(), t.bytes.begin(), t.bytes.end());
  }
  return frame(header.dump(), data);
}

inline void write_file(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

}  // namespace ferry::infer::test
