#include "ferry/core/arena.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

namespace ferry {
namespace {

ArenaParams params(std::uint32_t channels) {
  ArenaParams p;
  p.num_channels = channels;
  p.max_concurrent_messages = 100;  // rounds up to 128
  p.max_message_length = 256;
  return p;
}

TEST(Arena, GeometryFollowsTheFlags) {
  Arena a = Arena::create(params(3), "test");
  EXPECT_EQ(a.num_channels(), 3u);
  EXPECT_EQ(a.header()->ring_capacity, 128u);
  EXPECT_EQ(a.header()->slot_size, 256u) << "252 payload bytes, rounded up to 16";
  EXPECT_EQ(Arena::slot_size_for(4), 16u) << "an empty payload and its check word";
  EXPECT_EQ(Arena::slot_size_for(68), 80u) << "64 bytes and a check word after them";
  EXPECT_EQ(Arena::slot_size_for(4 + kCheckedPayloadMax + 1), 128u) << "too long for a check word";
  EXPECT_THROW(Arena::slot_size_for(3), Error);
  EXPECT_THROW(Arena::ring_capacity_for(0), Error);
  EXPECT_THROW(Arena::create(params(0), "test"), Error);
}

TEST(Arena, SecondMappingSeesTheSameChannels) {
  Arena a = Arena::create(params(2), "test");
  Arena b = Arena::attach(dup(a.fd()));
  ASSERT_EQ(b.num_channels(), 2u);
  RingProducer p(a.channel(1).requests);
  RingConsumer c(b.channel(1).requests);
  const std::uint8_t msg[] = {1, 2, 3};
  ASSERT_EQ(p.try_push({msg, 3}, 77), Status::Ok);
  SlotMessage got;
  ASSERT_TRUE(c.try_peek(&got));
  EXPECT_EQ(got.cookie, 77u);
  EXPECT_EQ(std::memcmp(got.payload.data, msg, 3), 0);
  EXPECT_THROW(b.channel(2), Error);
}

TEST(Arena, AttachRejectsCorruptHeaders) {
  Arena a = Arena::create(params(1), "test");
  a.header()->version = 7;
  EXPECT_THROW(Arena::attach(dup(a.fd())), Error);
  a.header()->version = kArenaVersion;
  a.header()->num_channels = 1000;  // would run past the memfd
  EXPECT_THROW(Arena::attach(dup(a.fd())), Error);
  a.header()->num_channels = 1;
  a.channel(0).header->magic = 0;
  EXPECT_THROW(Arena::attach(dup(a.fd())), Error);
}

TEST(Arena, AttachRejectsAForeignFile) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  EXPECT_THROW(Arena::attach(fds[0]), Error);  // attach owns and closes the fd
  close(fds[1]);
}

}  // namespace
}  // namespace ferry
