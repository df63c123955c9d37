#!/usr/bin/env bash
# The one entry point for runs on a lent GPU machine (README.md beside this
# file). Runs there, in the repository root, with binaries carried in .carry/:
#
#   bash scripts/device/check.sh NAME [ARGS...]
#
# NAME is one of the checks below; each writes its results under $OUT (the
# device tool's folder) or a folder of its own name.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
declare -A checks=(
  [gpu]="gpu-check.sh: every offload e2e suite, compute-sanitizer, ferry-launch-bench, the demo, the TCP bench"
  [xfer]="xfer-gpu-check.sh: the transfer engine's e2e suite with CUDA IPC, then ferry-kv-bench per copy mode"
  [xfer-before-after]="xfer-before-after.sh: the transfer engine's GPU suites, then ferry-kv-bench of .carry-before vs .carry, interleaved"
  [before-after]="gpu-before-after.sh: GPU e2e suites, then launch and TCP benchmarks of .carry-before vs .carry"
  [http]="http-check.sh: ferry http's e2e suite on cpu and every launch method, then wrk against it and nginx"
  [embed]="embed-check.sh: the embedding model and service on the GPU, against sentence-transformers ('stash' first)"
  [baselines]="baseline-check.sh: issue 36's baselines: torch eager and torch.compile beside the model, Infinity beside ferry http ('stash' first)"
  [route]="route-device.sh: every route app in every mode (ROUTE_ONLY=qs_mini|transpose for one sweep)"
  [route-probe]="route-qs-probe.sh: A/B variants of qs-mini, interleaved"
  [xfer-sweep]="xfer-sweep.sh: ferry-kv-bench over the agent's pipeline settings"
  [xfer-ncu]="xfer-ncu.sh: the copy kernel under Nsight Compute, agent against baseline"
  [shared-gpu]="shared-gpu-check.sh: the GPU model beside every launch method under mixed traffic ('stash' first)"
  [hardening]="hardening-check.sh: issue 35's fixes: the process-memory probe, then the xfer, mover, http and l2fwd suites"
  [launch]="launch-check.sh: issue 40's launch methods against the minimal mechanisms, three rounds, and the persistent kernel at 1-16 channels"
  [store-cluster]="store-cluster-check.sh: the redis-cluster tier against redis-benchmark --cluster on 1, 3 and 6 primaries (issue 38 part 5)"
  [gpu-suites]="gpu-suites-check.sh: every GPU e2e suite on every launch method (offload, http, l2fwd), then l2fwd's pipelines -p 1/2/4 with GPU workers"
  [nixl]="nixl-check.sh: the NIXL plugin under nixl_cu13: its suite, VRAM_SEG, LMCache through NIXL, the example on the GPU, nixl_bench"
)
name=${1:-}
if [ -z "$name" ] || [ -z "${checks[$name]:-}" ]; then
  echo "usage: bash scripts/device/check.sh NAME [ARGS...]; NAME is one of:" >&2
  for k in "${!checks[@]}"; do printf '  %-13s %s\n' "$k" "${checks[$k]}" >&2; done
  exit 2
fi
shift
exec bash "$here/${checks[$name]%%:*}" "$@"
