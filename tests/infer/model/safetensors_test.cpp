// The safetensors reader on files built here, well-formed and hostile, and
// the sha256 helper on known digests.
#include "infer/model/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ferry/core/status.h"
#include "infer/model/safetensors_writer.h"
#include "infer/model/sha256.h"

namespace ferry::infer {
namespace {

using test::f32_bytes;
using test::frame;
using test::RawTensor;
using test::safetensors_file;
using test::u16_bytes;

std::span<const std::byte> as_bytes(const std::vector<std::uint8_t>& v) {
  return {reinterpret_cast<const std::byte*>(v.data()), v.size()};
}

// Parses file and expects a ferry::Error whose message contains `expected`.
void expect_rejected(const std::vector<std::uint8_t>& file, const std::string& expected) {
  try {
    (void)SafetensorsView::parse(as_bytes(file), "test.safetensors");
    ADD_FAILURE() << "parsed, expected an error containing: " << expected;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << "message: " << e.what();
  }
}

std::vector<std::uint8_t> one_tensor(const std::string& entry_json, std::size_t data_bytes) {
  return frame(R"({"t":)" + entry_json + "}", std::vector<std::uint8_t>(data_bytes, 0));
}

TEST(Sha256, KnownDigests) {
  EXPECT_EQ(sha256_hex({}), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const std::string abc = "abc";
  EXPECT_EQ(sha256_hex({reinterpret_cast<const std::byte*>(abc.data()), abc.size()}),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Safetensors, ReadsShapesOffsetsAndEveryFloatType) {
  const auto file = safetensors_file({
      RawTensor{"a", "F32", {2, 2}, f32_bytes({1.0f, -2.5f, 3.0f, 1e-3f})},
      // f16: 1, -2, 0.5, the smallest subnormal (2^-24), inf
      RawTensor{"b", "F16", {5}, u16_bytes({0x3c00, 0xc000, 0x3800, 0x0001, 0x7c00})},
      RawTensor{"c", "BF16", {1, 2}, u16_bytes({0x3f80, 0xc0a0})},  // 1, -5
      RawTensor{"ids", "I64", {1, 3}, std::vector<std::uint8_t>(24, 0)},
      RawTensor{"empty", "F32", {0, 7}, {}},
      RawTensor{"scalar", "F32", {}, f32_bytes({42.0f})},
  });
  const auto view = SafetensorsView::parse(as_bytes(file), "test");
  ASSERT_EQ(view.tensors().size(), 6u);
  EXPECT_EQ(view.find("missing"), nullptr);

  const TensorView* a = view.find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->shape, (std::vector<std::size_t>{2, 2}));
  std::vector<float> out(4);
  copy_as_f32(*a, out);
  EXPECT_EQ(out, (std::vector<float>{1.0f, -2.5f, 3.0f, 1e-3f}));

  const TensorView* b = view.find("b");
  ASSERT_NE(b, nullptr);
  out.resize(5);
  copy_as_f32(*b, out);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_EQ(out[2], 0.5f);
  EXPECT_EQ(out[3], std::ldexp(1.0f, -24));
  EXPECT_EQ(out[4], std::numeric_limits<float>::infinity());

  out.resize(2);
  copy_as_f32(*view.find("c"), out);
  EXPECT_EQ(out, (std::vector<float>{1.0f, -5.0f}));

  EXPECT_EQ(view.find("ids")->dtype, Dtype::I64);
  std::vector<float> three(3);
  EXPECT_THROW(copy_as_f32(*view.find("ids"), three), Error);
  EXPECT_THROW(copy_as_f32(*a, three), Error);  // room for 3 floats, the tensor has 4
  EXPECT_EQ(view.find("empty")->elements, 0u);
  EXPECT_EQ(view.find("scalar")->elements, 1u);
}

TEST(Safetensors, RejectsBadFraming) {
  expect_rejected({1, 2, 3}, "too short");
  // A header length beyond the file: the file was cut inside its header.
  auto cut = safetensors_file({RawTensor{"a", "F32", {1}, f32_bytes({1.0f})}});
  cut.resize(20);
  expect_rejected(cut, "runs past the file");
  std::vector<std::uint8_t> huge(16, 0);
  huge[7] = 0x80;  // 2^63
  expect_rejected(huge, "exceeds the");
  expect_rejected(frame("{not json", {}), "not valid JSON");
  expect_rejected(frame("[1, 2]", {}), "not a JSON object");
  expect_rejected(frame(R"({"__metadata__": 3})", {}), "__metadata__");
  expect_rejected(frame(R"({"__metadata__": {"k": 1}})", {}), "is not a string");
}

TEST(Safetensors, RejectsBadTensorEntries) {
  expect_rejected(one_tensor("7", 0), "not a JSON object");
  expect_rejected(one_tensor(R"({"shape": [1], "data_offsets": [0, 4]})", 4), "no \"dtype\"");
  expect_rejected(one_tensor(R"({"dtype": "F31", "shape": [1], "data_offsets": [0, 4]})", 4),
                  "unknown dtype");
  expect_rejected(one_tensor(R"({"dtype": "F32", "data_offsets": [0, 4]})", 4), "no \"shape\"");
  expect_rejected(one_tensor(R"({"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]})", 4),
                  "non-negative");
  expect_rejected(one_tensor(R"({"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]})", 4),
                  "non-negative");
  expect_rejected(one_tensor(R"({"dtype": "F32", "shape": [1]})", 4), "data_offsets");
  expect_rejected(one_tensor(R"({"dtype": "F32", "shape": [1], "data_offsets": [0]})", 4), "data_offsets");
  expect_rejected(one_tensor(R"({"dtype": "F32", "shape": [1], "data_offsets": [4, 0]})", 4), "end before");
  // The data ends before the tensor does: a truncated download.
  expect_rejected(one_tensor(R"({"dtype": "F32", "shape": [2], "data_offsets": [0, 8]})", 4), "truncated");
  expect_rejected(one_tensor(R"({"dtype": "F32", "shape": [2], "data_offsets": [0, 4]})", 4), "need 8");
  // 2^32 * 2^32 elements wraps to 0 in 64 bits: must not match the empty range.
  expect_rejected(
      one_tensor(R"({"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]})", 0),
      "overflows");
  expect_rejected(
      one_tensor(R"({"dtype": "F64", "shape": [4611686018427387904], "data_offsets": [0, 0]})", 0),
      "overflows");
  expect_rejected(
      one_tensor(R"({"dtype": "F32", "shape": [1], "data_offsets": [0, 18446744073709551616]})", 4),
      "non-negative");
}

TEST(Safetensors, RejectsOverlappingTensors) {
  const std::string header = R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                 "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})";
  expect_rejected(frame(header, std::vector<std::uint8_t>(12, 0)), "overlap");
}

}  // namespace
}  // namespace ferry::infer
