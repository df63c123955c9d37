#pragma once
// What `GET /metrics` reports, in the Prometheus text format: responses by
// status, bytes sent, open connections, and histograms of each stage of a
// request (read, queue, handle on the worker, write). Counted by the proxy threads as they
// write responses; sharded so that threads do not share the lines they write.

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "ferry/offload/server.h"

namespace ferry::http {

class Metrics {
 public:
  static constexpr std::array<std::uint16_t, 17> kStatuses = {200, 400, 404, 405, 408, 411, 413, 414, 422,
                                                              424, 429, 431, 500, 501, 503, 505, 0};  // 0: any other

  void count(std::uint16_t status, std::uint64_t bytes) noexcept;
  // Where open connections and the stage latencies come from (the server's
  // statistics); set before serving.
  void set_server_stats(std::function<offload::ServerStats()> source) { server_stats_ = std::move(source); }
  // More metrics appended to what render() writes (the embedding service's).
  void set_extra(std::function<std::string()> source) { extra_ = std::move(source); }
  std::string render() const;
  std::uint64_t responses(std::uint16_t status) const noexcept;

 private:
  static constexpr std::size_t kShards = 8;
  struct alignas(64) Shard {
    std::array<std::atomic<std::uint64_t>, kStatuses.size()> by_status{};
    std::atomic<std::uint64_t> bytes{0};
  };
  static std::size_t index_of(std::uint16_t status) noexcept;

  std::array<Shard, kShards> shards_;
  std::function<offload::ServerStats()> server_stats_;
  std::function<std::string()> extra_;
};

}  // namespace ferry::http
