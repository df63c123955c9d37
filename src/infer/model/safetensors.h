#pragma once
// A reader of the safetensors format (Hugging Face's tensor file), over bytes
// already in memory (a MappedFile). The file comes from wherever the user got
// the model, so every field is checked before it is used.
//
//   +----------------+---------------------------+-----------------------------+
//   | u64 LE: N      | N bytes of JSON header    | data: tensors' bytes        |
//   +----------------+---------------------------+-----------------------------+
//   header: {"NAME": {"dtype": "F32", "shape": [d0, d1, ...],
//                     "data_offsets": [begin, end]}, ...,
//            "__metadata__": {"key": "value", ...}}   (optional)
//   begin and end count from the start of the data; end - begin is
//   product(shape) * the dtype's size; tensors do not overlap.

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::infer {

// Every dtype the format defines: a file may hold tensors Ferry never reads
// (BERT checkpoints often carry an I64 "position_ids" buffer).
enum class Dtype { Bool, U8, I8, F8E5M2, F8E4M3, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64 };

const char* dtype_name(Dtype d) noexcept;
std::size_t dtype_size(Dtype d) noexcept;

struct TensorView {
  Dtype dtype = Dtype::F32;
  std::vector<std::size_t> shape;   // empty: a scalar
  std::size_t elements = 0;         // product(shape)
  std::span<const std::byte> data;  // elements * dtype_size(dtype) bytes, not aligned
};

// The largest header accepted, as the reference implementation's limit: a
// header is a few KiB even for large models, so more means a hostile file.
inline constexpr std::uint64_t kMaxSafetensorsHeader = 100'000'000;

class SafetensorsView {
 public:
  // Parses and checks the header of a whole file held in memory; file must
  // outlive the view. name says where the bytes came from in error messages.
  // Throws ferry::Error naming the first problem found.
  static SafetensorsView parse(std::span<const std::byte> file, const std::string& name);

  // nullptr if the file has no tensor of that name.
  const TensorView* find(std::string_view tensor) const noexcept;
  const std::map<std::string, TensorView, std::less<>>& tensors() const noexcept { return tensors_; }

 private:
  std::map<std::string, TensorView, std::less<>> tensors_;
};

// Writes the tensor's F32, F16 or BF16 values as f32 to out, which must hold
// exactly t.elements floats. Throws ferry::Error for any other dtype or size.
void copy_as_f32(const TensorView& t, std::span<float> out);

}  // namespace ferry::infer
