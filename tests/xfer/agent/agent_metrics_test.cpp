// The agent's /metrics (AgentServiceOptions::metrics_port): an AgentService
// hosted here with a dram tier, an application pushing and pulling through it
// over its real socket, and the counters read back from a real scrape.

#include <gtest/gtest.h>

#include <unistd.h>

#include <stdexcept>

#include <string>
#include <vector>

#include "core/net.h"
#include "ferry/xfer/agent.h"
#include "ferry/xfer/agent_service.h"
#include "ferry/xfer/buffer.h"
#include "support/ferry_processes.h"
#include "support/http_client.h"
#include "support/prometheus_text.h"

namespace ferry::xfer {
namespace {

XferStatus run(Agent& agent, XferOp op, const Buffer& buf, std::size_t block,
               const std::vector<std::string>& keys) {
  std::vector<MemDesc> descs;
  for (std::size_t i = 0; i < keys.size(); ++i)
    descs.push_back({reinterpret_cast<std::uint64_t>(buf.data()) + i * block, block, 0});
  const XferReq req = agent.create_xfer_req(op, descs, keys);
  XferStatus s = agent.post(req);
  if (s == XferStatus::InProgress) s = agent.wait(req, 30000);
  agent.release(req);
  return s;
}

TEST(AgentMetrics, CountTheTrafficSentByDirectionAndTier) {
  AgentServiceOptions o;
  o.endpoint = "unix:ferry-metrics-test-" + std::to_string(::getpid());
  o.tiers = {"dram:16MiB"};
  o.gpu = kGpuNone;
  o.staging_mib = 8;
  o.queue_depth = 2;
  o.metrics_port = 0;
  AgentService service(o);
  service.start();
  ASSERT_NE(service.metrics_port(), 0);

  constexpr std::size_t kBlock = 4096, kCount = 3;
  AgentConfig config;
  config.endpoint = service.endpoint();
  Agent agent(config);
  Buffer buf = Buffer::allocate(MemType::Dram, kBlock * kCount);
  agent.register_memory(buf);
  const std::vector<std::string> keys = {"a", "b", "c"};
  ASSERT_EQ(run(agent, XferOp::Write, buf, kBlock, keys), XferStatus::Ok);
  ASSERT_EQ(run(agent, XferOp::Read, buf, kBlock, keys), XferStatus::Ok);
  ASSERT_EQ(run(agent, XferOp::Read, buf, kBlock, {"missing"}), XferStatus::NotFound);

  const test::Scrape s = test::scrape(service.metrics_port());
  ASSERT_EQ(s.status, 200);
  const test::PrometheusText t = test::parse_prometheus(s.body);
  EXPECT_EQ(t.at("ferry_agent_transfers_total{direction=\"push\"}"), 1);
  EXPECT_EQ(t.at("ferry_agent_transfers_total{direction=\"pull\"}"), 2);
  const std::string push = "{direction=\"push\",tier=\"dram:16MiB\"}",
                    pull = "{direction=\"pull\",tier=\"dram:16MiB\"}";
  EXPECT_EQ(t.at("ferry_agent_objects_total" + push), kCount);
  EXPECT_EQ(t.at("ferry_agent_bytes_total" + push), kCount * kBlock);
  EXPECT_EQ(t.at("ferry_agent_objects_total" + pull), kCount);
  EXPECT_EQ(t.at("ferry_agent_bytes_total" + pull), kCount * kBlock);
  EXPECT_EQ(t.at("ferry_agent_failed_descriptors_total{kind=\"not_found\"}"), 1);
  EXPECT_EQ(t.at("ferry_agent_failed_descriptors_total{kind=\"io_error\"}"), 0);
  EXPECT_EQ(t.at("ferry_agent_errors_total{kind=\"bad_request\"}"), 0);
  EXPECT_EQ(t.at("ferry_agent_sessions"), 1);
  EXPECT_EQ(t.at("ferry_agent_transfers_in_flight"), 0);
  EXPECT_EQ(t.at("ferry_agent_queue_depth"), 0);
  EXPECT_EQ(t.at("ferry_agent_tier_used_bytes{tier=\"dram:16MiB\"}"), kCount * kBlock);
  EXPECT_EQ(t.at("ferry_agent_tier_capacity_bytes{tier=\"dram:16MiB\"}"), 16u << 20);
  EXPECT_EQ(t.at("ferry_agent_transfer_seconds_count{direction=\"push\"}"), 1);
  EXPECT_EQ(t.at("ferry_agent_transfer_seconds_count{direction=\"pull\"}"), 2);
  EXPECT_EQ(t.at("ferry_agent_stage_seconds_count{stage=\"decode\"}"), 3);
  EXPECT_GE(t.at("ferry_agent_stage_seconds_count{stage=\"queue\"}"), 2);
  EXPECT_EQ(test::scrape(service.metrics_port(), "/health").body, "ok\n");

  // A malformed request gets 400, and the endpoint keeps serving.
  test::HttpConnection bad(service.metrics_port());
  bad.send("GET /metrics HTTP/9\r\n\r\n");
  EXPECT_EQ(bad.read_response()->status, 400);
  EXPECT_EQ(test::scrape(service.metrics_port()).status, 200);
  service.stop();
  EXPECT_EQ(service.wait(), 0);
}

// `ferry agent --metrics-port` maps to the same option: the binary serves it.
TEST(AgentMetrics, TheCommandLineServesThemOnTheGivenPort) {
  std::uint16_t port = 0;
  ::close(net::listen_tcp("127.0.0.1", 0, &port));  // a port free a moment ago
  test::FerryAgent agent_proc({"dram:8MiB"}, {"--gpu", "none", "--metrics-port", std::to_string(port)});
  const test::Scrape s = test::scrape(port);
  ASSERT_EQ(s.status, 200) << agent_proc.log();
  const test::PrometheusText t = test::parse_prometheus(s.body);
  EXPECT_EQ(t.at("ferry_agent_transfers_total{direction=\"push\"}"), 0);
  EXPECT_EQ(t.at("ferry_agent_tier_capacity_bytes{tier=\"dram:8MiB\"}"), 8u << 20);
  EXPECT_EQ(test::scrape(port, "/health").body, "ok\n");
}

}  // namespace
}  // namespace ferry::xfer
