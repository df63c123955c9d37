// The metrics endpoint's request-head parser (src/core/metrics_endpoint.cpp),
// on any bytes a client sends before its blank line. Beside ASan/UBSan, it checks:
//  - only a head that ends in CRLF CRLF is anything but 400;
//  - 200 only for GET or HEAD of /metrics or /health (a query allowed), 405
//    for another method, 404 for another path; HEAD is reported as such;
//  - the answer depends on the head alone: parsing a copy gives the same.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/metrics_endpoint.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view head(reinterpret_cast<const char*>(data), size);
  const ferry::MetricsRequest r = ferry::parse_metrics_request(head);
  FUZZ_CHECK(r.status == 200 || r.status == 400 || r.status == 404 || r.status == 405);
  const std::string copy(head);
  const ferry::MetricsRequest again = ferry::parse_metrics_request(copy);
  FUZZ_CHECK(again.status == r.status && again.head == r.head && again.metrics == r.metrics);
  if (r.status == 400) return 0;
  FUZZ_CHECK(head.size() >= 4 && head.substr(head.size() - 4) == "\r\n\r\n");
  const bool get = head.starts_with("GET /"), head_method = head.starts_with("HEAD /");
  if (r.status == 405) {
    FUZZ_CHECK(!get && !head_method);
    return 0;
  }
  FUZZ_CHECK(get || head_method);
  FUZZ_CHECK(r.head == head_method);
  const std::string_view target = head.substr(head.find(' ') + 1);
  const bool metrics = target.starts_with("/metrics ") || target.starts_with("/metrics?");
  const bool health = target.starts_with("/health ") || target.starts_with("/health?");
  if (r.status == 404) {
    FUZZ_CHECK(!metrics && !health);
    return 0;
  }
  FUZZ_CHECK(r.status == 200 && (r.metrics ? metrics : health));
  return 0;
}
