#pragma once
// How `ferry client` reports a run: Ferry's lines, DOCA's statistics block, JSON.

#include <cstdio>
#include <string>

#include "ferry/offload/client.h"

namespace ferry::app {

// Ferry's format: the reference's five statistics lines, then latency percentiles.
void print_ferry_stats(std::FILE* out, const offload::ClientReport& r);
// The reference client's block, line for line: its "+===+" rules and "| " prefixes,
// so that parsers written for DOCA's output read it.
void print_doca_stats(std::FILE* out, const offload::ClientReport& r);
// Throws ferry::Error when the file cannot be written.
void write_client_json(const std::string& path, const offload::ClientReport& r);

}  // namespace ferry::app
