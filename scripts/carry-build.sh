#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh needs into .carry/ (ignored by git): stripped
# binaries in their build-tree places, and the two shared libraries the GPU
# machine lacks (spdlog, fmt). Usage: scripts/carry-build.sh [BUILD_DIR]
set -euo pipefail
B=${1:-build}
C=.carry
rm -rf "$C"
mkdir -p "$C/lib" "$C/build/apps/ferry" "$C/build/bench" "$C/build/tests/core" "$C/build/tests/offload" "$C/build/tests/worker"
for f in apps/ferry/ferry bench/ferry-echo-baseline tests/core/core_unit_test tests/core/slot_ring_fuzz_test \
         tests/offload/e2e_test tests/worker/worker_unit_test; do
  strip -o "$C/build/$f" "$B/$f"
done
for lib in $(ldd "$B/apps/ferry/ferry" | awk '/spdlog|fmt/ {print $3}'); do cp -L "$lib" "$C/lib/"; done
du -sh "$C"
