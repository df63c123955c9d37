#include "ferry/core/control_link.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "ferry/core/arena.h"

namespace ferry {
namespace {

std::string unique_name(const char* what) { return std::string("test-") + what + "-" + std::to_string(getpid()); }

TEST(ControlLink, ConsumerIdExchangeCarriesTheArena) {
  const std::string name = unique_name("exchange");
  const int lfd = ControlLink::listen(name);
  Arena arena = Arena::create(ArenaParams{}, "test");
  arena.header()->creator_pid = 4242;

  std::thread orchestrator([&] {
    auto link = ControlLink::try_connect(name);
    ASSERT_TRUE(link.has_value());
    link->send(wire::MsgId::ExchangeConsumerIdRequest, 7, arena.fd());
    auto reply = link->recv(5000);
    ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(reply->id, wire::MsgId::ExchangeConsumerIdResponse);
    EXPECT_EQ(reply->value, 8u);
  });
  ControlLink server = ControlLink::accept(lfd);
  auto m = server.recv(5000);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->id, wire::MsgId::ExchangeConsumerIdRequest);
  EXPECT_EQ(m->value, 7u);
  ASSERT_GE(m->fd, 0);
  Arena received = Arena::attach(m->fd);
  EXPECT_EQ(received.header()->creator_pid, 4242u) << "the same memory, mapped twice";
  server.send(wire::MsgId::ExchangeConsumerIdResponse, 8);
  orchestrator.join();
  close(lfd);
}

TEST(ControlLink, ShutdownMessagesAndErrors) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  ControlLink a(sv[0]), b(sv[1]);
  a.send(wire::MsgId::StartShutdown);
  a.send_error(wire::ErrorCode::ConfigMismatch, "flags differ");
  auto m1 = b.recv(1000);
  ASSERT_TRUE(m1);
  EXPECT_EQ(m1->id, wire::MsgId::StartShutdown);
  auto m2 = b.recv(1000);
  ASSERT_TRUE(m2);
  EXPECT_EQ(m2->id, wire::MsgId::FerryError);
  EXPECT_EQ(m2->value, static_cast<std::uint32_t>(wire::ErrorCode::ConfigMismatch));
  EXPECT_EQ(m2->text, "flags differ");
  EXPECT_FALSE(b.recv(10).has_value()) << "timeout, not an error";
  a.close();
  EXPECT_THROW(b.recv(1000), Error) << "a closed peer is reported";
}

TEST(ControlLink, GarbageIsAnError) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  ControlLink b(sv[1]);
  const std::uint8_t bad[8] = {0, 0, 0, 8, 0, 0, 0, 99};  // unknown msg_id
  ASSERT_EQ(write(sv[0], bad, 8), 8);
  EXPECT_THROW(b.recv(1000), Error);
  const std::uint8_t huge[8] = {0x7f, 0, 0, 0, 0, 0, 0, 0};  // absurd wire_size
  ASSERT_EQ(write(sv[0], huge, 8), 8);
  EXPECT_THROW(b.recv(1000), Error);
  close(sv[0]);
}

// The pure halves recv() and send() use (fuzz/control_link_fuzz.cpp drives them too).
TEST(ControlLink, DecodeTakesExactlyTheDefinedMessagesAndEncodeWritesThemBack) {
  const auto u8 = [](const std::string& s) { return reinterpret_cast<const std::uint8_t*>(s.data()); };
  const std::string request = ControlLink::encode(wire::MsgId::ExchangeConsumerIdRequest, 7);
  ASSERT_EQ(request.size(), 12u);
  ASSERT_EQ(ControlLink::body_size(u8(request)), 4u);
  const ControlMessage m = ControlLink::decode(u8(request), u8(request) + 8, 4);
  EXPECT_EQ(m.id, wire::MsgId::ExchangeConsumerIdRequest);
  EXPECT_EQ(m.value, 7u);
  EXPECT_EQ(m.fd, -1);
  EXPECT_THROW(ControlLink::decode(u8(request), u8(request) + 8, 3), Error) << "not the header's length";

  const std::string error = wire::encode_error(wire::ErrorCode::NotAllowed, "uid 1000");
  const ControlMessage e = ControlLink::decode(u8(error), u8(error) + 8, ControlLink::body_size(u8(error)));
  EXPECT_EQ(e.id, wire::MsgId::FerryError);
  EXPECT_EQ(e.value, static_cast<std::uint32_t>(wire::ErrorCode::NotAllowed));
  EXPECT_EQ(e.text, "uid 1000");

  const std::uint8_t shutdown_with_body[12] = {0, 0, 0, 12, 0, 0, 0, 0, 1, 2, 3, 4};
  EXPECT_THROW(ControlLink::decode(shutdown_with_body, shutdown_with_body + 8, 4), Error);
  const std::uint8_t too_small[8] = {0, 0, 0, 7, 0, 0, 0, 0};
  EXPECT_THROW(ControlLink::body_size(too_small), Error);
  const std::uint8_t too_large[8] = {0, 0, 0x10, 1, 0, 0, 0, 64};  // 4097
  EXPECT_THROW(ControlLink::body_size(too_large), Error);
  EXPECT_EQ(ControlLink::encode(wire::MsgId::StartShutdown), std::string("\0\0\0\x08\0\0\0\0", 8));
}

TEST(ControlLink, NameInUseAndNobodyListening) {
  const std::string name = unique_name("busy");
  EXPECT_FALSE(ControlLink::try_connect(name).has_value());
  const int lfd = ControlLink::listen(name);
  EXPECT_THROW(ControlLink::listen(name), Error);
  close(lfd);
}

}  // namespace
}  // namespace ferry
