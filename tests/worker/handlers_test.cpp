// The cooperative handler forms (used by GPU warps) must compute exactly what
// the serial forms compute, for every size and any group size.

#include "ferry/worker/handlers.h"

#include "ferry/worker/builtin_handlers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace ferry::worker {
namespace {

template <typename Handler>
void check_cooperative_matches_serial(Handler h) {
  std::mt19937 rng(5);
  alignas(16) std::uint8_t in[1056];
  alignas(16) std::uint8_t serial[1056];
  alignas(16) std::uint8_t coop[1056];
  for (std::size_t n : {0u, 1u, 2u, 15u, 16u, 17u, 64u, 252u, 255u, 1024u, 1040u}) {
    for (unsigned group : {1u, 3u, 32u}) {
      for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<std::uint8_t>(rng());
      std::fill(std::begin(serial), std::end(serial), 0xAA);
      std::fill(std::begin(coop), std::end(coop), 0x55);  // different poison: unwritten bytes show
      const std::size_t a = h(ByteView{in, n}, MutableByteView{serial, sizeof(serial)});
      std::size_t b = 0;
      for (unsigned rank = 0; rank < group; ++rank) b = h(ByteView{in, n}, MutableByteView{coop, sizeof(coop)}, rank, group);
      ASSERT_EQ(a, b);
      for (std::size_t i = 0; i < a; ++i) ASSERT_EQ(serial[i], coop[i]) << "n=" << n << " group=" << group << " i=" << i;
    }
  }
}

TEST(Handlers, ReverseReverses) {
  const std::uint8_t in[] = {1, 2, 3};
  std::uint8_t out[3];
  ASSERT_EQ(Reverse{}(ByteView{in, 3}, MutableByteView{out, 3}), 3u);
  EXPECT_EQ(out[0], 3);
  EXPECT_EQ(out[2], 1);
}

TEST(Handlers, ReverseCooperativeMatchesSerial) { check_cooperative_matches_serial(Reverse{}); }
TEST(Handlers, EchoCooperativeMatchesSerial) { check_cooperative_matches_serial(Echo{}); }

TEST(Handlers, MacSwapSwapsTheAddressesOnly) {
  std::uint8_t frame[20];
  for (std::uint8_t i = 0; i < 20; ++i) frame[i] = i;
  std::uint8_t out[20] = {};
  ASSERT_EQ(MacSwap{}(ByteView{frame, 20}, MutableByteView{out, 20}), 20u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(out[i], frame[i + 6]);
    EXPECT_EQ(out[i + 6], frame[i]);
  }
  for (int i = 12; i < 20; ++i) EXPECT_EQ(out[i], frame[i]);
  std::uint8_t runt[5] = {1, 2, 3, 4, 5}, runt_out[5] = {};
  ASSERT_EQ(MacSwap{}(ByteView{runt, 5}, MutableByteView{runt_out, 5}), 5u);
  EXPECT_EQ(runt_out[0], 1) << "too short to carry two addresses: unchanged";
}

// The packet path swaps each frame in place, serially (CPU) or a warp's lanes at once.
TEST(Handlers, MacSwapWorksInPlaceSeriallyAndByAGroup) {
  for (unsigned group : {1u, 4u, 32u}) {
    std::uint8_t frame[64];
    for (std::uint8_t i = 0; i < 64; ++i) frame[i] = static_cast<std::uint8_t>(100 + i);
    std::size_t n = 0;
    for (unsigned rank = 0; rank < group; ++rank)
      n = MacSwap{}(ByteView{frame, 64}, MutableByteView{frame, 64}, rank, group);
    ASSERT_EQ(n, 64u);
    for (int i = 0; i < 6; ++i) {
      EXPECT_EQ(frame[i], 106 + i) << "group " << group;
      EXPECT_EQ(frame[i + 6], 100 + i) << "group " << group;
    }
    for (int i = 12; i < 64; ++i) EXPECT_EQ(frame[i], 100 + i) << "group " << group;
  }
}

TEST(Handlers, MacSwapCooperativeMatchesSerial) { check_cooperative_matches_serial(MacSwap{}); }

TEST(Handlers, NamesParse) {
  WorkerOptions cpu;
  for (std::string_view name : {"reverse", "echo", "macswap", "stall"}) {
    EXPECT_NE(make_builtin_backend(name, cpu), nullptr) << name;
    EXPECT_NE(std::find(builtin_handler_names().begin(), builtin_handler_names().end(), name),
              builtin_handler_names().end())
        << name;
  }
  EXPECT_NE(make_builtin_backend("macswap", cpu)->describe().find("handler macswap"), std::string::npos);
  EXPECT_THROW(make_builtin_backend("upper", cpu), Error);
}

}  // namespace
}  // namespace ferry::worker
