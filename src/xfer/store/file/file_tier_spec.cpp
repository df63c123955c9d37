#include "xfer/store/file/file_tier_spec.h"

#include "xfer/store/file/file_tier.h"
#include "xfer/store/sizes.h"
#include "xfer/store/spec_parse.h"

namespace ferry::xfer::store {
namespace {

constexpr std::string_view kUsage =
    "file:<dir>[,direct][,fsync][,capacity=<size>][,qd=<n>][,pack=<size>][,threads=<n>][,cores=<n>]";

}  // namespace

FileTierOptions parse_file_tier_spec(std::string_view spec) {
  const SpecReader r(spec, kUsage);
  if (spec.substr(0, 5) != "file:") r.fail("not a file tier");
  const auto parts = split(spec.substr(5), ',');
  if (parts[0].empty()) r.fail("no directory after 'file:'");
  FileTierOptions o;
  o.dir = std::string(parts[0]);
  o.spec = std::string(spec);
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const std::string_view p = parts[i];
    const std::size_t eq = p.find('=');
    const bool has_value = eq != std::string_view::npos;
    const std::string_view name = p.substr(0, eq);
    const std::string_view value = has_value ? p.substr(eq + 1) : std::string_view();
    if (name == "direct" && !has_value) {
      o.direct = true;
    } else if (name == "fsync" && !has_value) {
      o.fsync = true;
    } else if (name == "capacity" && has_value) {
      o.capacity = r.size(value, "capacity");
    } else if (name == "qd" && has_value) {
      o.queue_depth = static_cast<unsigned>(r.whole_number(value, "qd", 1, 4096));
    } else if (name == "threads" && has_value) {
      o.threads = static_cast<unsigned>(r.whole_number(value, "threads", 1, 64));
    } else if (name == "cores" && has_value) {
      o.cores = static_cast<unsigned>(r.whole_number(value, "cores", 1, 4096));
    } else if (name == "pack" && has_value) {
      o.pack_threshold = r.size(value, "pack", /*zero_ok=*/true);
      if (o.pack_threshold > o.pack_max)
        r.fail("pack=" + std::string(value) + " is larger than a pack file (" + format_size(o.pack_max) +
               "); objects larger than pack= get a file each");
    } else {
      r.fail("unknown file tier option '" + std::string(p) +
             "' (options: direct, fsync, capacity=<size>, qd=<n>, pack=<size>, threads=<n>, cores=<n>)");
    }
  }
  return o;
}

TierKind file_tier_kind() {
  return {"file", std::string(kUsage),
          [](std::string_view spec) { return std::make_unique<FileTier>(parse_file_tier_spec(spec)); }};
}

}  // namespace ferry::xfer::store
