#include "xfer/agent/job_results.h"

#include "xfer/store/quote_key.h"

namespace ferry::xfer::agent {

namespace {

// `text` with every quoted `key` (as the tiers quote it) in its namespace-free form.
std::string without_namespace(std::string text, std::string_view key, std::string_view ns) {
  if (ns.empty() || key.substr(0, ns.size()) != ns) return text;
  const std::string from = store::quote_key(key), to = store::quote_key(key.substr(ns.size()));
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

}  // namespace

void describe_results(Job& job, std::span<const std::string> tier_names, std::string_view ns) {
  const bool failed = job.fault.failed();
  const std::string first_key = failed ? job.fault.key() : std::string();
  const std::string detail = failed ? without_namespace(job.fault.detail(), first_key, ns) : std::string();
  const auto user_key = [&](std::string_view key) {
    return key.substr(0, ns.size()) == ns ? key.substr(ns.size()) : key;
  };
  const XferStatus first_status = job.fault.status();
  for (std::size_t i = 0; i < job.results.size(); ++i) {
    DescResult& r = job.results[i];
    const int t = i < job.tiers.size() ? job.tiers[i] : -1;
    if (t >= 0 && static_cast<std::size_t>(t) < tier_names.size()) r.tier = tier_names[static_cast<std::size_t>(t)];
    if (!is_error(r.status) || !r.error.empty()) continue;
    const std::string_view key = job.descs[i].key;
    if (failed && !first_key.empty() && key == first_key) {
      r.error = detail;
    } else if (failed && first_key.empty() && r.status == first_status) {
      r.error = store::quote_key(user_key(key)) + ": " + detail;
    } else if (r.status == XferStatus::NotFound) {
      r.error = "no tier holds " + store::quote_key(user_key(key));
    } else {
      r.error = store::quote_key(user_key(key)) + ": " + to_string(r.status);
    }
  }
}

}  // namespace ferry::xfer::agent
