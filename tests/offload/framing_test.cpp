// A protocol of the application's own on the server threads: a line protocol
// (one request per '\n', at most 64 bytes) defined here, hosted with a CPU
// backend, over real TCP. The threads must frame with it, keep responses in
// order, refuse with its replies, and close when a response says so.

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

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

// Bytes every connection shares, as a static page is: BlockFraming sends them by reference.
const std::string& shared_page() {
  static const std::string page = [] {
    std::string p(std::size_t{1} << 20, '\0');
    for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<char>('a' + (i * 7 + i / 1021) % 26);
    return p;
  }();
  return page;
}

// Lines again, but "copy N" is answered with N copied bytes, "page N" with a
// head and the first N bytes of shared_page() by reference (Written::body),
// and "later" from another thread a little later (Framing::Deferred), so that
// the responses after it wait in the connection's queue.
class BlockFraming final : public Framing {
 public:
  static constexpr std::size_t kMaxCopy = 65536;
  Scan scan(const std::uint8_t* p, std::size_t n) const noexcept override {
    const auto* nl = static_cast<const std::uint8_t*>(std::memchr(p, '\n', std::min(n, kMaxLine + 1)));
    if (nl == nullptr) return n > kMaxLine ? Scan{Scan::Result::Reject, 0, 0, 0} : Scan{};
    const auto len = static_cast<std::size_t>(nl - p);
    return {Scan::Result::Request, len + 1, 0, len};
  }
  Rejection reject(const std::uint8_t*, std::size_t) const override { return {"ERR\n", "a line over 64 bytes"}; }
  std::string failure_reply(Failure, const std::string&) const override { return "ERR\n"; }
  std::size_t max_request_bytes() const noexcept override { return kMaxLine + 1; }
  std::size_t max_response_bytes() const noexcept override { return kMaxCopy + kMaxLine + 4; }
  Written write_response(ByteView out, std::uint8_t* dst, const Client& client) const noexcept override {
    const std::string line(reinterpret_cast<const char*>(out.data), out.size);
    const std::size_t space = line.find(' ');
    const std::size_t n = space != std::string::npos ? std::strtoull(line.c_str() + space, nullptr, 10) : 0;
    if (line.rfind("COPY ", 0) == 0 && n <= kMaxCopy) {
      std::memset(dst, 'c', n);
      dst[n] = '\n';
      return {n + 1, false, 0};
    }
    const std::string head = "OK " + line + "\n";
    if (line.rfind("LATER", 0) == 0 && client.deferrer != nullptr) {
      std::thread([deferred = client.deferrer->defer(), head] {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        deferred->complete([head] { return Response{head, false}; });
      }).detach();
      Written w;
      w.deferred = true;
      return w;
    }
    std::memcpy(dst, head.data(), head.size());
    Written w{head.size(), false, 0};
    if (line.rfind("PAGE ", 0) == 0 && n <= shared_page().size())
      w.body = ByteView{reinterpret_cast<const std::uint8_t*>(shared_page().data()), n};
    return w;
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

// A server over BlockFraming with a CPU backend that upper-cases, one thread.
class BlockServer {
 public:
  explicit BlockServer(std::uint64_t max_output_per_thread) {
    channel_ = "framing-block-" + std::to_string(::getpid()) + "-" + std::to_string(next_++);
    ServerOptions o;
    o.channel_name = channel_;
    o.listen_address = "127.0.0.1";
    o.cpus = {0};
    o.pin_threads = false;
    o.max_message_length = 128;
    o.max_concurrent_messages = 16;
    o.max_output_per_thread = max_output_per_thread;
    o.framing = std::make_shared<BlockFraming>();
    server_ = std::make_unique<Server>(o);
    server_->start();
    OrchestratorOptions oo;
    oo.channel_name = channel_;
    oo.num_gpu_threads = 1;
    oo.max_concurrent_messages = 16;
    oo.max_message_length = 128;
    oo.connect_timeout_s = 10;
    orchestrator_ = std::make_unique<Orchestrator>(oo, worker::make_cpu_backend(oo.worker, Upper{}));
    orchestrator_->start();
  }
  ~BlockServer() {
    server_->stop();
    server_->wait();
    orchestrator_->wait();
  }
  Server& server() { return *server_; }
  // Responses taken from the channel, once that count has not moved for 300 ms.
  std::uint64_t settled_responses() {
    std::uint64_t last = server_->stats().responses;
    for (int quiet = 0; quiet < 6;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const std::uint64_t now = server_->stats().responses;
      quiet = now == last ? quiet + 1 : 0;
      last = now;
    }
    return last;
  }

 private:
  static inline int next_ = 0;
  std::string channel_;
  std::unique_ptr<Server> server_;
  std::unique_ptr<Orchestrator> orchestrator_;
};

// Bodies sent by reference come whole and in order among the copied bytes and
// the deferred responses they wait behind, to a client that reads only once it
// has sent everything (the thread's sends block and resume many times; one
// send gathers many small references).
TEST(BodiesByReference, ComeWholeAndInOrderBetweenCopiedBytes) {
  BlockServer s(0);
  ASSERT_TRUE(wait_until([&] { return s.server().stats().orchestrator_attached; })) << s.server().first_error();
  test::RawClient c(s.server().port());
  std::string batch, expect;
  for (int i = 0; i < 600; ++i) {
    if (i % 20 == 1) {
      batch += "later " + std::to_string(i) + "\n";
      expect += "OK LATER " + std::to_string(i) + "\n";
    } else if (i % 3 == 0) {
      const std::size_t limit = i % 2 == 0 ? 100 : shared_page().size();
      const std::size_t n = 1 + static_cast<std::size_t>(i) * 7919 % limit;
      batch += "page " + std::to_string(n) + "\n";
      expect += "OK PAGE " + std::to_string(n) + "\n" + shared_page().substr(0, n);
    } else {
      batch += "line " + std::to_string(i) + "\n";
      expect += "OK LINE " + std::to_string(i) + "\n";
    }
  }
  c.send_bytes(batch);
  const std::string got = c.read_bytes(expect.size(), 60);
  const auto differ = std::mismatch(got.begin(), got.end(), expect.begin());
  EXPECT_TRUE(got == expect) << "first difference at byte " << (differ.first - got.begin()) << " of " << expect.size();
}

// Connections that read none of their responses hold the thread's copies up
// to --max-output-per-thread: beyond it, each takes at most one request, and a
// client that reads its answers is still served. Once they go, what they held
// is free again.
TEST(BodiesByReference, CopiesHeldForClientsThatDoNotReadAreBoundedPerThread) {
  constexpr std::size_t kCopy = 60000;
  constexpr int kHogs = 30;
  constexpr std::uint64_t kBound = std::uint64_t{1} << 20;
  BlockServer s(kBound);
  ASSERT_TRUE(wait_until([&] { return s.server().stats().orchestrator_attached; })) << s.server().first_error();
  std::string pipeline;
  for (int i = 0; i < 16; ++i) pipeline += "copy " + std::to_string(kCopy) + "\n";
  const std::uint64_t before = s.settled_responses();
  {
    std::vector<test::RawClient> hogs;
    for (int i = 0; i < kHogs; ++i) {
      hogs.push_back(test::RawClient::slow_reader(s.server().port()));
      hogs.back().send_bytes(pipeline);
    }
    const std::uint64_t answered = s.settled_responses() - before;
    // Without the bound, every hog would get its whole window (15 here).
    EXPECT_LE(answered, kBound / kCopy + kHogs) << "copies held beyond --max-output-per-thread";
    test::RawClient good(s.server().port());
    good.send_bytes("still served\n");
    EXPECT_EQ(good.read_bytes(16, 5), "OK STILL SERVED\n");
  }
  // The hogs are gone: a client that does not read gets its whole window again.
  const std::uint64_t after_hogs = s.settled_responses();
  test::RawClient next = test::RawClient::slow_reader(s.server().port());
  next.send_bytes(pipeline);
  EXPECT_GE(s.settled_responses() - after_hogs, 15u) << "what the hogs held was not given back";
}

}  // namespace
}  // namespace ferry::offload
