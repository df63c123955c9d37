#!/usr/bin/env bash
# ferry l2fwd on the GPU machine, from .carry/ (scripts/device/carry-build.sh,
# then scripts/device/carry-dpdk.sh): the packet path's tests with every GPU
# mode, then the net_null benchmark against dpdk-testpmd (docs/bench/packet.md).
# Usage: scripts/device/l2fwd-check.sh [tests|bench|all]   (env BENCH_ARGS: more l2fwd_bench.py flags)
set -uo pipefail
what=${1:-all}
C=$PWD/.carry
export LD_LIBRARY_PATH=$C/lib:${LD_LIBRARY_PATH:-}
export FERRY_BIN=$C/build/apps/ferry/ferry
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
echo "== machine"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
lscpu | grep -E "Model name|^CPU\(s\)|Thread|NUMA node\(s\)" ; uname -r
ldd "$FERRY_BIN" | grep -E "not found" && echo "ferry lacks a library above"
rc=0
if [ "$what" = tests ] || [ "$what" = all ]; then
  echo "== comm_list_test"; "$C/build/tests/core/comm_list_test" 2>&1 | tail -3 || rc=1
  echo "== l2fwd_test (cpu modes)"; "$C/build/tests/packet/l2fwd_test" 2>&1 | grep -E "^\[ |Failure|Expected|actual" | tail -14 || rc=1
  echo "== l2fwd_live_test"; "$C/build/tests/packet/l2fwd_live_test" 2>&1 | grep -E "^\[ |live l2fwd|namespace|Failure" | tail -6 || rc=1
  echo "== l2fwd_gpu_test"; "$C/build/tests/packet/l2fwd_gpu_test" 2>&1 | grep -E "^\[ |Failure|Expected|actual|error" | tail -30
  [ "${PIPESTATUS[0]}" = 0 ] || rc=1
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  echo "== l2fwd bench"
  LD_LIBRARY_PATH=$C/dpdk/lib:$LD_LIBRARY_PATH python3 bench/packet/l2fwd_bench.py --ferry "$FERRY_BIN" \
    --testpmd "$C/dpdk/dpdk-testpmd" --pmd "$C/dpdk/pmds" --out "$OUT/l2fwd-bench.json" --log-dir "$OUT" ${BENCH_ARGS:-} 2>&1 | tail -40
fi
exit $rc
