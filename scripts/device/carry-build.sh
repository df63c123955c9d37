#!/usr/bin/env bash
# Packs what scripts/device/gpu-check.sh needs into .carry/ (ignored by git): stripped
# binaries in their build-tree places, and the shared libraries the GPU
# machine lacks (spdlog, fmt, xfer's hiredis, liburing, xxhash, and libpcap,
# which the static DPDK in ferry loads, with what it links).
# Usage: [CARRY_EXTRA="more/build/paths"] scripts/device/carry-build.sh [BUILD_DIR]
# CARRY_FILES="build/paths" replaces the default list (a build dir that holds
# only some targets, e.g. the route apps for scripts/device/route-device.sh).
set -euo pipefail
B=${1:-build}
C=.carry
# ferry l2fwd travels with DPDK linked statically and only the virtual PMDs
# (cmake/dpdk.cmake): the GPU machine has no DPDK packages. A build dir that
# links DPDK shared is switched to FERRY_DPDK_LINK=static for the copy, and
# back to what it was afterwards.
dpdk_link=
if [ -x "$B/apps/ferry/ferry" ] && ldd "$B/apps/ferry/ferry" | grep -q librte_eal; then
  dpdk_link=$(sed -n 's/^FERRY_DPDK_LINK:STRING=//p' "$B/CMakeCache.txt")
  echo "carry-build: relinking ferry with FERRY_DPDK_LINK=static for the GPU machine"
  cmake -S . -B "$B" -DFERRY_DPDK_LINK=static >/dev/null
  cmake --build "$B" -j"$(nproc)" --target ferry >/dev/null
  restore_dpdk_link() {
    echo "carry-build: relinking ferry in $B with FERRY_DPDK_LINK='$dpdk_link' again"
    cmake -S . -B "$B" -DFERRY_DPDK_LINK="$dpdk_link" >/dev/null
    cmake --build "$B" -j"$(nproc)" --target ferry >/dev/null
  }
  trap restore_dpdk_link EXIT
fi
rm -rf "$C"
mkdir -p "$C/lib"
files="${CARRY_FILES:-apps/ferry/ferry bench/launch/ferry-launch-bench bench/kv/ferry-kv-bench bench/ferry-echo-baseline tests/core/core_unit_test tests/core/slot_ring_fuzz_test
       tests/offload/e2e_test tests/worker/worker_unit_test tests/xfer/xfer_e2e_test} ${CARRY_EXTRA:-}"
for f in $files; do
  mkdir -p "$C/build/$(dirname "$f")"
  strip -o "$C/build/$f" "$B/$f"
done
for f in $files; do
  ldd "$B/$f" | awk '/spdlog|fmt|hiredis|liburing|xxhash|libpcap|libdbus|libsystemd|libcap\.|libgcrypt|libgpg-error|liblz4|libzstd|liblzma/ {print $3}'
done | sort -u | while read -r lib; do cp -L "$lib" "$C/lib/"; done
# redis-server for the redis tier's tests (the GPU machine has none), and redis-cli and
# redis-benchmark for the cluster benchmark (store-cluster-check.sh), with the
# libraries Ubuntu lacks; libssl and the rest come from the machine.
if [ -x /usr/bin/redis-server ]; then
  mkdir -p "$C/redis"
  for t in redis-server redis-cli redis-benchmark; do
    [ -x "/usr/bin/$t" ] || continue
    cp -L "/usr/bin/$t" "$C/redis/"
    ldd "/usr/bin/$t" | awk '/liblzf|libjemalloc|libatomic/ {print $3}'
  done | sort -u | while read -r lib; do cp -L "$lib" "$C/lib/"; done
fi
du -sh "$C"
