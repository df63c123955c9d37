#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "ferry/core/status.h"
#include "ferry/xfer/agent.h"
#include "kv_tool.h"

namespace ferry::xfer {
namespace {

Agent connect(const std::string& endpoint, const char* name) {
  AgentConfig c;
  c.endpoint = endpoint;
  c.name = name;
  return Agent(c);
}

// Runs one transfer of a whole buffer and reports its per-descriptor outcome.
int transfer_one(Agent& agent, XferOp op, const Buffer& buf, std::size_t len, const std::string& key,
                 DescResult* out) {
  agent.register_memory(buf);
  const MemDesc d{reinterpret_cast<std::uint64_t>(buf.data()), len, 0};
  const std::string keys[] = {key};
  const XferReq req = agent.create_xfer_req(op, {&d, 1}, keys);
  XferStatus s = agent.post(req);
  if (s == XferStatus::InProgress) s = agent.wait(req);
  const auto results = agent.results(req);
  *out = results.empty() ? DescResult{s, 0, "", to_string(s)} : results[0];
  agent.release(req);
  if (s != XferStatus::Ok) {
    std::fprintf(stderr, "ferry kv: %s: %s (%s)\n", key.c_str(), out->error.c_str(), to_string(out->status));
    return 1;
  }
  return 0;
}

}  // namespace

int kv_push(const KvOptions& o) {
  if (o.keys.size() != 1) throw Error("kv push takes exactly one KEY");
  std::string data;
  if (o.random_bytes > 0) {
    data.resize(o.random_bytes);
    std::mt19937_64 rng(std::random_device{}());
    for (auto& c : data) c = static_cast<char>(rng());
  } else {
    std::ifstream in(o.file, std::ios::binary);
    if (o.file.empty() || !in) throw Error("kv push: cannot read '" + o.file + "' (give --file or --random-bytes)");
    data.assign(std::istreambuf_iterator<char>(in), {});
  }
  if (data.empty()) throw Error("kv push: nothing to push (empty input)");
  Agent agent = connect(o.endpoint, "ferry kv push");
  Buffer buf = Buffer::allocate(MemType::Dram, data.size());
  buf.write(0, data.data(), data.size());
  DescResult r;
  const int rc = transfer_one(agent, XferOp::Write, buf, data.size(), o.keys[0], &r);
  if (rc == 0) std::printf("%s: %llu bytes stored in %s\n", o.keys[0].c_str(), (unsigned long long)r.size, r.tier.c_str());
  return rc;
}

int kv_pull(const KvOptions& o) {
  if (o.keys.size() != 1) throw Error("kv pull takes exactly one KEY");
  Agent agent = connect(o.endpoint, "ferry kv pull");
  std::uint64_t size = 0;
  bool found = false;
  // In key order the key itself comes first among those it prefixes.
  for (const auto& obj : agent.list_page(o.keys[0], {}, 1).objects)
    if (obj.key == o.keys[0]) {
      size = obj.size;
      found = true;
    }
  if (!found) {
    std::fprintf(stderr, "ferry kv: %s: not found in any tier\n", o.keys[0].c_str());
    return 1;
  }
  Buffer buf = Buffer::allocate(MemType::Dram, size == 0 ? 1 : size);
  DescResult r;
  if (const int rc = transfer_one(agent, XferOp::Read, buf, size == 0 ? 1 : size, o.keys[0], &r); rc != 0) return rc;
  std::string data(r.size, '\0');
  buf.read(0, data.data(), r.size);
  if (o.file.empty() || o.file == "-") {
    std::fwrite(data.data(), 1, data.size(), stdout);
  } else {
    std::ofstream out(o.file, std::ios::binary);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!out) throw Error("kv pull: cannot write '" + o.file + "'");
    std::fprintf(stderr, "%s: %llu bytes from %s -> %s\n", o.keys[0].c_str(), (unsigned long long)r.size,
                 r.tier.c_str(), o.file.c_str());
  }
  return 0;
}

int kv_ls(const KvOptions& o) {
  Agent agent = connect(o.endpoint, "ferry kv ls");
  // Page by page, so that a listing of any length streams out in bounded frames.
  std::string after;
  do {
    ObjectPage page = agent.list_page(o.prefix, after);
    for (const auto& obj : page.objects) {
      if (o.json)
        std::cout << nlohmann::json{{"key", obj.key}, {"size", obj.size}, {"tier", obj.tier}}.dump() << "\n";
      else
        std::cout << obj.size << "\t" << obj.tier << "\t" << obj.key << "\n";
    }
    after = std::move(page.next);
  } while (!after.empty());
  return 0;
}

int kv_rm(const KvOptions& o) {
  if (o.keys.empty()) throw Error("kv rm needs at least one KEY");
  Agent agent = connect(o.endpoint, "ferry kv rm");
  const std::size_t n = agent.remove(o.keys);
  std::printf("removed %zu of %zu\n", n, o.keys.size());
  return n == o.keys.size() ? 0 : 1;
}

int kv_exists(const KvOptions& o) {
  if (o.keys.empty()) throw Error("kv exists needs at least one KEY");
  Agent agent = connect(o.endpoint, "ferry kv exists");
  const std::vector<bool> found = agent.exists(o.keys);
  std::size_t n = 0;
  for (std::size_t i = 0; i < found.size(); ++i) {
    std::printf("%s\t%s\n", found[i] ? "found" : "missing", o.keys[i].c_str());
    n += found[i];
  }
  return n == o.keys.size() ? 0 : 1;
}

}  // namespace ferry::xfer
