// libplugin_DOCA_DMA_PROXY.so's two exported symbols. NIXL finds the file by
// its name (libplugin_<backend>.so) in NIXL_PLUGIN_DIR or its own plugins/
// folder, dlopens it, and checks only api_version. It may call
// nixl_plugin_init again after nixl_plugin_fini (querying a plugin's options
// loads and drops it), so the plugin is a static that fini leaves alone.

#include <exception>

#include "core/log.h"
#include "xfer/nixl/dma_proxy_engine.h"

namespace ferry::xfer::nixl {
namespace {

nixlBackendEngine* create_engine(const nixlBackendInitParams* init_params) {
  try {
    return new DmaProxyEngine(init_params);
  } catch (const std::exception& e) {  // nothing may unwind into libnixl
    log::app().error("{}: {}", kBackendName, e.what());
    return nullptr;
  }
}

void destroy_engine(nixlBackendEngine* engine) { delete engine; }
const char* plugin_name() { return kBackendName; }
const char* plugin_version() { return FERRY_VERSION; }
nixl_b_params_t backend_options() { return default_options(); }
nixl_mem_list_t backend_mems() { return {DRAM_SEG, VRAM_SEG, OBJ_SEG}; }

nixlBackendPlugin plugin{NIXL_PLUGIN_API_VERSION, create_engine,   destroy_engine, plugin_name,
                         plugin_version,          backend_options, backend_mems};

}  // namespace
}  // namespace ferry::xfer::nixl

extern "C" {
__attribute__((visibility("default"))) nixlBackendPlugin* nixl_plugin_init() { return &ferry::xfer::nixl::plugin; }
__attribute__((visibility("default"))) void nixl_plugin_fini() {}
}
