#include "client_stats.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "ferry/core/status.h"

namespace ferry::app {
namespace {

constexpr double kGiB = double(std::uint64_t{1} << 30);
constexpr const char* kDocaRule = "+================================================+";

}  // namespace

void print_ferry_stats(std::FILE* out, const offload::ClientReport& r) {
  std::fprintf(out, "Duration (seconds): %2.06lf\n", r.duration_s);
  std::fprintf(out, "Operation count: %lu\n", static_cast<unsigned long>(r.operations));
  std::fprintf(out, "Tx Data rate: %.03lf GiB/s\n", r.per_second(double(r.tx_bytes)) / kGiB);
  std::fprintf(out, "Rx Data rate: %.03lf GiB/s\n", r.per_second(double(r.rx_bytes)) / kGiB);
  std::fprintf(out, "IO rate: %.03lf MIOP/s\n", r.per_second(double(r.operations)) / 1e6);
  std::fprintf(out, "Latency (us): p50 %.2f p99 %.2f p99.9 %.2f max %.2f\n", r.latency_us.p50,
               r.latency_us.p99, r.latency_us.p999, r.latency_us.max);
  std::fflush(out);
}

void print_doca_stats(std::FILE* out, const offload::ClientReport& r) {
  std::fprintf(out, "%s\n| Stats\n%s\n", kDocaRule, kDocaRule);
  std::fprintf(out, "| Duration (seconds): %2.06lf\n", r.duration_s);
  std::fprintf(out, "| Operation count: %lu\n", static_cast<unsigned long>(r.operations));
  std::fprintf(out, "| Tx Data rate: %.03lf GiB/s\n", r.per_second(double(r.tx_bytes)) / kGiB);
  std::fprintf(out, "| Rx Data rate: %.03lf GiB/s\n", r.per_second(double(r.rx_bytes)) / kGiB);
  std::fprintf(out, "| IO rate: %.03lf MIOP/s\n", r.per_second(double(r.operations)) / 1e6);
  std::fprintf(out, "%s\n", kDocaRule);
  std::fflush(out);
}

void write_client_json(const std::string& path, const offload::ClientReport& r) {
  nlohmann::json j;
  j["duration_s"] = r.duration_s;
  j["operations"] = r.operations;
  j["tx_gib_s"] = r.per_second(double(r.tx_bytes)) / kGiB;
  j["rx_gib_s"] = r.per_second(double(r.rx_bytes)) / kGiB;
  j["miops"] = r.per_second(double(r.operations)) / 1e6;
  j["ops_per_s"] = r.per_second(double(r.operations));
  j["latency_us"] = {{"p50", r.latency_us.p50},   {"p99", r.latency_us.p99}, {"p999", r.latency_us.p999},
                     {"max", r.latency_us.max},   {"mean", r.latency_us.mean}};
  j["threads"] = r.threads;
  j["window"] = r.window;
  j["message_bytes"] = r.message_bytes;
  std::ofstream f(path);
  if (!f) throw Error("cannot write --json-out file '" + path + "'");
  f << j.dump(2) << "\n";
  if (!f) throw Error("error writing --json-out file '" + path + "'");
}

}  // namespace ferry::app
