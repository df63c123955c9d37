// Ferry's services as an application hosts them: a Server and an Orchestrator
// in this process, serving a handler defined here, over real TCP. No ferry
// binary, no signals: start(), stop(), wait(), stats() and the first error.

#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "ferry/offload/orchestrator.h"
#include "ferry/offload/server.h"
#include "ferry/worker/cpu_backend.h"
#include "support/ferry_processes.h"
#include "support/http_client.h"
#include "support/prometheus_text.h"
#include "support/raw_client.h"

namespace ferry::offload {
namespace {

struct Shout {
  static constexpr const char* kName = "shout";
  FERRY_HOST_DEVICE std::size_t operator()(ByteView in, MutableByteView out) const {
    for (std::size_t i = 0; i < in.size; ++i)
      out[i] = (in[i] >= 'a' && in[i] <= 'z') ? static_cast<std::uint8_t>(in[i] - 32) : in[i];
    return in.size;
  }
};

std::string unique_channel(const char* what) {
  return std::string("hosted-") + what + "-" + std::to_string(::getpid());
}

ServerOptions server_options(const std::string& channel) {
  ServerOptions o;
  o.channel_name = channel;
  o.listen_address = "127.0.0.1";
  o.cpus = {0, 0};
  o.pin_threads = false;
  return o;
}

OrchestratorOptions orchestrator_options(const std::string& channel) {
  OrchestratorOptions o;
  o.channel_name = channel;
  o.num_gpu_threads = 2;
  o.connect_timeout_s = 10;
  return o;
}

using test::wait_until;

TEST(Hosted, AServerAndAnOrchestratorServeTheApplicationsHandler) {
  const std::string channel = unique_channel("serve");
  Server server(server_options(channel));
  server.start();
  ASSERT_NE(server.port(), 0);
  OrchestratorOptions oo = orchestrator_options(channel);
  Orchestrator orchestrator(oo, worker::make_cpu_backend(oo.worker, Shout{}));
  orchestrator.start();
  ASSERT_TRUE(wait_until([&] { return server.stats().orchestrator_attached; })) << server.first_error();

  test::RawClient a(server.port()), b(server.port());
  for (int i = 0; i < 50; ++i) {
    a.send_bytes(test::RawClient::request("hello " + std::to_string(i)));
    b.send_bytes(test::RawClient::request("bye " + std::to_string(i)));
  }
  for (int i = 0; i < 50; ++i) {
    auto fa = a.read_frame(10);
    auto fb = b.read_frame(10);
    ASSERT_TRUE(fa && fb);
    EXPECT_EQ(fa->payload, "HELLO " + std::to_string(i));
    EXPECT_EQ(fb->payload, "BYE " + std::to_string(i));
  }
  EXPECT_EQ(server.stats().responses, 100u);
  EXPECT_EQ(server.stats().clients, 2u);
  EXPECT_EQ(orchestrator.handled(), 100u);
  EXPECT_FALSE(server.wait_for(std::chrono::milliseconds(0))) << "still serving";

  // The host stops the server; it tells the orchestrator, which stops too.
  server.stop();
  EXPECT_EQ(server.wait(), 0) << server.first_error();
  EXPECT_EQ(orchestrator.wait(), 0) << orchestrator.first_error();
  EXPECT_EQ(server.first_error(), "");
}

// Both services' /metrics on ports of their own: the counters move by the
// traffic sent, and the text is the Prometheus format.
TEST(Hosted, MetricsCountTheTrafficSent) {
  const std::string channel = unique_channel("metrics");
  ServerOptions so = server_options(channel);
  so.metrics_port = 0;
  Server server(so);
  server.start();
  ASSERT_NE(server.metrics_port(), 0);
  OrchestratorOptions oo = orchestrator_options(channel);
  oo.metrics_port = 0;
  Orchestrator orchestrator(oo, worker::make_cpu_backend(oo.worker, Shout{}));
  orchestrator.start();
  ASSERT_NE(orchestrator.metrics_port(), 0);
  ASSERT_TRUE(wait_until([&] { return server.stats().orchestrator_attached; })) << server.first_error();

  constexpr int kRequests = 20;
  const std::string payload = "metrics!";
  const std::size_t frame = test::RawClient::request(payload).size();
  test::RawClient a(server.port());
  for (int i = 0; i < kRequests; ++i) a.send_bytes(test::RawClient::request(payload));
  for (int i = 0; i < kRequests; ++i) ASSERT_TRUE(a.read_frame(10));
  // A frame whose length is beyond --max-message-length: refused, its client closed.
  test::RawClient b(server.port());
  b.send_bytes(test::RawClient::request(std::string(so.max_message_length + 1, 'x')));
  ASSERT_TRUE(wait_until([&] { return server.stats().protocol_errors == 1; }));

  const test::PrometheusText s = test::parse_prometheus(test::scrape(server.metrics_port()).body);
  EXPECT_EQ(s.at("ferry_server_requests_total"), kRequests);
  EXPECT_EQ(s.at("ferry_server_responses_total"), kRequests);
  EXPECT_EQ(s.at("ferry_server_bytes_total{direction=\"in\"}"), kRequests * frame);
  EXPECT_EQ(s.at("ferry_server_bytes_total{direction=\"out\"}"), kRequests * frame);
  EXPECT_EQ(s.at("ferry_server_errors_total{kind=\"malformed\"}") +
                s.at("ferry_server_errors_total{kind=\"slot_too_small\"}"),
            1);
  EXPECT_EQ(s.at("ferry_server_errors_total{kind=\"no_workers\"}"), 0);
  EXPECT_GE(s.at("ferry_server_clients"), 1);
  EXPECT_EQ(s.at("ferry_server_queue_depth"), 0);
  EXPECT_EQ(s.at("ferry_server_orchestrator_attached"), 1);
  EXPECT_EQ(s.at("ferry_server_stage_seconds_count{stage=\"read\"}"), kRequests);
  EXPECT_EQ(s.at("ferry_server_stage_seconds_count{stage=\"queue\"}"), kRequests);

  const test::PrometheusText o = test::parse_prometheus(test::scrape(orchestrator.metrics_port()).body);
  EXPECT_EQ(o.at("ferry_orchestrator_requests_total"), kRequests);
  EXPECT_EQ(o.at("ferry_orchestrator_queue_depth"), 0);
  EXPECT_EQ(o.at("ferry_orchestrator_workers"), 2);
  EXPECT_EQ(o.at("ferry_orchestrator_server_attached"), 1);
  EXPECT_EQ(o.at("ferry_orchestrator_errors_total{kind=\"hung\"}"), 0);

  for (const std::uint16_t port : {server.metrics_port(), orchestrator.metrics_port()}) {
    EXPECT_EQ(test::scrape(port, "/health").body, "ok\n");
    test::HttpConnection bad(port);
    bad.send("GET\r\n\r\n");
    EXPECT_EQ(bad.read_response()->status, 400);
    EXPECT_EQ(test::scrape(port).status, 200);
  }
  orchestrator.stop();
  EXPECT_EQ(orchestrator.wait(), 0);
  EXPECT_EQ(server.wait(), 0);
}

TEST(Hosted, StoppingTheOrchestratorShutsTheServerDownByTheReferenceProtocol) {
  const std::string channel = unique_channel("orch-stop");
  Server server(server_options(channel));
  server.start();
  OrchestratorOptions oo = orchestrator_options(channel);
  Orchestrator orchestrator(oo, worker::make_cpu_backend(oo.worker, Shout{}));
  orchestrator.start();
  ASSERT_TRUE(wait_until([&] { return server.stats().orchestrator_attached; }));
  orchestrator.stop();
  EXPECT_EQ(orchestrator.wait(), 0) << orchestrator.first_error();
  ASSERT_TRUE(server.wait_for(std::chrono::seconds(10))) << "start_shutdown stops the server";
  EXPECT_EQ(server.wait(), 0);
}

TEST(Hosted, ErrorsAreThrownAtStartOrKeptAsTheFirstError) {
  // Refusals name the option field, not a flag: a hosting program has none.
  auto refusal = [](const ServerOptions& o) -> std::string {
    try {
      Server{o};
    } catch (const Error& e) {
      return e.what();
    }
    return "accepted";
  };
  ServerOptions bad = server_options(unique_channel("bad"));
  bad.cpus.clear();
  EXPECT_EQ(refusal(bad).rfind("ServerOptions::cpus is required", 0), 0u) << refusal(bad);
  bad = server_options(unique_channel("bad"));
  bad.max_clients_per_thread = 0;
  EXPECT_EQ(refusal(bad), "ServerOptions::max_clients_per_thread must be at least 1");
  bad = server_options(unique_channel("bad"));
  bad.max_message_length = 2;
  EXPECT_EQ(refusal(bad).rfind("ArenaParams::max_message_length 2 leaves no room", 0), 0u) << refusal(bad);

  // A second server on the same channel name cannot start.
  const std::string channel = unique_channel("twice");
  Server first(server_options(channel));
  first.start();
  Server second(server_options(channel));
  EXPECT_THROW(second.start(), Error);

  // An orchestrator whose server never comes: the first error says so.
  OrchestratorOptions oo = orchestrator_options(unique_channel("nobody"));
  oo.connect_timeout_s = 0.5;
  Orchestrator lonely(oo, worker::make_cpu_backend(oo.worker, Shout{}));
  lonely.start();
  EXPECT_EQ(lonely.wait(), 1);
  EXPECT_NE(lonely.first_error().find("no ferry server listens"), std::string::npos) << lonely.first_error();
}

}  // namespace
}  // namespace ferry::offload
