// A handler written outside Ferry is served by the CPU backend without editing
// Ferry: this file is such a user. Requests go in through a real arena's rings.

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "ferry/core/arena.h"
#include "ferry/worker/cpu_backend.h"

namespace {

// A user's handler with a parameter: upper-cases, then appends a suffix.
struct UpperWithSuffix {
  static constexpr const char* kName = "upper-with-suffix";
  char suffix = '!';

  FERRY_HOST_DEVICE std::size_t operator()(ferry::ByteView in, ferry::MutableByteView out) const {
    if (in.size + 1 > out.size) return 0;
    for (std::size_t i = 0; i < in.size; ++i)
      out[i] = (in[i] >= 'a' && in[i] <= 'z') ? static_cast<std::uint8_t>(in[i] - 32) : in[i];
    out[in.size] = static_cast<std::uint8_t>(suffix);
    return in.size + 1;
  }
};

// Serves every channel of an arena through `threads` worker threads (0: one per
// channel) and checks each response, in order, on each channel.
void check_every_channel_served(std::uint32_t channels, std::uint32_t threads) {
  ferry::ArenaParams params;
  params.num_channels = channels;
  params.max_concurrent_messages = 64;
  params.max_message_length = 256;
  ferry::Arena arena = ferry::Arena::create(params, "user-handler-test");

  ferry::worker::WorkerOptions options;
  options.threads = threads;
  auto backend = ferry::worker::make_cpu_backend(options, UpperWithSuffix{'?'});
  backend->prepare(arena);
  backend->start();
  EXPECT_NE(backend->describe().find("handler upper-with-suffix"), std::string::npos) << backend->describe();

  for (std::uint32_t c = 0; c < arena.num_channels(); ++c) {
    ferry::RingProducer requests(arena.channel(c).requests);
    ferry::RingConsumer responses(arena.channel(c).responses);
    const int n = 40;
    for (int i = 0; i < n; ++i) {
      const std::string msg = "msg-" + std::to_string(i) + "-ch" + std::to_string(c);
      ASSERT_EQ(requests.try_push({reinterpret_cast<const std::uint8_t*>(msg.data()), msg.size()}, 1000 + i),
                ferry::Status::Ok);
    }
    for (int i = 0; i < n; ++i) {
      ferry::SlotMessage m;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (!responses.try_peek(&m)) {
        ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "no response " << i << " on channel " << c;
        std::this_thread::yield();
      }
      const std::string got(reinterpret_cast<const char*>(m.payload.data), m.payload.size);
      EXPECT_EQ(got, "MSG-" + std::to_string(i) + "-CH" + std::to_string(c) + "?");
      EXPECT_EQ(m.cookie, 1000u + i) << "the response answers its request";
      responses.advance();
    }
    responses.release();
  }
  EXPECT_EQ(backend->failure(), "");
  backend->stop();
  EXPECT_EQ(backend->handled(), 40u * channels);
}

TEST(UserHandler, ServedByTheCpuBackendOnEveryChannel) { check_every_channel_served(2, 0); }

TEST(UserHandler, OneWorkerThreadServesSeveralChannels) {
  check_every_channel_served(3, 1);
  check_every_channel_served(5, 2);
}

}  // namespace
