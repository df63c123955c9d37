// A program adds its own storage tier to the agent, as docs/xfer-tiers.md
// "Adding a tier" shows: it sees only the public headers (include/ferry/...)
// and links only the libraries an installed package's ferry::xfer_agent and
// ferry::xfer_store name. It hosts an agent whose chain is its own tier over
// Ferry's dram tier, and moves bytes through it with the application API over
// a real socket. Exits 0 when every check passes.

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "ferry/core/status.h"
#include "ferry/xfer/agent.h"
#include "ferry/xfer/agent_service.h"
#include "ferry/xfer/buffer.h"
#include "ferry/xfer/checksum.h"
#include "ferry/xfer/tier_registry.h"

namespace {

using namespace ferry;
using namespace ferry::xfer;

int failures = 0;
void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

// "scratch:<objects>": at most that many objects, kept in a map, each with
// the checksum the agent computed; verified on every get.
class ScratchTier final : public store::Tier {
 public:
  explicit ScratchTier(std::string_view spec) : spec_(spec) {
    const std::string n(spec.substr(spec.find(':') + 1));
    char* end = nullptr;
    limit_ = std::strtoul(n.c_str(), &end, 10);
    if (n.empty() || *end != '\0' || limit_ == 0)
      throw Error("tier '" + spec_ + "': give the number of objects it may hold, more than 0");
  }

  std::string_view kind() const override { return "scratch"; }
  std::string describe() const override { return spec_; }
  std::uint64_t capacity() const override { return store::kUnbounded; }
  std::uint64_t used() const override {
    std::lock_guard lock(mu_);
    std::uint64_t n = 0;
    for (const auto& [key, o] : objects_) n += o.bytes.size();
    return n;
  }

  void put(std::span<store::PutItem> items, Fault& /*fault*/) noexcept override {
    std::lock_guard lock(mu_);
    for (store::PutItem& item : items) {
      const std::string key(item.key);
      if (!objects_.contains(key) && objects_.size() >= limit_) {
        item.status = XferStatus::NoSpace;  // the chain moves our oldest objects down, then asks again
        continue;
      }
      Object& o = objects_[key];
      o.bytes.assign(item.data.data, item.data.data + item.data.size);
      o.checksum = item.checksum;
      touch(key);
      item.status = XferStatus::Ok;
      ++puts_;
    }
  }

  void get(std::span<store::GetItem> items, Fault& fault) noexcept override {
    std::lock_guard lock(mu_);
    for (store::GetItem& item : items) {
      const auto it = objects_.find(std::string(item.key));
      if (it == objects_.end()) {
        item.status = XferStatus::NotFound;
        continue;
      }
      const Object& o = it->second;
      item.size = o.bytes.size();
      if (o.bytes.size() > item.out.size) {
        item.status = fault.raise(XferStatus::TooLarge, "scratch: object " + std::string(item.key) + " is larger than its buffer", item.key);
        continue;
      }
      if (checksum(ByteView{o.bytes.data(), o.bytes.size()}) != o.checksum) {
        item.status = fault.raise(XferStatus::ChecksumMismatch, "scratch: object " + std::string(item.key) + " fails its checksum", item.key);
        continue;
      }
      std::memcpy(item.out.data, o.bytes.data(), o.bytes.size());
      touch(it->first);
      item.status = XferStatus::Ok;
    }
  }

  std::optional<store::ObjectMeta> stat(std::string_view key) noexcept override {
    std::lock_guard lock(mu_);
    const auto it = objects_.find(std::string(key));
    if (it == objects_.end()) return std::nullopt;
    return store::ObjectMeta{it->second.bytes.size(), it->second.checksum};
  }

  XferStatus remove(std::string_view key, Fault& /*fault*/) noexcept override {
    std::lock_guard lock(mu_);
    if (objects_.erase(std::string(key)) == 0) return XferStatus::NotFound;
    lru_.remove(std::string(key));
    return XferStatus::Ok;
  }

  XferStatus list(std::vector<std::pair<std::string, store::ObjectMeta>>* out, Fault& /*fault*/) noexcept override {
    std::lock_guard lock(mu_);
    for (const auto& [key, o] : objects_) out->emplace_back(key, store::ObjectMeta{o.bytes.size(), o.checksum});
    return XferStatus::Ok;
  }

  std::vector<std::string> lru_victims(std::uint64_t bytes) noexcept override {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    std::uint64_t sum = 0;
    for (const std::string& key : lru_) {
      if (sum >= bytes && !out.empty()) break;
      out.push_back(key);
      sum += objects_[key].bytes.size();
    }
    return out;
  }

  // For the test: flips a byte of the object whose key ends in `key` (the
  // agent prefixes the application's keys with its namespace), as a failing
  // medium would.
  bool corrupt(const std::string& key) {
    std::lock_guard lock(mu_);
    for (auto& [stored, o] : objects_)
      if (stored.ends_with(key) && !o.bytes.empty()) {
        o.bytes[0] ^= 0x5a;
        return true;
      }
    return false;
  }
  std::uint64_t puts() const {
    std::lock_guard lock(mu_);
    return puts_;
  }

 private:
  struct Object {
    std::vector<std::uint8_t> bytes;
    std::uint64_t checksum = 0;
  };
  void touch(const std::string& key) {  // mu_ held
    lru_.remove(key);
    lru_.push_back(key);
  }

  std::string spec_;
  std::size_t limit_ = 0;
  mutable std::mutex mu_;
  std::map<std::string, Object> objects_;
  std::list<std::string> lru_;  // oldest first
  std::uint64_t puts_ = 0;
};

ScratchTier* the_scratch = nullptr;  // the one the agent made, for the checks

std::vector<std::uint8_t> pattern(std::size_t n, unsigned seed) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>((i * 131 + seed * 7) >> 3);
  return v;
}

}  // namespace

int main() {
  store::register_tier({.scheme = "scratch",
                        .usage = "scratch:<objects>",
                        .make = [](std::string_view spec) {
                          auto t = std::make_unique<ScratchTier>(spec);
                          the_scratch = t.get();
                          return t;
                        }});

  // A spec of no kind names ours among the accepted forms; a bad one of ours gets our error.
  try {
    store::make_tier("floppy:3");
    check(false, "an unknown kind is refused");
  } catch (const Error& e) {
    check(std::string(e.what()).find("scratch:<objects>") != std::string::npos,
          std::string("an unknown kind's error lists scratch:<objects>: ") + e.what());
  }
  try {
    store::make_tier("scratch:none");
    check(false, "a bad scratch spec is refused");
  } catch (const Error& e) {
    check(std::string(e.what()).find("number of objects") != std::string::npos, e.what());
  }

  AgentServiceOptions options;
  options.endpoint = "unix:ferry-tier-outside-" + std::to_string(::getpid());
  options.tiers = {"scratch:4", "dram:16MiB"};
  options.gpu = kGpuNone;
  options.staging_mib = 16;
  AgentService service(options);
  service.start();

  Agent agent({.endpoint = service.endpoint(), .name = "tier-outside"});
  check(agent.tiers().size() == 2 && agent.tiers()[0] == "scratch:4", "the agent's chain starts with scratch:4");

  // Ten objects of mixed sizes through a chain whose top tier holds four.
  constexpr int kObjects = 10;
  std::vector<std::vector<std::uint8_t>> data;
  std::vector<std::string> keys;
  std::size_t total = 0;
  for (int i = 0; i < kObjects; ++i) {
    data.push_back(pattern(std::size_t{1000} + std::size_t(i) * 37'000, i));
    keys.push_back("outside/" + std::to_string(i));
    total += data.back().size();
  }
  Buffer out = Buffer::allocate(MemType::Dram, total);
  Buffer in = Buffer::allocate(MemType::Dram, total);
  agent.register_memory(out);
  agent.register_memory(in);
  std::vector<MemDesc> out_descs, in_descs;
  std::size_t at = 0;
  for (const auto& d : data) {
    std::memcpy(static_cast<std::uint8_t*>(out.data()) + at, d.data(), d.size());
    out_descs.push_back({reinterpret_cast<std::uint64_t>(out.data()) + at, d.size(), 0});
    in_descs.push_back({reinterpret_cast<std::uint64_t>(in.data()) + at, d.size(), 0});
    at += d.size();
  }
  for (int i = 0; i < kObjects; ++i) {  // one at a time, so that the order of use is known
    const XferReq w = agent.create_xfer_req(XferOp::Write, {&out_descs[i], 1}, {&keys[i], 1});
    const XferStatus s = agent.post(w) == XferStatus::InProgress ? agent.wait(w, 10'000) : agent.status(w);
    check(s == XferStatus::Ok, "write " + keys[i] + ": " + to_string(s));
    agent.release(w);
  }
  check(the_scratch != nullptr && the_scratch->puts() >= kObjects, "every object went through scratch first");

  const XferReq r = agent.create_xfer_req(XferOp::Read, in_descs, keys);
  const XferStatus rs = agent.post(r) == XferStatus::InProgress ? agent.wait(r, 10'000) : agent.status(r);
  check(rs == XferStatus::Ok, std::string("read all back: ") + to_string(rs));
  const auto results = agent.results(r);
  int in_scratch = 0, in_dram = 0;
  for (const auto& res : results) {
    if (res.tier == "scratch:4") ++in_scratch;
    if (res.tier == "dram:16MiB") ++in_dram;
  }
  check(std::memcmp(in.data(), out.data(), total) == 0, "every byte read back equals what was written");
  check(in_scratch == 4 && in_dram == kObjects - 4,
        "the four newest in scratch, the rest moved down to dram (" + std::to_string(in_scratch) + " and " +
            std::to_string(in_dram) + ")");
  agent.release(r);

  // A flipped byte in our tier is reported, never returned as data.
  const std::string& newest = keys.back();
  check(the_scratch->corrupt(newest), "corrupt " + newest);
  const XferReq bad = agent.create_xfer_req(XferOp::Read, {&in_descs.back(), 1}, {&newest, 1});
  const XferStatus bs = agent.post(bad) == XferStatus::InProgress ? agent.wait(bad, 10'000) : agent.status(bad);
  check(bs == XferStatus::ChecksumMismatch, std::string("a corrupt object reads as ") + to_string(bs));
  agent.release(bad);

  service.stop();
  service.wait();
  std::printf("%s\n", failures == 0 ? "all checks passed" : "FAILED");
  return failures == 0 ? 0 : 1;
}
