#!/usr/bin/env bash
# Issue 20 on the GPU machine, in one call: the Python package's tests (NumPy,
# torch CUDA tensors, the real LMCache 0.5.6), the LMCache L2 benchmark (Ferry's
# connector against LMCache's local-disk and Redis backends) and the Python
# module against the C++ API. Carried: .carry (ferry, the xfer GPU tests, their .so files,
# redis-server: CARRY_FILES="apps/ferry/ferry tests/xfer/xfer_e2e_test tests/xfer/agent/xfer_mover_test"
# scripts/device/carry-build.sh) and .carry-py (the ferry wheel for Python 3.12, the lmcache
# wheel and the dependencies the machine lacks: scripts/device/carry-py.sh). Results go to $OUT.
# probe: the machine's CPU and memory, and ferry-stream-probe (a chunk's trip between shm and
# the page cache taken apart; carry bench/xfer/store/ferry-stream-probe too).
# Usage (from the device tool): bash scripts/device/lmcache-check.sh [gpu|tests|l2|binding|probe|bench|all]
set -uo pipefail
PART=${1:-all}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
PY=python3
[ -x /opt/torch/.venv/bin/python3 ] && PY=/opt/torch/.venv/bin/python3
export LD_LIBRARY_PATH="$PWD/.carry/lib:${LD_LIBRARY_PATH:-}"
export PATH="$PWD/.carry/redis:$PATH"
FERRY=$PWD/.carry/build/apps/ferry/ferry
export FERRY_BIN=$FERRY  # the C++ suites start this agent
[ -x .carry/redis/redis-server ] && export FERRY_REDIS_SERVER=$PWD/.carry/redis/redis-server
SITE=/tmp/ferry-site
rm -rf "$SITE"
$PY -m pip install -q --no-index --no-deps --target "$SITE" .carry-py/deps/*.whl .carry-py/lmcache-*.whl .carry-py/ferry-*.whl \
  > "$OUT/pip.log" 2>&1 || { echo "pip install failed"; tail -20 "$OUT/pip.log"; exit 1; }
# The machine's own packages win over the carried ones where both exist (torch, numpy ...).
export PYTHONPATH="$($PY -c 'import site; print(":".join(site.getsitepackages()))'):$SITE"
step() { local name=$1; shift; echo "== $name"; local t0=$(date +%s); "$@" > "$OUT/$name.log" 2>&1; local rc=$?;
         echo "   rc=$rc in $(( $(date +%s) - t0 )) s"; tail -${TAIL:-15} "$OUT/$name.log"; }
nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv,noheader | tee "$OUT/device.txt"
step import_lmcache $PY -c "import torch, lmcache, lmcache.lmcache_native, lmcache.lmcache_fs, lmcache.lmcache_redis, ferry, ferry.lmcache; print('torch', torch.__version__, 'lmcache ok')"
case "$PART" in gpu|tests|all)
  # The agent's copy paths this issue touched (host blocks beside device ones), with CUDA IPC.
  for mode in auto kernel batch; do
    step xfer_e2e_gpu_$mode .carry/build/tests/xfer/xfer_e2e_test --mem=vram --gpu --copy=$mode
  done
  step xfer_mover_gpu .carry/build/tests/xfer/agent/xfer_mover_test --gpu ;;
esac
case "$PART" in tests|all)
  FERRY_TEST_GPU=0 step pytest_all $PY -m pytest -q -p no:cacheprovider tests/python ;;
esac
case "$PART" in tests|all)
  rm -f /tmp/ex.ready
  $FERRY agent --endpoint unix:ferry.agent --tier dram:4GiB --tier file:/var/tmp/ferry-kv --ready-file /tmp/ex.ready -l 30 &
  AG=$!; for _ in $(seq 100); do [ -f /tmp/ex.ready ] && break; sleep 0.1; done
  step example_cuda $PY examples/python/kv_offload.py
  step example_cpu $PY examples/python/kv_offload.py --device cpu --chunks 4
  kill $AG; wait $AG; rm -rf /var/tmp/ferry-kv ;;
esac
case "$PART" in probe)
  # Free page reporting (virtio-balloon feature bit 5) hands a guest's resting free pages back to its host.
  step machine sh -c 'lscpu; free -g; cat /sys/kernel/mm/transparent_hugepage/shmem_enabled; df -h /var/tmp /dev/shm;
    uname -r; grep -H . /sys/module/page_reporting/parameters/* 2>&1;
    for d in /sys/bus/virtio/devices/*; do echo "$d device=$(cat $d/device) features=$(cat $d/features)"; done'
  TAIL=90 step stream_probe .carry/build/bench/xfer/store/ferry-stream-probe --dir /var/tmp/ferry-stream-probe \
    ${PROBE_ARGS:-} --json-out "$OUT/stream_probe.json" ;;
esac
case "$PART" in l2|bench|all)
  TAIL=30 step l2_bench timeout ${L2_TIMEOUT:-420} $PY bench/lmcache/l2_bench.py --ferry "$FERRY" --dir /var/tmp/ferry-l2-bench \
    --rounds ${ROUNDS:-3} --agent-log "$OUT/l2_agents.log" --json-out "$OUT/l2_bench.json" ${L2_ARGS:-} ;;
esac
case "$PART" in binding|bench|all)
  rm -f /tmp/bb.ready
  $FERRY agent --endpoint unix:ferry-binding-bench --tier dram:12GiB --ready-file /tmp/bb.ready -l 30 &
  AG=$!; for _ in $(seq 100); do [ -f /tmp/bb.ready ] && break; sleep 0.1; done
  TAIL=12 step binding_bench timeout 300 $PY bench/python/binding_bench.py --ferry "$FERRY" --endpoint unix:ferry-binding-bench \
    --runs ${BINDING_RUNS:-5} --json-out "$OUT/binding_bench.json"
  kill $AG; wait $AG ;;
esac
