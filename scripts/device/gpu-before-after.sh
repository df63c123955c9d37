#!/usr/bin/env bash
# One device call for a change that must keep the GPU paths' behaviour and
# speed: every GPU e2e suite (each launch method, the agent's copy modes, the
# hosted services), then `ferry-launch-bench` (1, 4 and 8 channels, 64 B) and
# the TCP benchmark with GPU workers, each run with the binaries from before
# the change (.carry-before/build: ferry and ferry-echo-baseline) and after it
# (.carry/build), interleaved so that drift hits both alike.
#
# Make .carry with scripts/device/carry-build.sh (CARRY_EXTRA adds more), and
# .carry-before with the same script from the older build, renamed. REPEAT=N
# runs every benchmark N times a side (A B A B ...), to see the spread;
# CHANNELS picks the launch benchmark's channel counts. An example binary
# carried as .carry/upper_server (scripts/example-check.sh) runs on every
# launch method too.
set -uo pipefail
FINAL=${OUT:-$PWD/before-after-results}
OUT=$(mktemp -d)
. "$(dirname "$0")/device-steps.sh"
B=$PWD/.carry-before/build
# The tests that run ferry as another user need its libraries where that user can read them.
mkdir -p /tmp/ferry-lib && cp "$C"/lib/* /tmp/ferry-lib/ && chmod -R a+rX /tmp/ferry-lib
export LD_LIBRARY_PATH=/tmp/ferry-lib:$LD_LIBRARY_PATH
step worker_unit "$C/build/tests/worker/worker_unit_test"
step hosted "$C/build/tests/offload/offload_hosted_test"
for m in persistent burst graph memops; do
  step "e2e_cuda_$m" "$C/build/tests/offload/e2e_test" --backend=cuda --launch=$m
done
step xfer_e2e_gpu "$C/build/tests/xfer/xfer_e2e_test" --mem=vram --gpu
step xfer_e2e_gpu_kernel "$C/build/tests/xfer/xfer_e2e_test" --mem=vram --gpu --copy=kernel
step xfer_e2e_gpu_batch "$C/build/tests/xfer/xfer_e2e_test" --mem=vram --gpu --copy=batch
if [ -x "$C/upper_server" ]; then
  for m in persistent burst graph memops; do
    step "example_cuda_$m" bash scripts/example-check.sh --run "$C/upper_server" "$FERRY" cuda $m
  done
fi
for r in $(seq "${REPEAT:-1}"); do
  for ch in ${CHANNELS:-1 4 8}; do
    for side in before after; do
      bin=$FERRY; [ $side = before ] && bin=$B/apps/ferry/ferry
      step "launch_${ch}ch_${side}_$r" "${bin%/apps/ferry/ferry}/bench/launch/ferry-launch-bench" --sizes 64 --channels $ch \
        --json-out "$OUT/launch_${ch}ch_${side}_$r.json"
    done
  done
  for side in before after; do
    dir=$C/build; [ $side = before ] && dir=$B
    step "tcp_${side}_$r" python3 bench/tcp_bench.py --build-dir "$dir" --backend cuda --sizes 64,1024 \
      --connections 1,8 --server-cpus 0,1 --worker-cpus 2,3 --client-cpus 4-11 --iterations 300000 \
      --latency-iterations 5000 --repeat 3 --out "$OUT/tcp_${side}_$r.json"
  done
done
log "summary"; cat "$OUT/summary.txt"; echo "status=$status"
mkdir -p "$FINAL"
tar czf "$FINAL/before-after.tgz" -C "$OUT" .
cp "$OUT"/summary.txt "$FINAL/"
exit $status
