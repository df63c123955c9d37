// The safetensors reader (src/infer/model/safetensors.cpp) on any bytes: a
// model file comes from wherever the user downloaded it.
//
// Input: the whole file. Beside ASan/UBSan, it checks what a parse that
// succeeds promises the weights loader: every tensor's bytes lie inside the
// input's data section, hold exactly product(shape) * dtype size bytes, no two
// tensors share a byte, and F32/F16/BF16 tensors convert to f32 (any other
// dtype is refused with ferry::Error). A parse may throw only ferry::Error.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "ferry/core/status.h"
#include "fuzz_check.h"
#include "infer/model/safetensors.h"

using ferry::infer::copy_as_f32;
using ferry::infer::Dtype;
using ferry::infer::dtype_size;
using ferry::infer::SafetensorsView;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  SafetensorsView view;
  try {
    view = SafetensorsView::parse(file, "fuzz");
  } catch (const ferry::Error&) {
    return 0;
  }
  FUZZ_CHECK(size >= 8);
  std::uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = (header << 8) | data[i];
  const std::byte* data_begin = file.data() + 8 + header;
  const std::byte* data_end = file.data() + size;

  std::vector<std::pair<const std::byte*, const std::byte*>> ranges;
  for (const auto& [name, t] : view.tensors()) {
    std::size_t elements = 1;
    for (std::size_t d : t.shape) elements *= d;  // the parser refused overflow, so no wrap here
    FUZZ_CHECK(elements == t.elements);
    FUZZ_CHECK(t.data.size() == elements * dtype_size(t.dtype));
    if (!t.data.empty()) {
      FUZZ_CHECK(t.data.data() >= data_begin && t.data.data() + t.data.size() <= data_end);
      ranges.emplace_back(t.data.data(), t.data.data() + t.data.size());
    }
    std::vector<float> out(t.elements);
    const bool is_float = t.dtype == Dtype::F32 || t.dtype == Dtype::F16 || t.dtype == Dtype::BF16;
    try {
      copy_as_f32(t, out);
      FUZZ_CHECK(is_float);
    } catch (const ferry::Error&) {
      FUZZ_CHECK(!is_float);
    }
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i) FUZZ_CHECK(ranges[i - 1].second <= ranges[i].first);
  return 0;
}
