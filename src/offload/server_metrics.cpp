#include "offload/server_metrics.h"

#include <utility>

namespace ferry::offload {

void write_stage_latencies(prom::TextWriter& w, std::string_view name, const ServerStats& st) {
  const std::pair<const char*, const StageLatency*> stages[] = {
      {"read", &st.read}, {"queue", &st.queue}, {"handle", &st.handle}, {"write", &st.write}};
  for (const auto& [stage, h] : stages)
    w.histogram(name, {{"stage", stage}}, kStageBoundsSeconds, h->counts, h->sum_us / 1e6);
}

std::string render_server_metrics(const ServerStats& st) {
  prom::TextWriter w;
  w.counter("ferry_server_requests_total", "Requests taken from clients and posted to the channels.",
            st.requests);
  w.counter("ferry_server_responses_total", "Responses taken from the channels.", st.responses);
  w.family("ferry_server_bytes_total", "counter",
           "Bytes by direction: in (requests as received, framing included), out (responses as written).");
  w.sample("ferry_server_bytes_total", {{"direction", "in"}}, st.request_bytes);
  w.sample("ferry_server_bytes_total", {{"direction", "out"}}, st.response_bytes);
  w.family(
      "ferry_server_errors_total", "counter",
      "Clients answered with an error and closed, by kind; dropped_response: a response whose client had "
      "gone.");
  for (std::size_t k = 0; k < kRefusalKinds.size(); ++k)
    w.sample("ferry_server_errors_total", {{"kind", kRefusalKinds[k]}}, st.refused[k]);
  w.sample("ferry_server_errors_total", {{"kind", "dropped_response"}}, st.dropped_responses);
  w.gauge("ferry_server_clients", "Client connections open now.", st.clients);
  w.gauge("ferry_server_queue_depth", "Requests in the channels now, waiting for a worker or on one.",
          st.in_flight);
  w.gauge("ferry_server_orchestrator_attached", "1 while an orchestrator is attached.",
          st.orchestrator_attached ? 1 : 0);
  w.family(
      "ferry_server_stage_seconds", "histogram",
      "Time of each stage of a request: read (first byte to last), queue (in the channel before a worker "
      "took it), handle (on the worker, where the framing reports it), write (response ready to sent).");
  write_stage_latencies(w, "ferry_server_stage_seconds", st);
  return w.take();
}

}  // namespace ferry::offload
