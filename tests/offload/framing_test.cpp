// A protocol of the application's own on the server threads: a line protocol
// (one request per '\n', at most 64 bytes) defined here, hosted with a CPU
// backend, over real TCP. The threads must frame with it, keep responses in
// order, refuse with its replies, and close when a response says so.

#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>

#include "ferry/offload/framing.h"
#include "ferry/offload/orchestrator.h"
#include "ferry/offload/server.h"
#include "ferry/worker/cpu_backend.h"
#include "support/ferry_processes.h"
#include "support/raw_client.h"

namespace ferry::offload {
namespace {

constexpr std::size_t kMaxLine = 64;

// Upper-cases a line; "bye" becomes "BYE", which the framing turns into a close.
struct Upper {
  static constexpr const char* kName = "upper";
  FERRY_HOST_DEVICE std::size_t operator()(ByteView in, MutableByteView out) const {
    for (std::size_t i = 0; i < in.size; ++i)
      out[i] = (in[i] >= 'a' && in[i] <= 'z') ? static_cast<std::uint8_t>(in[i] - 32) : in[i];
    return in.size;
  }
};

class LineFraming final : public Framing {
 public:
  Scan scan(const std::uint8_t* p, std::size_t n) const noexcept override {
    const auto* nl = static_cast<const std::uint8_t*>(std::memchr(p, '\n', std::min(n, kMaxLine + 1)));
    if (nl == nullptr) return n > kMaxLine ? Scan{Scan::Result::Reject, 0, 0, 0} : Scan{};
    const auto len = static_cast<std::size_t>(nl - p);
    return {Scan::Result::Request, len + 1, 0, len};
  }
  Rejection reject(const std::uint8_t*, std::size_t) const override {
    return {"ERR line too long\n", "a line over 64 bytes"};
  }
  std::string failure_reply(Failure f, const std::string&) const override {
    return f == Failure::NoWorkers ? "ERR no workers\n" : "ERR failed\n";
  }
  std::size_t max_request_bytes() const noexcept override { return kMaxLine + 1; }
  std::size_t max_response_bytes() const noexcept override { return kMaxLine + 4; }
  Written write_response(ByteView out, std::uint8_t* dst, const Client&) const noexcept override {
    std::memcpy(dst, "OK ", 3);
    std::memcpy(dst + 3, out.data, out.size);
    dst[3 + out.size] = '\n';
    const bool bye = out.size == 3 && std::memcmp(out.data, "BYE", 3) == 0;
    return {out.size + 4, bye, 0};
  }
};

using test::wait_until;

class LineServer : public ::testing::Test {
 protected:
  void SetUp() override {
    channel_ = "framing-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "-" +
               std::to_string(::getpid());
    ServerOptions o;
    o.channel_name = channel_;
    o.listen_address = "127.0.0.1";
    o.cpus = {0, 0};
    o.pin_threads = false;
    o.max_message_length = 128;
    o.framing = std::make_shared<LineFraming>();
    server_ = std::make_unique<Server>(o);
    server_->start();
  }
  void attach_workers() {
    OrchestratorOptions oo;
    oo.channel_name = channel_;
    oo.num_gpu_threads = 2;
    oo.max_message_length = 128;
    oo.connect_timeout_s = 10;
    orchestrator_ = std::make_unique<Orchestrator>(oo, worker::make_cpu_backend(oo.worker, Upper{}));
    orchestrator_->start();
    ASSERT_TRUE(wait_until([&] { return server_->stats().orchestrator_attached; })) << server_->first_error();
  }
  void TearDown() override {
    server_->stop();  // drains, then shuts the orchestrator down
    const int code = server_->wait();
    if (orchestrator_) {
      EXPECT_EQ(code, 0) << server_->first_error();
      EXPECT_EQ(orchestrator_->wait(), 0) << orchestrator_->first_error();
    }
  }

  std::string channel_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<Orchestrator> orchestrator_;
};

TEST_F(LineServer, PipelinedLinesComeBackInOrder) {
  attach_workers();
  test::RawClient c(server_->port());
  std::string batch, expect;
  for (int i = 0; i < 1000; ++i) {  // beyond the 128 window: the thread pauses reading, loses nothing
    batch += "line " + std::to_string(i) + "\n";
    expect += "OK LINE " + std::to_string(i) + "\n";
  }
  c.send_bytes(batch);
  EXPECT_EQ(c.read_bytes(expect.size()), expect);
}

TEST_F(LineServer, ARequestSentByteByByteIsFramedOnce) {
  attach_workers();
  test::RawClient c(server_->port());
  for (char ch : std::string("slowly\n")) {
    c.send_bytes(std::string(1, ch));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(c.read_bytes(10), "OK SLOWLY\n");
}

TEST_F(LineServer, ARejectedRequestGetsTheFramingsReplyAfterEarlierResponsesAndOthersGoOn) {
  attach_workers();
  test::RawClient bad(server_->port()), good(server_->port());
  bad.send_bytes("first\n" + std::string(200, 'x'));
  EXPECT_EQ(bad.read_to_end(), "OK FIRST\nERR line too long\n");
  good.send_bytes("still here\n");
  EXPECT_EQ(good.read_bytes(14), "OK STILL HERE\n");
  EXPECT_GE(server_->stats().protocol_errors, 1u);
}

TEST_F(LineServer, AResponseThatClosesEndsTheConnectionAndDropsWhatFollows) {
  attach_workers();
  test::RawClient c(server_->port());
  c.send_bytes("a\nbye\nnever answered\n");
  EXPECT_EQ(c.read_to_end(), "OK A\nOK BYE\n");
  test::RawClient other(server_->port());
  other.send_bytes("b\n");
  EXPECT_EQ(other.read_bytes(5), "OK B\n");
}

TEST_F(LineServer, WhenTheWorkersAreLostTheFramingsFailureReplyIsSent) {
  // An orchestrator process (the ferry binary, reversing), killed: the server
  // detaches it, and requests then get the framing's no-workers reply.
  auto orchestrator = std::make_unique<test::FerryOrchestrator>(
      channel_, std::vector<std::string>{"--max-message-length", "128"}, 2);
  ASSERT_TRUE(wait_until([&] { return server_->stats().orchestrator_attached; })) << orchestrator->log();
  test::RawClient before(server_->port());
  before.send_bytes("abc\n");
  EXPECT_EQ(before.read_bytes(7), "OK cba\n");
  orchestrator->process().kill();
  ASSERT_TRUE(wait_until([&] { return !server_->stats().orchestrator_attached; }));
  test::RawClient during(server_->port());
  during.send_bytes("anyone?\n");
  EXPECT_EQ(during.read_to_end(), "ERR no workers\n");
}

}  // namespace
}  // namespace ferry::offload
