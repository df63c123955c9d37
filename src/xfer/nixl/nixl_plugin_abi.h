#pragma once
// NIXL's backend-plugin interface, declared here because NIXL's wheels ship no
// headers. It matches NIXL 1.5.1 (PyPI nixl-cu12 / nixl-cu13 1.5.1).
//
// Written from ai-dynamo/nixl at v1.4.0: src/api/cpp/backend/backend_engine.h,
// backend_plugin.h, backend_aux.h, src/api/cpp/nixl_types.h and
// nixl_descriptors.h. Those files are unchanged through 1.4.1, and 1.5.1's
// binaries agree with them: the vtables of libplugin_POSIX.so and
// libplugin_OBJ.so have these 27 slots in this order, and libnixl.so reads
// nixlBackendEngine's members at the offsets asserted below (getInitErr() is
// `cmpb $0,0xa0(%rax)` right after create_engine). docs/nixl.md says how to
// check a new NIXL release against this file.
//
// What a plugin may rely on:
// - libnixl reaches the engine only through its vtable and the three inline
//   getters; the order of the virtuals and the layout of the members are the
//   ABI, names are not.
// - Descriptor lists arrive built by libnixl. The accessors used here are
//   inline; everything else of nixlDescList lives in libnixl_build.so, which a
//   plugin loaded with RTLD_LOCAL cannot reach. So never construct a NIXL
//   type, only read the ones given.
// - std::string, std::vector and std::unordered_map cross the boundary both
//   ways: the plugin must use the shared libstdc++ with the C++11 string ABI.
//
// Names and spellings are NIXL's, so that the file can be diffed against
// theirs.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

// NOLINTBEGIN: NIXL's names.

enum nixl_mem_t { DRAM_SEG, VRAM_SEG, BLK_SEG, OBJ_SEG, FILE_SEG };

enum nixl_xfer_op_t { NIXL_READ, NIXL_WRITE };

enum nixl_status_t {
  NIXL_IN_PROG = 1,
  NIXL_SUCCESS = 0,
  NIXL_ERR_NOT_POSTED = -1,
  NIXL_ERR_INVALID_PARAM = -2,
  NIXL_ERR_BACKEND = -3,
  NIXL_ERR_NOT_FOUND = -4,
  NIXL_ERR_MISMATCH = -5,
  NIXL_ERR_NOT_ALLOWED = -6,
  NIXL_ERR_REPOST_ACTIVE = -7,
  NIXL_ERR_UNKNOWN = -8,
  NIXL_ERR_NOT_SUPPORTED = -9,
  NIXL_ERR_REMOTE_DISCONNECT = -10,
  NIXL_ERR_CANCELED = -11,
  NIXL_ERR_NO_TELEMETRY = -12
};

enum class nixl_thread_sync_t {
  NIXL_THREAD_SYNC_NONE,
  NIXL_THREAD_SYNC_STRICT,
  NIXL_THREAD_SYNC_RW,
  NIXL_THREAD_SYNC_DEFAULT = NIXL_THREAD_SYNC_NONE
};

enum class nixl_cost_t { ANALYTICAL_BACKEND = 0 };

// src/core/telemetry/telemetry_event.h; only its size matters here.
enum class nixl_telemetry_event_type_t : std::uint32_t {};
struct nixlTelemetryEvent {
  nixl_telemetry_event_type_t eventType_;
  std::uint64_t value_;
};

using nixl_backend_t = std::string;
using nixl_blob_t = std::string;
using nixl_mem_list_t = std::vector<nixl_mem_t>;
using nixl_b_params_t = std::unordered_map<std::string, std::string>;
using nixl_query_resp_t = std::optional<nixl_b_params_t>;
using nixlMemViewH = void*;
using notif_list_t = std::vector<std::pair<std::string, std::string>>;

class nixlBackendH;

struct nixlAgentOptionalArgs {
  std::vector<nixlBackendH*> backends;
  std::optional<nixl_blob_t> notif;
  nixl_blob_t notifMsg;
  bool hasNotif = false;
  bool skipDescMerge = false;
  bool includeConnInfo = false;
  std::string ipAddr;
  int port = 8888;
  std::string metadataLabel;
  nixl_blob_t customParam;
};
using nixl_opt_args_t = nixlAgentOptionalArgs;

struct nixlBackendOptionalArgs {
  nixl_blob_t notifMsg;
  bool hasNotif = false;
  nixl_blob_t customParam;
};
using nixl_opt_b_args_t = nixlBackendOptionalArgs;

class nixlBackendInitParams {
 public:
  std::string localAgent;
  nixl_backend_t type;
  nixl_b_params_t* customParams = nullptr;  // the dict given to create_backend; never null
  bool enableProgTh = false;
  std::uint64_t pthrDelay = 0;  // nixlTime::us_t
  nixl_thread_sync_t syncMode;
  bool enableTelemetry_ = false;
};

class nixlBackendReqH {
 public:
  nixlBackendReqH() {}
  virtual ~nixlBackendReqH() {}
};

class nixlBackendMD {
 protected:
  bool isPrivateMD;

 public:
  explicit nixlBackendMD(bool isPrivate) : isPrivateMD(isPrivate) {}
  virtual ~nixlBackendMD() {}
};

// No virtuals: 24 bytes of plain data (the constructors are libnixl's).
class nixlBasicDesc {
 public:
  std::uintptr_t addr;
  std::size_t len;
  std::uint64_t devId;
};

class nixlBlobDesc : public nixlBasicDesc {
 public:
  nixl_blob_t metaInfo;
};

class nixlMetaDesc : public nixlBasicDesc {
 public:
  nixlBackendMD* metadataP;  // what registerMem (or loadLocalMD) gave for the covering registration
};

struct nixlRemoteMetaDesc : public nixlMetaDesc {
  std::string remoteAgent;
};

// Read-only here: the out-of-line members are declared for the vtable's
// shape and never defined or called by the plugin (a test that builds lists
// as libnixl does defines them: tests/xfer/nixl/engine_threads_test.cpp).
template <class T>
class nixlDescList {
 protected:
  nixl_mem_t type;
  std::vector<T> descs;

 public:
  nixlDescList(const nixl_mem_t& type, const int& init_size = 0);
  nixlDescList(const nixlDescList&) = delete;
  nixlDescList& operator=(const nixlDescList&) = delete;
  virtual ~nixlDescList() = default;
  nixl_mem_t getType() const { return type; }
  int descCount() const { return static_cast<int>(descs.size()); }
  bool isEmpty() const noexcept { return descs.empty(); }
  const T& operator[](std::size_t index) const { return descs[index]; }
  virtual void resize(const std::size_t& count);
  virtual void addDesc(const T& desc);
  virtual int getIndex(const nixlBasicDesc& query) const;
};
using nixl_meta_dlist_t = nixlDescList<nixlMetaDesc>;
using nixl_reg_dlist_t = nixlDescList<nixlBlobDesc>;
using nixl_remote_meta_dlist_t = nixlDescList<nixlRemoteMetaDesc>;

class nixlBackendEngine {
 private:
  nixl_backend_t backendType;
  nixl_b_params_t customParams;
  std::vector<nixlTelemetryEvent> telemetryEvents_;
  std::mutex telemetryEventsMutex_;

 protected:
  bool initErr = false;  // set by a constructor that failed: create_backend then fails with NIXL_ERR_BACKEND
  const std::string localAgent;
  const bool enableTelemetry_;

 public:
  explicit nixlBackendEngine(const nixlBackendInitParams* init_params)
      : backendType(init_params->type),
        customParams(*init_params->customParams),
        localAgent(init_params->localAgent),
        enableTelemetry_(init_params->enableTelemetry_) {}
  nixlBackendEngine(const nixlBackendEngine&) = delete;
  nixlBackendEngine& operator=(const nixlBackendEngine&) = delete;
  nixlBackendEngine(nixlBackendEngine&&) = delete;
  nixlBackendEngine& operator=(nixlBackendEngine&&) = delete;

  virtual ~nixlBackendEngine() = default;

  bool getInitErr() const noexcept { return initErr; }
  const nixl_backend_t& getType() const noexcept { return backendType; }
  const nixl_b_params_t& getCustomParams() const noexcept { return customParams; }

  virtual bool supportsRemote() const = 0;
  virtual bool supportsLocal() const = 0;
  virtual bool supportsNotif() const = 0;
  virtual nixl_mem_list_t getSupportedMems() const = 0;
  virtual nixl_status_t registerMem(const nixlBlobDesc& mem, const nixl_mem_t& nixl_mem, nixlBackendMD*& out) = 0;
  virtual nixl_status_t deregisterMem(nixlBackendMD* meta) = 0;
  virtual nixl_status_t connect(const std::string& remote_agent) = 0;
  virtual nixl_status_t disconnect(const std::string& remote_agent) = 0;
  virtual nixl_status_t unloadMD(nixlBackendMD* input) = 0;
  virtual nixl_status_t prepXfer(const nixl_xfer_op_t& operation, const nixl_meta_dlist_t& local,
                                 const nixl_meta_dlist_t& remote, const std::string& remote_agent,
                                 nixlBackendReqH*& handle, const nixl_opt_b_args_t* opt_args = nullptr) const = 0;
  virtual nixl_status_t postXfer(const nixl_xfer_op_t& operation, const nixl_meta_dlist_t& local,
                                 const nixl_meta_dlist_t& remote, const std::string& remote_agent,
                                 nixlBackendReqH*& handle, const nixl_opt_b_args_t* opt_args = nullptr) const = 0;
  virtual nixl_status_t checkXfer(nixlBackendReqH* handle) const = 0;
  virtual nixl_status_t releaseReqH(nixlBackendReqH* handle) const = 0;
  // The remote overload comes first in the vtable.
  virtual nixl_status_t prepMemView(const nixl_remote_meta_dlist_t&, nixlMemViewH&,
                                    const nixl_opt_b_args_t* = nullptr) const {
    return NIXL_ERR_NOT_SUPPORTED;
  }
  virtual nixl_status_t prepMemView(const nixl_meta_dlist_t&, nixlMemViewH&, const nixl_opt_b_args_t* = nullptr) const {
    return NIXL_ERR_NOT_SUPPORTED;
  }
  virtual void releaseMemView(nixlMemViewH) const {}
  virtual nixl_status_t getPublicData(const nixlBackendMD*, std::string&) const { return NIXL_ERR_BACKEND; }
  virtual nixl_status_t getConnInfo(std::string&) const { return NIXL_ERR_BACKEND; }
  virtual nixl_status_t loadRemoteConnInfo(const std::string&, const std::string&) { return NIXL_ERR_BACKEND; }
  virtual nixl_status_t loadRemoteMD(const nixlBlobDesc&, const nixl_mem_t&, const std::string&, nixlBackendMD*&) {
    return NIXL_ERR_BACKEND;
  }
  // Called for every registration when supportsLocal(): the metadata that
  // transfers naming this agent itself carry.
  virtual nixl_status_t loadLocalMD(nixlBackendMD*, nixlBackendMD*&) { return NIXL_ERR_BACKEND; }
  virtual nixl_status_t getNotifs(notif_list_t&) { return NIXL_ERR_BACKEND; }
  virtual nixl_status_t genNotif(const std::string&, const std::string&) const { return NIXL_ERR_BACKEND; }
  virtual nixl_status_t queryMem(const nixl_reg_dlist_t&, std::vector<nixl_query_resp_t>&) const {
    return NIXL_ERR_NOT_SUPPORTED;
  }
  virtual nixl_status_t estimateXferCost(const nixl_xfer_op_t&, const nixl_meta_dlist_t&, const nixl_meta_dlist_t&,
                                         const std::string&, nixlBackendReqH* const&, std::chrono::microseconds&,
                                         std::chrono::microseconds&, nixl_cost_t&,
                                         const nixl_opt_args_t* = nullptr) const {
    return NIXL_ERR_NOT_SUPPORTED;
  }
};

#define NIXL_PLUGIN_API_VERSION 1

// What nixl_plugin_init returns. libnixl checks api_version == 1 and nothing else.
class nixlBackendPlugin {
 public:
  int api_version;
  nixlBackendEngine* (*create_engine)(const nixlBackendInitParams* init_params);
  void (*destroy_engine)(nixlBackendEngine* engine);
  const char* (*get_plugin_name)();
  const char* (*get_plugin_version)();
  nixl_b_params_t (*get_backend_options)();
  nixl_mem_list_t (*get_backend_mems)();
};

// NOLINTEND

// The layout 1.5.1's libnixl was compiled against (x86-64, libstdc++).
static_assert(sizeof(nixlBackendInitParams) == 96);
static_assert(sizeof(nixlBasicDesc) == 24 && sizeof(nixlMetaDesc) == 32 && sizeof(nixlBlobDesc) == 56);
static_assert(sizeof(nixlDescList<nixlMetaDesc>) == 40);
static_assert(sizeof(nixlBackendPlugin) == 56);
static_assert(sizeof(nixlBackendEngine) == 208);
static_assert(sizeof(nixlBackendOptionalArgs) == 72);
