// Malformed and hostile clients: each gets a specific ferry_error and a closed
// connection, and the server goes on serving everyone else.

#include <gtest/gtest.h>

#include <sys/socket.h>

#include <string>

#include "support/ferry_processes.h"
#include "support/raw_client.h"

namespace ferry::test {
namespace {

class BadInput : public testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<FerryServer>();
    orch_ = std::make_unique<FerryOrchestrator>(server_->channel());
    RawClient warm(server_->port());  // wait until the orchestrator is attached
    warm.send_bytes(RawClient::request("warm"));
    ASSERT_TRUE(warm.read_frame());
  }

  // Sends bytes, expects ferry_error `code` and then the connection closed.
  void expect_error(const std::string& bytes, std::uint32_t code, const std::string& reason_part) {
    RawClient c(server_->port());
    c.send_bytes(bytes);
    auto f = c.read_frame();
    ASSERT_TRUE(f) << "no error response\n" << server_->log();
    EXPECT_EQ(f->msg_id, 64u);
    EXPECT_EQ(f->code_or_len, code) << f->payload;
    EXPECT_NE(f->payload.find(reason_part), std::string::npos) << f->payload;
    EXPECT_TRUE(c.closed_by_peer()) << "the server closes after the error";
    expect_others_served();
  }

  void expect_others_served() {
    RawClient other(server_->port());
    other.send_bytes(RawClient::request("alive"));
    auto f = other.read_frame();
    ASSERT_TRUE(f) << server_->log();
    EXPECT_EQ(f->payload, "evila");
  }

  std::unique_ptr<FerryServer> server_;
  std::unique_ptr<FerryOrchestrator> orch_;
};

TEST_F(BadInput, WireSizeBelowTwelve) {
  expect_error(RawClient::raw_frame(11, 4, 0, ""), 1, "below the 12-byte minimum");
  EXPECT_NE(server_->log().find("below the 12-byte minimum"), std::string::npos) << "logged too";
}

TEST_F(BadInput, WireSizeAboveTheMaximum) {
  // Refused from the header alone: the 1 MiB body is never buffered.
  expect_error(RawClient::raw_frame(8 + (1u << 20), 4, (1u << 20) - 4, std::string(1000, 'z')), 2,
               "exceeds 8 + ServerOptions::max_message_length 256");
}

TEST_F(BadInput, OneByteOverTheMaximum) {
  expect_error(RawClient::request(std::string(253, 'o')), 2, "ServerOptions::max_message_length");
}

TEST_F(BadInput, MessageIdOtherThanClientRequest) {
  expect_error(RawClient::raw_frame(12, 2, 0, ""), 3, "msg_id 2");
  expect_error(RawClient::raw_frame(17, 5, 5, "hello"), 3, "msg_id 5");
}

TEST_F(BadInput, LengthPrefixDisagreesWithWireSize) {
  expect_error(RawClient::raw_frame(20, 4, 3, "12345678"), 4, "length prefix 3");
}

TEST_F(BadInput, ErrorComesAfterTheResponsesAlreadyInFlight) {
  RawClient c(server_->port());
  c.send_bytes(RawClient::request("one") + RawClient::request("two") + RawClient::raw_frame(11, 4, 0, ""));
  auto a = c.read_frame();
  auto b = c.read_frame();
  auto e = c.read_frame();
  ASSERT_TRUE(a && b && e);
  EXPECT_EQ(a->payload, "eno");
  EXPECT_EQ(b->payload, "owt");
  EXPECT_EQ(e->msg_id, 64u);
}

TEST_F(BadInput, ErrorBehindAFullOutputBufferArrivesIntact) {
  // A client with a tiny receive buffer fills the server's output buffer with
  // responses, then sends a bad frame: the error is queued behind everything
  // owed and must arrive whole after it (ASan in CI watches the buffer bounds).
  RawClient c(server_->port());
  const int small = 4096;
  setsockopt(c.fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  const std::string payload(252, 'f');
  std::string batch;
  for (int i = 0; i < 400; ++i) batch += RawClient::request(payload);
  batch += RawClient::raw_frame(20, 4, 3, "12345678");
  std::size_t sent = 0;
  for (int i = 0; i < 2000 && sent < batch.size(); ++i) {
    sent += c.try_send(batch.substr(sent));
    usleep(1000);
  }
  usleep(200000);
  int responses = 0;
  for (;;) {
    auto f = c.read_frame(10);
    ASSERT_TRUE(f) << "closed before the error, after " << responses << " responses";
    if (f->msg_id == 64) {
      EXPECT_EQ(f->code_or_len, 4u) << f->payload;
      break;
    }
    ASSERT_EQ(f->payload, std::string(252, 'f'));
    ++responses;
  }
  EXPECT_EQ(responses, 400) << "every request before the bad frame is answered";
  expect_others_served();
}

TEST_F(BadInput, DisconnectMidMessage) {
  {
    RawClient c(server_->port());
    const std::string req = RawClient::request("incomplete request");
    c.send_bytes(req.substr(0, req.size() - 5));
  }  // closed with 5 bytes missing
  expect_others_served();
  for (int i = 0; i < 100 && server_->log().find("mid-message") == std::string::npos; ++i) usleep(20000);
  EXPECT_NE(server_->log().find("disconnected mid-message"), std::string::npos) << server_->log();
}

TEST_F(BadInput, DisconnectWithRequestsInFlight) {
  for (int round = 0; round < 5; ++round) {
    RawClient c(server_->port());
    std::string batch;
    for (int i = 0; i < 300; ++i) batch += RawClient::request(std::string(200, 'q'));
    c.send_bytes(batch);
  }  // each closes without reading its responses
  expect_others_served();
}

TEST_F(BadInput, ClientThatSendsWithoutReading) {
  RawClient hog(server_->port());
  const std::string req = RawClient::request(std::string(250, 'h'));
  std::string batch;
  for (int i = 0; i < 256; ++i) batch += req;
  // Push until the kernel buffers on both sides are full: the server must stop
  // reading this client instead of buffering without bound.
  std::size_t sent = 0;  // bytes accepted so far; the stream continues at sent % batch.size()
  for (int i = 0; i < 20000; ++i) {
    std::size_t n = hog.try_send(batch.substr(sent % batch.size()));
    if (n == 0) {
      usleep(1000);
      n = hog.try_send(batch.substr(sent % batch.size()));
      if (n == 0) break;
    }
    sent += n;
  }
  EXPECT_LT(sent, 200u << 20) << "the server kept reading a client that never reads\n" << server_->log();
  for (int i = 0; i < 20; ++i) expect_others_served();
}

}  // namespace
}  // namespace ferry::test
