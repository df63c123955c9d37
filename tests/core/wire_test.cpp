#include "ferry/core/wire.h"

#include <gtest/gtest.h>

#include <vector>

namespace ferry::wire {
namespace {

std::vector<std::uint8_t> frame(std::uint32_t wire_size, std::uint32_t id, std::uint32_t len, std::size_t body) {
  std::vector<std::uint8_t> f(12 + body, 'x');
  store_be32(f.data(), wire_size);
  store_be32(f.data() + 4, id);
  store_be32(f.data() + 8, len);
  return f;
}

FrameCheck check(const std::vector<std::uint8_t>& f, std::size_t avail, std::uint32_t* len = nullptr) {
  std::uint32_t l = 0, s = 0;
  const FrameCheck c = check_request(f.data(), avail, 256, &l, &s);
  if (len != nullptr) *len = l;
  return c;
}

TEST(Wire, HeaderIsBigEndian) {
  std::uint8_t b[12];
  EXPECT_EQ(encode_data_prefix(b, 5, MsgId::ClientRequest), 17u);
  EXPECT_EQ(b[0], 0);
  EXPECT_EQ(b[3], 17);
  EXPECT_EQ(b[7], 4);
  EXPECT_EQ(b[11], 5);
  EXPECT_EQ(load_be32(b), 17u);
}

TEST(Wire, AcceptsAWholeRequest) {
  auto f = frame(17, 4, 5, 5);
  std::uint32_t len = 0;
  EXPECT_EQ(check(f, f.size(), &len), FrameCheck::Ok);
  EXPECT_EQ(len, 5u);
  EXPECT_EQ(check(f, 16), FrameCheck::NeedMore);
  EXPECT_EQ(check(f, 7), FrameCheck::NeedMore);
}

TEST(Wire, ZeroLengthPayloadIsValid) {
  auto f = frame(12, 4, 0, 0);
  EXPECT_EQ(check(f, f.size()), FrameCheck::Ok);
}

TEST(Wire, RejectsMalformedHeadersAsSoonAsTheyArrive) {
  EXPECT_EQ(check(frame(11, 4, 0, 0), 8), FrameCheck::WireSizeTooSmall);
  EXPECT_EQ(check(frame(8 + 257, 4, 253, 0), 8), FrameCheck::MessageTooLarge) << "refused before the body";
  EXPECT_EQ(check(frame(8 + 256, 4, 252, 252), 8 + 256), FrameCheck::Ok) << "exactly the maximum";
  EXPECT_EQ(check(frame(17, 5, 5, 5), 8), FrameCheck::UnexpectedMsgId);
  EXPECT_EQ(check(frame(17, 0, 5, 5), 17), FrameCheck::UnexpectedMsgId);
  EXPECT_EQ(check(frame(17, 4, 6, 5), 12), FrameCheck::LengthMismatch);
}

TEST(Wire, ErrorMessageCarriesCodeAndReason) {
  const std::string e = encode_error(ErrorCode::MessageTooLarge, "too big");
  const auto* p = reinterpret_cast<const std::uint8_t*>(e.data());
  EXPECT_EQ(load_be32(p), e.size());
  EXPECT_EQ(load_be32(p + 4), static_cast<std::uint32_t>(MsgId::FerryError));
  EXPECT_EQ(load_be32(p + 8), static_cast<std::uint32_t>(ErrorCode::MessageTooLarge));
  EXPECT_EQ(e.substr(12), "too big");
}

}  // namespace
}  // namespace ferry::wire
