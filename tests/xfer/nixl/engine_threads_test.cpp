// The plugin's engine as NIXL drives it from several threads at once (its
// RW and STRICT sync modes let threads prepare, post, poll and release on one
// engine concurrently): loaded with dlopen, against a real `ferry agent`,
// every byte checked. TSan runs it too (make tsan), over the engine's locking
// and the transfer client's.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/ferry_processes.h"
#include "xfer/nixl/nixl_plugin_abi.h"

// What libnixl defines for the lists it builds; the engine only reads them.
template <>
nixlDescList<nixlMetaDesc>::nixlDescList(const nixl_mem_t& type, const int& init_size)
    : type(type), descs(static_cast<std::size_t>(init_size)) {}
template <>
void nixlDescList<nixlMetaDesc>::resize(const std::size_t& count) {
  descs.resize(count);
}
template <>
void nixlDescList<nixlMetaDesc>::addDesc(const nixlMetaDesc& desc) {
  descs.push_back(desc);
}
template <>
int nixlDescList<nixlMetaDesc>::getIndex(const nixlBasicDesc&) const {
  return -1;
}

namespace {

constexpr char kAgentName[] = "engine-threads-test";

class Plugin {
 public:
  Plugin() {
    handle_ = dlopen(FERRY_NIXL_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) throw std::runtime_error(dlerror());
    auto init = reinterpret_cast<nixlBackendPlugin* (*)()>(dlsym(handle_, "nixl_plugin_init"));
    plugin_ = init();
  }
  ~Plugin() {
    if (auto fini = reinterpret_cast<void (*)()>(dlsym(handle_, "nixl_plugin_fini"))) fini();
    dlclose(handle_);
  }
  nixlBackendEngine* engine(nixl_b_params_t& params) {
    nixlBackendInitParams init;
    init.localAgent = kAgentName;
    init.type = "DOCA_DMA_PROXY";
    init.customParams = &params;
    init.syncMode = nixl_thread_sync_t::NIXL_THREAD_SYNC_RW;
    return plugin_->create_engine(&init);
  }
  void destroy(nixlBackendEngine* engine) { plugin_->destroy_engine(engine); }

 private:
  void* handle_ = nullptr;
  nixlBackendPlugin* plugin_ = nullptr;
};

// Made, posted, polled to its end and released, as NIXL's agent does; the
// transfer's final status.
nixl_status_t transfer(nixlBackendEngine& engine, nixl_xfer_op_t op, const nixl_meta_dlist_t& local,
                       const nixl_meta_dlist_t& remote) {
  nixlBackendReqH* handle = nullptr;
  nixl_status_t s = engine.prepXfer(op, local, remote, kAgentName, handle, nullptr);
  if (s != NIXL_SUCCESS) return s;
  s = engine.postXfer(op, local, remote, kAgentName, handle, nullptr);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (s == NIXL_IN_PROG && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    s = engine.checkXfer(handle);
  }
  if (engine.releaseReqH(handle) != NIXL_SUCCESS && s == NIXL_SUCCESS) s = NIXL_ERR_BACKEND;
  return s;
}

// One thread's work: its own buffer cut into blocks of several sizes, one
// object per block, written and read back `rounds` times with fresh bytes.
// Returns what went wrong, or "" when nothing did.
std::string worker(nixlBackendEngine& engine, int id, int rounds) {
  const std::vector<std::size_t> sizes = {4096, 65536 + 4096, 1 << 20, 12288, (1 << 20) + 300, 300000};
  std::size_t total = 0;
  for (std::size_t n : sizes) total += n;
  std::vector<std::uint8_t> buf(total), expect(total);

  nixlBlobDesc mem{};
  mem.addr = reinterpret_cast<std::uintptr_t>(buf.data());
  mem.len = total;
  nixlBackendMD* mem_md = nullptr;
  if (engine.registerMem(mem, DRAM_SEG, mem_md) != NIXL_SUCCESS) return "registering the buffer failed";
  nixl_meta_dlist_t local(DRAM_SEG), remote(OBJ_SEG);
  std::vector<nixlBackendMD*> objects;
  std::size_t at = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    nixlBlobDesc obj{};
    obj.len = sizes[i];
    obj.devId = static_cast<std::uint64_t>(id * 100 + static_cast<int>(i));
    obj.metaInfo = "engine-threads/" + std::to_string(id) + "/" + std::to_string(i);
    nixlBackendMD* obj_md = nullptr;
    nixlBackendMD* loaded = nullptr;
    if (engine.registerMem(obj, OBJ_SEG, obj_md) != NIXL_SUCCESS || engine.loadLocalMD(obj_md, loaded) != NIXL_SUCCESS)
      return "registering object " + obj.metaInfo + " failed";
    objects.push_back(obj_md);
    nixlMetaDesc l{};
    l.addr = mem.addr + at;
    l.len = sizes[i];
    l.metadataP = mem_md;
    local.addDesc(l);
    nixlMetaDesc r{};
    r.addr = 0;
    r.len = sizes[i];
    r.devId = obj.devId;
    r.metadataP = loaded;
    remote.addDesc(r);
    at += sizes[i];
  }

  std::mt19937_64 rng(static_cast<std::uint64_t>(id));
  std::string failure;
  for (int round = 0; round < rounds && failure.empty(); ++round) {
    for (auto& b : expect) b = static_cast<std::uint8_t>(rng());
    std::memcpy(buf.data(), expect.data(), total);
    if (const nixl_status_t s = transfer(engine, NIXL_WRITE, local, remote); s != NIXL_SUCCESS) {
      failure = "WRITE of round " + std::to_string(round) + ": status " + std::to_string(s);
      break;
    }
    std::fill(buf.begin(), buf.end(), 0);
    if (const nixl_status_t s = transfer(engine, NIXL_READ, local, remote); s != NIXL_SUCCESS) {
      failure = "READ of round " + std::to_string(round) + ": status " + std::to_string(s);
      break;
    }
    if (buf != expect) failure = "round " + std::to_string(round) + " read back other bytes";
  }
  for (nixlBackendMD* md : objects)
    if (engine.deregisterMem(md) != NIXL_SUCCESS && failure.empty()) failure = "deregistering an object failed";
  if (engine.deregisterMem(mem_md) != NIXL_SUCCESS && failure.empty()) failure = "deregistering the buffer failed";
  return failure;
}

TEST(NixlEngineThreads, ThreadsTransferOnOneEngineAtOnceAndEveryByteComesBack) {
  ferry::test::FerryAgent agent({"dram:512MiB"});
  Plugin plugin;
  // A queue depth below the threads' transfers, so that posts also wait in the engine.
  nixl_b_params_t params{{"endpoint", agent.endpoint()}, {"queue_depth", "3"}};
  nixlBackendEngine* engine = plugin.engine(params);
  ASSERT_NE(engine, nullptr);
  ASSERT_FALSE(engine->getInitErr()) << agent.log();

  constexpr int kThreads = 6;
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] { failures[static_cast<std::size_t>(t)] = worker(*engine, t, 8); });
  for (auto& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(failures[static_cast<std::size_t>(t)], "") << "thread " << t;
  plugin.destroy(engine);
}

}  // namespace
