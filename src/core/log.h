#pragma once
// Internal logging: spdlog behind a thin layer so its types stay out of the
// public headers. Levels follow DOCA's numeric scale (10 DISABLE ... 70 TRACE).

#include <spdlog/spdlog.h>

namespace ferry::log {

// Maps a DOCA numeric level (10, 20, ... 70) onto spdlog; throws ferry::Error for
// anything else.
spdlog::level::level_enum from_doca_level(int level);

// Sets up the "ferry" logger (the program's own messages, --log-level) and the
// "sdk" logger (Ferry's OS, socket and CUDA plumbing, --sdk-log-level), both on
// stderr, tagged with the role name.
void init(const char* role, int log_level, int sdk_log_level);

spdlog::logger& app();
spdlog::logger& sdk();

}  // namespace ferry::log
