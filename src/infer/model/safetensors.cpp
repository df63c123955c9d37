#include "infer/model/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "ferry/core/status.h"

namespace ferry::infer {

// The format is little-endian throughout; F32 tensors are copied as they lie.
static_assert(std::endian::native == std::endian::little, "safetensors reading assumes a little-endian host");

namespace {

struct DtypeInfo {
  Dtype dtype;
  const char* name;
  std::size_t size;
};

constexpr DtypeInfo kDtypes[] = {
    {Dtype::Bool, "BOOL", 1},      {Dtype::U8, "U8", 1},          {Dtype::I8, "I8", 1},
    {Dtype::F8E5M2, "F8_E5M2", 1}, {Dtype::F8E4M3, "F8_E4M3", 1}, {Dtype::I16, "I16", 2},
    {Dtype::U16, "U16", 2},        {Dtype::F16, "F16", 2},        {Dtype::BF16, "BF16", 2},
    {Dtype::I32, "I32", 4},        {Dtype::U32, "U32", 4},        {Dtype::F32, "F32", 4},
    {Dtype::F64, "F64", 8},        {Dtype::I64, "I64", 8},        {Dtype::U64, "U64", 8},
};

const DtypeInfo* dtype_info(Dtype d) noexcept {
  for (const auto& info : kDtypes)
    if (info.dtype == d) return &info;
  return nullptr;
}

std::uint64_t read_le64(const std::byte* p) noexcept {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<std::uint64_t>(p[i]);
  return v;
}

// Reads a non-negative JSON integer; nlohmann keeps negative ones as
// number_integer and those beyond u64 as floats, so both fail here.
std::uint64_t unsigned_field(const nlohmann::json& v, const std::string& what) {
  if (!v.is_number_unsigned()) throw Error(what + " is not a non-negative integer");
  return v.get<std::uint64_t>();
}

TensorView parse_tensor(const std::string& name, const nlohmann::json& entry, std::span<const std::byte> data,
                        const std::string& where) {
  const std::string what = where + ": tensor \"" + name + "\"";
  if (!entry.is_object()) throw Error(what + " is not a JSON object");

  TensorView t;
  auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string()) throw Error(what + " has no \"dtype\" string");
  const auto& dtype_text = dtype->get_ref<const std::string&>();
  const DtypeInfo* info = nullptr;
  for (const auto& d : kDtypes)
    if (dtype_text == d.name) info = &d;
  if (info == nullptr) throw Error(what + " has an unknown dtype \"" + dtype_text + "\"");
  t.dtype = info->dtype;

  auto shape = entry.find("shape");
  if (shape == entry.end() || !shape->is_array()) throw Error(what + " has no \"shape\" array");
  // Products are checked for overflow, so that a huge shape cannot wrap around
  // to the size of a small byte range.
  std::size_t elements = 1;
  for (const auto& dim : *shape) {
    const std::uint64_t d = unsigned_field(dim, what + "'s shape entry");
    if (d != 0 && elements > std::numeric_limits<std::size_t>::max() / d)
      throw Error(what + "'s shape overflows a 64-bit element count");
    t.shape.push_back(d);
    elements *= d;
  }
  if (elements > std::numeric_limits<std::size_t>::max() / info->size)
    throw Error(what + "'s shape overflows a 64-bit byte count");
  t.elements = elements;

  auto offsets = entry.find("data_offsets");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2)
    throw Error(what + " has no \"data_offsets\" pair");
  const std::uint64_t begin = unsigned_field((*offsets)[0], what + "'s data_offsets[0]");
  const std::uint64_t end = unsigned_field((*offsets)[1], what + "'s data_offsets[1]");
  if (begin > end)
    throw Error(what + "'s data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                "] end before they begin");
  if (end > data.size())
    throw Error(what + "'s data_offsets end at " + std::to_string(end) + ", past the " +
                std::to_string(data.size()) + " data bytes the file holds (truncated file?)");
  if (end - begin != elements * info->size)
    throw Error(what + " holds " + std::to_string(end - begin) + " bytes but its shape and dtype need " +
                std::to_string(elements * info->size));
  t.data = data.subspan(begin, end - begin);
  return t;
}

void check_metadata(const nlohmann::json& metadata, const std::string& where) {
  if (!metadata.is_object()) throw Error(where + ": \"__metadata__\" is not a JSON object");
  for (const auto& [key, value] : metadata.items())
    if (!value.is_string()) throw Error(where + ": \"__metadata__\" entry \"" + key + "\" is not a string");
}

// Two tensors sharing bytes would let one write (were the file ever written
// back) or one misread alias another: the format forbids it.
void check_no_overlap(const std::map<std::string, TensorView, std::less<>>& tensors,
                      const std::string& where) {
  std::vector<std::pair<const std::byte*, const std::string*>> starts;
  for (const auto& [name, t] : tensors)
    if (!t.data.empty()) starts.emplace_back(t.data.data(), &name);
  std::sort(starts.begin(), starts.end());
  for (std::size_t i = 1; i < starts.size(); ++i) {
    const TensorView& prev = tensors.find(*starts[i - 1].second)->second;
    if (prev.data.data() + prev.data.size() > starts[i].first)
      throw Error(where + ": tensors \"" + *starts[i - 1].second + "\" and \"" + *starts[i].second +
                  "\" overlap");
  }
}

float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exponent = (h >> 10) & 0x1fu;
  std::uint32_t mantissa = h & 0x3ffu;
  std::uint32_t bits;
  if (exponent == 0x1f) {  // inf or NaN: keep the payload
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {  // normal: rebias 15 -> 127
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {  // signed zero
    bits = sign;
  } else {  // subnormal half: a normal float once the leading 1 is shifted up
    exponent = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

}  // namespace

const char* dtype_name(Dtype d) noexcept {
  const DtypeInfo* info = dtype_info(d);
  return info != nullptr ? info->name : "?";
}

std::size_t dtype_size(Dtype d) noexcept {
  const DtypeInfo* info = dtype_info(d);
  return info != nullptr ? info->size : 0;
}

SafetensorsView SafetensorsView::parse(std::span<const std::byte> file, const std::string& name) {
  if (file.size() < 8)
    throw Error(name + ": " + std::to_string(file.size()) +
                " bytes, too short for a safetensors file (an 8-byte header length comes first)");
  const std::uint64_t header_size = read_le64(file.data());
  if (header_size > kMaxSafetensorsHeader)
    throw Error(name + ": header length " + std::to_string(header_size) + " exceeds the " +
                std::to_string(kMaxSafetensorsHeader) + "-byte limit (not a safetensors file?)");
  if (header_size > file.size() - 8)
    throw Error(name + ": header length " + std::to_string(header_size) + " runs past the file's " +
                std::to_string(file.size()) + " bytes (truncated file?)");
  const auto header_bytes = file.subspan(8, header_size);
  const auto data = file.subspan(8 + header_size);

  const auto* text = reinterpret_cast<const char*>(header_bytes.data());
  const nlohmann::json header =
      nlohmann::json::parse(text, text + header_bytes.size(), /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) throw Error(name + ": the header is not valid JSON");
  if (!header.is_object()) throw Error(name + ": the header is not a JSON object");

  SafetensorsView view;
  for (const auto& [key, entry] : header.items()) {
    if (key == "__metadata__") {
      check_metadata(entry, name);
      continue;
    }
    view.tensors_.emplace(key, parse_tensor(key, entry, data, name));
  }
  check_no_overlap(view.tensors_, name);
  return view;
}

const TensorView* SafetensorsView::find(std::string_view tensor) const noexcept {
  auto it = tensors_.find(tensor);
  return it != tensors_.end() ? &it->second : nullptr;
}

void copy_as_f32(const TensorView& t, std::span<float> out) {
  if (out.size() != t.elements)
    throw Error("copy_as_f32: " + std::to_string(t.elements) + " elements into room for " +
                std::to_string(out.size()));
  const std::byte* p = t.data.data();
  switch (t.dtype) {
    case Dtype::F32:
      if (!out.empty()) std::memcpy(out.data(), p, out.size() * sizeof(float));
      return;
    case Dtype::F16:
      for (std::size_t i = 0; i < out.size(); ++i) {
        std::uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);  // unaligned: offsets need not be multiples of 2
        out[i] = half_to_float(h);
      }
      return;
    case Dtype::BF16:
      // bf16 is the top half of an f32.
      for (std::size_t i = 0; i < out.size(); ++i) {
        std::uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
      }
      return;
    default:
      throw Error(std::string("tensor of dtype ") + dtype_name(t.dtype) +
                  ": Ferry reads F32, F16 and BF16 weights only");
  }
}

}  // namespace ferry::infer
