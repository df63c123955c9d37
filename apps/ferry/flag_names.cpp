#include "flag_names.h"

#include <array>

namespace ferry::app {
namespace {

struct FlagName {
  std::string_view role;  // the subcommand; empty: every subcommand
  std::string_view field;
  std::string_view flag;
};

// A field set by different flags in different subcommands has an entry per
// role before its default; the first entry that fits wins.
constexpr std::array kFlagNames = {
    // core
    FlagName{"orchestrator", "ArenaParams::max_concurrent_messages",
             "--ring-slots (or 8 x --max-concurrent-messages)"},
    FlagName{"", "ArenaParams::max_concurrent_messages", "--max-concurrent-messages"},
    FlagName{"", "ArenaParams::max_message_length", "--max-message-length"},
    FlagName{"", "PeerPolicy::allowed_uids", "--allow-uid"},
    // offload
    FlagName{"", "ServerOptions::channel_name", "--comch-channel-name"},
    FlagName{"", "ServerOptions::cpus", "--cpu"},
    FlagName{"", "ServerOptions::max_clients_per_thread", "--max-clients-per-thread"},
    FlagName{"", "ServerOptions::max_concurrent_messages", "--max-concurrent-messages"},
    FlagName{"", "ServerOptions::max_message_length", "--max-message-length"},
    FlagName{"", "ServerOptions::port_file", "--port-file"},
    FlagName{"", "ServerOptions::request_timeout_s", "--request-timeout"},
    FlagName{"", "OrchestratorOptions::channel_name", "--comch-channel-name"},
    FlagName{"", "OrchestratorOptions::max_concurrent_messages", "--max-concurrent-messages"},
    FlagName{"", "OrchestratorOptions::max_message_length", "--max-message-length"},
    FlagName{"", "OrchestratorOptions::num_gpu_threads", "--num-gpu-threads"},
    FlagName{"", "OrchestratorOptions::ready_file", "--ready-file"},
    FlagName{"", "OrchestratorOptions::ring_slots", "--ring-slots"},
    FlagName{"", "ClientOptions::connect_timeout_s", "--connect-timeout"},
    FlagName{"", "ClientOptions::expected_response", "--expected-response"},
    FlagName{"", "ClientOptions::iteration_count", "--iteration-count"},
    FlagName{"", "ClientOptions::max_concurrent_messages", "--max-concurrent-messages"},
    FlagName{"", "ClientOptions::message", "--message-string"},
    FlagName{"", "ClientOptions::server_ip", "--server-ip-address"},
    FlagName{"", "ClientOptions::server_port", "--server-ip-port"},
    FlagName{"", "ClientOptions::thread_count", "--thread-count"},
    FlagName{"", "DemoOptions::server_threads", "--server-threads"},
    // worker
    FlagName{"orchestrator", "WorkerOptions::gpu", "--gpu-pci-addr"},
    FlagName{"", "WorkerOptions::gpu", "--gpu"},
    FlagName{"", "WorkerOptions::burst", "--burst"},
    FlagName{"", "BackendKind::Cpu", "--backend cpu"},
    FlagName{"", "BackendKind::Cuda", "--backend cuda"},
    FlagName{"", "LaunchMethod::Cpu", "--launch cpu"},
    // infer
    FlagName{"", "ServiceOptions::batch_timeout", "--batch-timeout"},
    FlagName{"", "ServiceOptions::max_batch", "--max-batch"},
    FlagName{"", "ServiceOptions::max_batch_tokens", "--max-batch-tokens"},
    FlagName{"", "ServiceOptions::max_tokens", "--max-tokens"},
    FlagName{"", "ServiceOptions::queue_slots", "--queue-slots"},
    FlagName{"", "BertOptions::pooling", "--pooling"},
    // xfer
    FlagName{"", "AgentServiceOptions::chunk_blocks", "--chunk-blocks"},
    FlagName{"", "AgentServiceOptions::chunk_kib", "--chunk-kib"},
    FlagName{"", "AgentServiceOptions::cpus", "--cpus"},
    FlagName{"", "AgentServiceOptions::gpu", "--gpu"},
    FlagName{"", "AgentServiceOptions::max_regions", "--max-regions"},
    FlagName{"", "AgentServiceOptions::max_session_mib", "--max-session-mib"},
    FlagName{"", "AgentServiceOptions::max_sessions", "--max-sessions"},
    FlagName{"", "AgentServiceOptions::memory_timeout_s", "--memory-timeout"},
    FlagName{"", "AgentServiceOptions::queue_depth", "--queue-depth"},
    FlagName{"", "AgentServiceOptions::stall_timeout_s", "--stall-timeout"},
    FlagName{"", "AgentServiceOptions::staging_mib", "--staging-mib"},
    FlagName{"", "AgentServiceOptions::tiers", "--tier"},
    FlagName{"agent", "kGpuAuto", "auto"},
    FlagName{"agent", "kGpuNone", "none"},
    // http
    FlagName{"", "HttpOptions::access_log", "--access-log"},
    FlagName{"", "HttpOptions::cpus", "--cpu"},
    FlagName{"", "HttpOptions::header_timeout_s", "--header-timeout"},
    FlagName{"", "HttpOptions::idle_timeout_s", "--idle-timeout"},
    FlagName{"", "HttpOptions::max_file_bytes", "--max-file-size"},
    FlagName{"", "HttpOptions::max_head", "--max-head"},
    FlagName{"", "HttpOptions::max_output_per_thread", "--max-output-per-thread"},
    FlagName{"", "HttpOptions::max_pipelined", "--max-pipelined"},
    FlagName{"", "HttpOptions::max_request_line", "--max-request-line"},
    FlagName{"", "HttpOptions::port_file", "--port-file"},
    FlagName{"", "HttpOptions::root", "--root"},
    // packet
    FlagName{"", "L2fwdOptions::data_room", "--data-room"},
    FlagName{"", "L2fwdOptions::items", "--items"},
    FlagName{"", "L2fwdOptions::mbufs", "--mbufs"},
    FlagName{"", "L2fwdOptions::pipelines", "--pipelines"},
    FlagName{"", "PacketWorkerOptions::gpu_lanes", "--gpu-lanes"},
    FlagName{"", "PacketWorkerOptions::graph_items", "--graph-items"},
    FlagName{"", "PacketWorkerOptions::max_packets", "--burst"},
    FlagName{"", "PacketWorkerOptions::launch", "--mode"},
    FlagName{"", "MemoryKind::Device", "--mem device"},
    FlagName{"", "MemoryKind::Host", "--mem host-pinned"},
};

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// The entry whose field starts `message` at `at` as a whole name, or null.
const FlagName* flag_name_at(std::string_view message, std::size_t at, std::string_view role) {
  if (at > 0 && is_name_char(message[at - 1])) return nullptr;
  for (const FlagName& f : kFlagNames) {
    if (!f.role.empty() && f.role != role) continue;
    if (message.substr(at, f.field.size()) != f.field) continue;
    const std::size_t end = at + f.field.size();
    if (end < message.size() && is_name_char(message[end])) continue;
    return &f;
  }
  return nullptr;
}

}  // namespace

std::string in_flag_terms(std::string_view message, std::string_view role) {
  std::string out;
  out.reserve(message.size());
  for (std::size_t i = 0; i < message.size();) {
    if (const FlagName* f = flag_name_at(message, i, role)) {
      out += f->flag;
      i += f->field.size();
    } else {
      out += message[i++];
    }
  }
  return out;
}

}  // namespace ferry::app
