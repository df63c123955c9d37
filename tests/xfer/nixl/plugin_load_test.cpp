// libplugin_DOCA_DMA_PROXY.so as NIXL loads it: dlopen with RTLD_LOCAL, then
// nixl_plugin_init. Checks what NIXL checks (api_version) and what a user
// sees (the name, the options, the memory types), that an engine reports a
// failed start through initErr instead of throwing into NIXL, and that the
// client library inside stays hidden from the host process.

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "xfer/nixl/nixl_plugin_abi.h"

namespace {

class PluginLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    handle_ = dlopen(FERRY_NIXL_PLUGIN, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
    auto init = reinterpret_cast<nixlBackendPlugin* (*)()>(dlsym(handle_, "nixl_plugin_init"));
    ASSERT_NE(init, nullptr) << "no nixl_plugin_init";
    plugin_ = init();
    ASSERT_NE(plugin_, nullptr);
  }
  void TearDown() override {
    if (handle_ == nullptr) return;
    if (auto fini = reinterpret_cast<void (*)()>(dlsym(handle_, "nixl_plugin_fini"))) fini();
    dlclose(handle_);
  }
  void* handle_ = nullptr;
  nixlBackendPlugin* plugin_ = nullptr;
};

TEST_F(PluginLoad, DeclaresApiVersionOneAndItsName) {
  EXPECT_EQ(plugin_->api_version, NIXL_PLUGIN_API_VERSION);
  EXPECT_STREQ(plugin_->get_plugin_name(), "DOCA_DMA_PROXY");
  EXPECT_NE(std::string(plugin_->get_plugin_version()), "");
}

TEST_F(PluginLoad, ReportsItsOptionsAndMemoryTypes) {
  const nixl_b_params_t options = plugin_->get_backend_options();
  EXPECT_EQ(options.at("endpoint"), "unix:ferry.agent");
  EXPECT_EQ(options.at("checksum"), "xxh3");
  EXPECT_GT(std::stoi(options.at("queue_depth")), 0);
  nixl_mem_list_t mems = plugin_->get_backend_mems();
  std::sort(mems.begin(), mems.end());
  EXPECT_EQ(mems, (nixl_mem_list_t{DRAM_SEG, VRAM_SEG, OBJ_SEG}));
}

TEST_F(PluginLoad, InitAgainAfterFiniGivesTheSamePlugin) {
  auto init = reinterpret_cast<nixlBackendPlugin* (*)()>(dlsym(handle_, "nixl_plugin_init"));
  auto fini = reinterpret_cast<void (*)()>(dlsym(handle_, "nixl_plugin_fini"));
  fini();
  EXPECT_EQ(init(), plugin_);
  EXPECT_EQ(plugin_->api_version, NIXL_PLUGIN_API_VERSION);
}

TEST_F(PluginLoad, AnEngineWithNoAgentSetsInitErrInsteadOfThrowing) {
  nixl_b_params_t params{{"endpoint", "unix:ferry-plugin-load-test-nobody"}, {"connect_timeout_ms", "100"}};
  nixlBackendInitParams init;
  init.localAgent = "load-test";
  init.type = "DOCA_DMA_PROXY";
  init.customParams = &params;
  init.syncMode = nixl_thread_sync_t::NIXL_THREAD_SYNC_NONE;
  nixlBackendEngine* engine = plugin_->create_engine(&init);
  ASSERT_NE(engine, nullptr);
  EXPECT_TRUE(engine->getInitErr());
  EXPECT_EQ(engine->getType(), "DOCA_DMA_PROXY");
  EXPECT_EQ(engine->getCustomParams().at("endpoint"), params.at("endpoint"));
  EXPECT_FALSE(engine->supportsRemote());
  EXPECT_TRUE(engine->supportsLocal());
  EXPECT_FALSE(engine->supportsNotif());
  plugin_->destroy_engine(engine);
}

TEST_F(PluginLoad, ExportsOnlyTheTwoEntryPoints) {
  // Ferry's own symbols (its logger, its client) must not clash with the host's.
  EXPECT_EQ(dlsym(handle_, "_ZN5ferry3log3appEv"), nullptr);
  EXPECT_EQ(dlsym(handle_, "_ZN5ferry4xfer5AgentC1ERKNS0_11AgentConfigE"), nullptr);
  // Every strong export: only the entry points. (Weak ones are the standard
  // library's template instances, the same in every copy.)
  FILE* nm = popen("nm -D --defined-only " FERRY_NIXL_PLUGIN, "r");
  ASSERT_NE(nm, nullptr);
  char line[4096];
  std::vector<std::string> strong;
  while (std::fgets(line, sizeof line, nm) != nullptr) {
    char type = 0;
    char name[4000] = {};
    if (std::sscanf(line, "%*s %c %3999s", &type, name) == 2 && (type == 'T' || type == 'D' || type == 'B'))
      strong.emplace_back(name);
  }
  ASSERT_EQ(pclose(nm), 0) << "nm failed";
  std::sort(strong.begin(), strong.end());
  EXPECT_EQ(strong, (std::vector<std::string>{"nixl_plugin_fini", "nixl_plugin_init"}));
}

}  // namespace
