// The agent protocol's encoding: every message round-trips, and truncated or
// hostile bodies are refused instead of read out of bounds.
#include <gtest/gtest.h>

#include <cstring>

#include "ferry/core/status.h"
#include "xfer/wire/messages.h"

namespace ferry::xfer::proto {
namespace {

std::string body_of(const std::string& frame) { return frame.substr(kFrameHeader); }

TEST(XferProtocol, TransferRoundTripsWithEveryField) {
  TransferMsg m;
  m.request = 77;
  m.op = XferOp::Read;
  const std::string binary_key("\0binary\xff key", 12);
  m.descs.push_back({3, 4096, 65536, "model@1@0@deadbeef@bf16"});
  m.descs.push_back({4, 0, 1, binary_key});
  const std::string body = body_of(encode(m));  // the decoded keys view it
  TransferMsg back;
  ASSERT_TRUE(decode(body, &back));
  EXPECT_EQ(back.request, 77u);
  EXPECT_EQ(back.op, XferOp::Read);
  ASSERT_EQ(back.descs.size(), 2u);
  EXPECT_EQ(back.descs[0].offset, 4096u);
  EXPECT_EQ(back.descs[0].len, 65536u);
  EXPECT_EQ(back.descs[0].key, "model@1@0@deadbeef@bf16");
  EXPECT_EQ(back.descs[1].key, binary_key);
}

TEST(XferProtocol, EveryTruncationOfAMessageIsRefused) {
  TransferDone d;
  d.request = 5;
  d.status = XferStatus::NotFound;
  d.results.push_back({XferStatus::NotFound, 0, "", "'k': not found"});
  d.results.push_back({XferStatus::Ok, 10, "dram:1GiB", ""});
  const std::string body = body_of(encode(d));
  TransferDone back;
  ASSERT_TRUE(decode(body, &back));
  EXPECT_EQ(back.results[1].tier, "dram:1GiB");
  for (std::size_t cut = 0; cut < body.size(); ++cut) {
    TransferDone t;
    EXPECT_FALSE(decode(std::string_view(body).substr(0, cut), &t)) << "accepted a body cut at " << cut;
  }
  EXPECT_FALSE(decode(body + "x", &back)) << "trailing bytes must be refused too";
}

// The per-key answers of exists and remove: round trip, truncation, and a flag
// that is neither 0 nor 1 refused (it would not encode back to the same bytes).
TEST(XferProtocol, PerKeyAnswersRoundTripAndOnlyZeroOrOneIsAnAnswer) {
  CallReply r;
  r.call = 9;
  r.count = 2;
  r.found = {1, 0, 1};
  const std::string body = body_of(encode(Type::ExistsReply, r));
  CallReply back;
  ASSERT_TRUE(decode(Type::ExistsReply, body, &back));
  EXPECT_EQ(back.call, 9u);
  EXPECT_EQ(back.count, 2u);
  EXPECT_EQ(back.found, (std::vector<std::uint8_t>{1, 0, 1}));
  for (std::size_t cut = 0; cut < body.size(); ++cut) {
    CallReply t;
    EXPECT_FALSE(decode(Type::ExistsReply, std::string_view(body).substr(0, cut), &t)) << "cut at " << cut;
  }
  std::string bad = body;
  bad.back() = '\x02';
  CallReply t;
  EXPECT_FALSE(decode(Type::ExistsReply, bad, &t));

  CallMsg ask;
  ask.call = 9;
  ask.keys = {"a", "b", "c"};
  CallMsg ask_back;
  ASSERT_TRUE(decode(Type::Exists, body_of(encode(Type::Exists, ask)), &ask_back));
  EXPECT_EQ(ask_back.keys, ask.keys);
  EXPECT_STREQ(to_string(Type::Exists), "exists");
  EXPECT_STREQ(to_string(Type::ExistsReply), "exists_reply");
}

TEST(XferProtocol, AHostileCountDoesNotAllocateBeforeTheBodyRunsOut) {
  Encoder e;
  e.u64(1);
  e.u8(0);
  e.u32(0xffffffffu);  // four billion descriptors claimed, none present
  TransferMsg m;
  EXPECT_FALSE(decode(body_of(e.frame(Type::Transfer)), &m));
}

TEST(XferProtocol, RegisterCarriesTheIpcHandleExactly) {
  RegisterMsg r;
  r.call = 9;
  r.type = MemType::Vram;
  r.len = 1 << 20;
  r.reach = Reach::CudaIpc;
  r.offset = 512;
  for (std::size_t i = 0; i < sizeof(r.ipc_handle); ++i) r.ipc_handle[i] = static_cast<std::uint8_t>(i * 7);
  RegisterMsg back;
  ASSERT_TRUE(decode(body_of(encode(r)), &back));
  EXPECT_EQ(back.reach, Reach::CudaIpc);
  EXPECT_EQ(back.offset, 512u);
  EXPECT_EQ(0, std::memcmp(back.ipc_handle, r.ipc_handle, sizeof(r.ipc_handle)));
}

TEST(XferProtocol, EndpointsParseAndBadOnesSayWhatIsAccepted) {
  EXPECT_EQ(Endpoint::parse("unix:ferry.agent").name, "ferry.agent");
  const Endpoint t = Endpoint::parse("tcp:127.0.0.1:7000");
  EXPECT_TRUE(t.tcp);
  EXPECT_EQ(t.port, 7000);
  EXPECT_EQ(t.to_string(), "tcp:127.0.0.1:7000");
  for (const char* bad : {"", "unix:", "tcp:host", "tcp::80", "tcp:h:99999", "tcp:h:x", "http://x"}) {
    try {
      Endpoint::parse(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("unix:NAME"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace ferry::xfer::proto
