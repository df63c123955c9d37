#include "ferry/xfer/tier_registry.h"

#include <algorithm>
#include <mutex>

#include "ferry/core/status.h"
#include "xfer/store/dram/dram_tier_spec.h"
#include "xfer/store/file/file_tier_spec.h"
#include "xfer/store/redis/redis_tier_spec.h"

namespace ferry::xfer::store {
namespace {

// Built-ins are added on first use rather than by static registrars in their
// own files: a static library drops an object file nothing refers to, and with
// it such a registrar.
class Registry {
 public:
  Registry() {
    for (TierKind k : {dram_tier_kind(), file_tier_kind(), redis_tier_kind(), redis_cluster_tier_kind()})
      kinds_.push_back(std::move(k));
  }

  void add(TierKind kind) {
    check_scheme(kind.scheme);
    if (kind.usage.empty()) throw Error("tier kind '" + kind.scheme + "': no usage given");
    if (!kind.make) throw Error("tier kind '" + kind.scheme + "': no make function given");
    std::lock_guard lock(mu_);
    if (find(kind.scheme) != nullptr) throw Error("tier kind '" + kind.scheme + "' is registered already");
    kinds_.push_back(std::move(kind));
  }

  std::vector<TierKind> all() const {
    std::lock_guard lock(mu_);
    return kinds_;
  }

  std::unique_ptr<Tier> make(std::string_view spec) const {
    const std::size_t colon = spec.find(':');
    std::function<std::unique_ptr<Tier>(std::string_view)> make;
    {
      std::lock_guard lock(mu_);
      if (colon != std::string_view::npos)
        if (const TierKind* k = find(spec.substr(0, colon))) make = k->make;
    }
    if (!make)
      throw Error("tier '" + std::string(spec) + "': " +
                  (colon == std::string_view::npos
                       ? std::string("no tier kind")
                       : "unknown tier kind '" + std::string(spec.substr(0, colon)) + "'") +
                  " (accepted forms: " + forms() + ")");
    // Outside the lock: opening a tier may take long (a directory scan), and
    // may register another kind.
    std::unique_ptr<Tier> tier = make(spec);
    if (tier == nullptr) throw Error("tier '" + std::string(spec) + "': its kind made no tier");
    return tier;
  }

 private:
  static void check_scheme(const std::string& s) {
    const auto ok = [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.';
    };
    if (s.empty() || s[0] < 'a' || s[0] > 'z' || !std::all_of(s.begin(), s.end(), ok))
      throw Error("tier kind '" + s +
                  "': a scheme is a lower-case letter, then lower-case letters, digits, '+', '-' or '.'");
  }

  // Every kind's usage, for the error of a spec of no kind.
  std::string forms() const {
    std::lock_guard lock(mu_);
    std::string out;
    for (const TierKind& k : kinds_) out += (out.empty() ? "" : ", ") + k.usage;
    return out;
  }

  const TierKind* find(std::string_view scheme) const {
    for (const TierKind& k : kinds_)
      if (k.scheme == scheme) return &k;
    return nullptr;
  }

  mutable std::mutex mu_;
  std::vector<TierKind> kinds_;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void register_tier(TierKind kind) {
  registry().add(std::move(kind));
}

std::vector<TierKind> registered_tiers() {
  return registry().all();
}

std::unique_ptr<Tier> make_tier(std::string_view spec) {
  return registry().make(spec);
}

}  // namespace ferry::xfer::store
