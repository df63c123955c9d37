#!/usr/bin/env bash
# Issue 37 on the GPU machine, in one call: Ferry's NIXL plugin (DOCA_DMA_PROXY)
# under the real NIXL 1.5.1 (nixl_cu13, the build for torch cu130): the CPU
# suite, VRAM_SEG with torch CUDA tensors, LMCache 0.5.6's NIXL storage backend
# with cpu and cuda buffers, the example with -p on the GPU (push, then pull in
# another process), and nixl_bench against NIXL's POSIX backend on the machine's
# disk. Carried (about 60 MiB, one call):
#   .carry      CARRY_FILES="apps/ferry/ferry nixl-plugins/libplugin_DOCA_DMA_PROXY.so"
#               scripts/device/carry-build.sh build   (with spdlog and fmt, which the plugin needs)
#   .carry-py   scripts/device/carry-py.sh            (LMCache, its dependencies, the ferry wheel)
#   .carry-nixl scripts/device/carry-nixl.sh          (nixl meta and nixl_cu13, cut down)
# Each step's output is $OUT/<step>.log; summary.txt lists ok/FAILED; nixl_bench.json the numbers.
# BENCH_ONLY=1 skips the suites and the example; BENCH_MODES=none the main benchmark;
# DIRECT_TIER_OPTIONS="qd=64 threads=4" reruns the O_DIRECT benchmark with each file tier option;
# DIRECT_AGENT_ARGS="--queue-depth 16;--queue-depth 32" with each set of agent flags.
# Usage (from the device tool): bash scripts/device/check.sh nixl
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
PY=${PY:-python3}  # the machine's Python with torch, else PY=... (a dry run elsewhere)
[ "$PY" = python3 ] && [ -x /opt/torch/.venv/bin/python3 ] && PY=/opt/torch/.venv/bin/python3
C=$PWD/.carry
export LD_LIBRARY_PATH="$C/lib:${LD_LIBRARY_PATH:-}"  # the plugin's libspdlog and libfmt (Debian's sonames)
export FERRY_BIN=$C/build/apps/ferry/ferry
export FERRY_NIXL_PLUGIN_DIR=$C/build/nixl-plugins
for f in "$FERRY_BIN" "$FERRY_NIXL_PLUGIN_DIR/libplugin_DOCA_DMA_PROXY.so" .carry-nixl/nixl_cu13-1.5.1-min.tar.xz; do
  [ -e "$f" ] || { echo "nixl-check: $f is not here: carry .carry, .carry-py and .carry-nixl (see the top of $0)"; exit 1; }
done
SITE=/tmp/ferry-site
rm -rf "$SITE"
# BENCH_ONLY=1 needs only the ferry wheel and NIXL: .carry-py may then hold the ferry wheel alone.
wheels=(.carry-py/ferry-*.whl .carry-nixl/nixl-1.5.1-*.whl)
[ "${BENCH_ONLY:-0}" = 1 ] || wheels+=(.carry-py/deps/*.whl .carry-py/lmcache-*.whl)
$PY -m pip install -q --no-index --no-deps --target "$SITE" "${wheels[@]}" > "$OUT/pip.log" 2>&1 &&
  tar -C "$SITE" -xJf .carry-nixl/nixl_cu13-1.5.1-min.tar.xz >> "$OUT/pip.log" 2>&1 ||
  { echo "install failed"; tail -20 "$OUT/pip.log"; exit 1; }
# The machine's own packages win over the carried ones where both exist (torch, numpy ...).
export PYTHONPATH="$($PY -c 'import site; print(":".join(site.getsitepackages()))'):$SITE"
status=0
rm -f "$OUT/summary.txt"
step() {
  local name=$1; shift; echo "== $name"; local t0=$(date +%s)
  "$@" > "$OUT/$name.log" 2>&1; local rc=$?
  echo "   rc=$rc in $(( $(date +%s) - t0 )) s"; tail -${TAIL:-12} "$OUT/$name.log"
  if [ $rc -eq 0 ]; then echo "ok      $name" >> "$OUT/summary.txt"; else echo "FAILED  $name (rc=$rc)" >> "$OUT/summary.txt"; status=1; fi
}
nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv,noheader | tee "$OUT/device.txt"
# What the libraries resolve to here: a "not found" is a library to carry.
step ldd sh -c "ldd $FERRY_NIXL_PLUGIN_DIR/libplugin_DOCA_DMA_PROXY.so $SITE/.nixl_cu13.mesonpy.libs/libnixl.so \
  $SITE/.nixl_cu13.mesonpy.libs/plugins/libplugin_POSIX.so; ! ldd $FERRY_NIXL_PLUGIN_DIR/*.so $SITE/.nixl_cu13.mesonpy.libs/*.so \
  $SITE/.nixl_cu13.mesonpy.libs/plugins/*.so $SITE/nixl_cu13/*.so | grep 'not found'"
LMCACHE=lmcache,
[ "${BENCH_ONLY:-0}" = 1 ] && LMCACHE=
step imports $PY -c "import torch, $LMCACHE ferry, nixl._api as n
print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpu', torch.cuda.is_available(), 'nixl', n.__name__)
assert torch.cuda.is_available() and n.__name__ == 'nixl_cu13._api'"
# BENCH_ONLY=1: straight to the benchmarks.
if [ "${BENCH_ONLY:-0}" != 1 ]; then
# A device test file that skips at import (no torch, GPU or NIXL) leaves pytest nothing: rc 5, FAILED.
PYTEST=($PY -m pytest -q -rs -p no:cacheprovider)
# FERRY_TEST_GPU=0: the CPU suite's agents run as on a GPU host (pinned staging), as a deployment would.
FERRY_TEST_GPU=0 step nixl_plugin timeout 180 "${PYTEST[@]}" tests/python/test_nixl_plugin.py
step nixl_vram timeout 180 "${PYTEST[@]}" tests/python/device/test_nixl_vram.py
TAIL=20 step lmcache_nixl timeout 300 "${PYTEST[@]}" tests/python/device/test_lmcache_nixl.py

# The example on the GPU named by its PCI address; the pull runs in a process of its own.
PCI=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i 0)
rm -f /tmp/nixl-ex.ready
# 1 GiB of staging over 8 lanes: slots of 128 MiB, for the example's 64 MiB object.
"$FERRY_BIN" agent --endpoint unix:nixl-example --gpu 0 --staging-mib 1024 --tier dram:4GiB \
  --tier file:/var/tmp/ferry-nixl-ex --ready-file /tmp/nixl-ex.ready -l 40 > "$OUT/example_agent.log" 2>&1 &
AG=$!
for _ in $(seq 100); do [ -f /tmp/nixl-ex.ready ] && break; sleep 0.1; done
EX=($PY examples/python/nixl_doca_dma_proxy_example.py -d unix:nixl-example -p "$PCI" -f nixl-check/gpu -s 64)
NIXL_PLUGIN_DIR=$FERRY_NIXL_PLUGIN_DIR step example_push timeout 60 "${EX[@]}" -o push
NIXL_PLUGIN_DIR=$FERRY_NIXL_PLUGIN_DIR step example_pull timeout 60 "${EX[@]}" -o pull
kill $AG; wait $AG; rm -rf /var/tmp/ferry-nixl-ex
fi

[ "${BENCH_MODES:-buffered,direct}" = none ] ||
TAIL=30 step nixl_bench timeout 300 $PY bench/nixl/nixl_bench.py --ferry "$FERRY_BIN" --plugin-dir "$FERRY_NIXL_PLUGIN_DIR" \
  --dir /var/tmp/nixl-bench ${BENCH_ARGS:-} --json "$OUT/nixl_bench.json"
# DIRECT_TIER_OPTIONS="A B": the O_DIRECT benchmark again with ',A', then ',B' appended to the file tier.
i=0
for opts in ${DIRECT_TIER_OPTIONS:-}; do
  i=$((i + 1))
  TAIL=16 step "nixl_bench_direct_$i" timeout 200 $PY bench/nixl/nixl_bench.py --ferry "$FERRY_BIN" \
    --plugin-dir "$FERRY_NIXL_PLUGIN_DIR" --dir /var/tmp/nixl-bench --modes direct --file-tier-options ",$opts" \
    ${BENCH_ARGS:-} --json "$OUT/nixl_bench_direct_$i.json"
done
# DIRECT_AGENT_ARGS="A;B": the O_DIRECT benchmark again with agent flags A, then B.
IFS=';' read -ra agent_sets <<<"${DIRECT_AGENT_ARGS:-}"
for flags in "${agent_sets[@]}"; do
  i=$((i + 1))
  TAIL=16 step "nixl_bench_direct_$i" timeout 200 $PY bench/nixl/nixl_bench.py --ferry "$FERRY_BIN" \
    --plugin-dir "$FERRY_NIXL_PLUGIN_DIR" --dir /var/tmp/nixl-bench --modes direct --agent-args "$flags" \
    ${DIRECT_BENCH_ARGS:-${BENCH_ARGS:-}} --json "$OUT/nixl_bench_direct_$i.json"
done
rm -rf /var/tmp/nixl-bench
cat "$OUT/summary.txt"
exit $status
