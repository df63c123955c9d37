#!/usr/bin/env bash
# One device call for a change that must keep the transfer engine's behaviour
# and speed: the GPU e2e suites and the mover's unit tests with CUDA lanes
# (.carry), then `ferry-kv-bench` against a fresh agent, with the binaries from
# before the change (.carry-before/build/apps/ferry/ferry) and after it
# (.carry), interleaved B A B A ... so that drift hits both alike. Each side's
# agent and bench are its own ferry binary (the bench's copy code changes too).
#
# REPEAT=N pairs (default 3); BLOCKS, the block sizes (bytes); TOTAL, bytes per
# block size and direction. Results go to $OUT as one tarball.
set -uo pipefail
FINAL=${OUT:-$PWD/xfer-before-after-results}
OUT=$(mktemp -d)
. "$(dirname "$0")/device-steps.sh"
B=$PWD/.carry-before/build/apps/ferry/ferry
step xfer_e2e_gpu "$C/build/tests/xfer/xfer_e2e_test" --mem=vram --gpu
step xfer_e2e_gpu_kernel "$C/build/tests/xfer/xfer_e2e_test" --mem=vram --gpu --copy=kernel
step xfer_e2e_gpu_batch "$C/build/tests/xfer/xfer_e2e_test" --mem=vram --gpu --copy=batch
step xfer_mover_gpu "$C/build/tests/xfer/agent/xfer_mover_test" --gpu
bench() {  # side run
  local side=$1 r=$2 bin=$FERRY
  [ "$side" = before ] && bin=$B
  local ep="unix:ferry-ba-$side-$r"
  "$bin" agent --endpoint "$ep" --tier dram:12GiB --staging-mib 1024 --queue-depth 8 \
    --cpus 8,9,10,11,12,13,14,15 --ready-file "$OUT/ready-$side-$r" 2>"$OUT/agent_${side}_$r.log" &
  local agent=$!
  for _ in $(seq 100); do [ -f "$OUT/ready-$side-$r" ] && break; sleep 0.1; done
  step "kv_${side}_$r" taskset -c 0-7 "${bin%/apps/ferry/ferry}/bench/kv/ferry-kv-bench" --endpoint "$ep" --mem vram \
    --total-bytes "${TOTAL:-4294967296}" --block-sizes ${BLOCKS:-16384 65536 262144 1048576 33554432} \
    --no-baselines --json-out "$OUT/kv_${side}_$r.json"
  kill -TERM $agent; wait $agent
  grep -o "agent time per phase.*" "$OUT/agent_${side}_$r.log" | sed "s/^/$side $r: /" >>"$OUT/phases.txt"
}
for r in $(seq "${REPEAT:-3}"); do
  bench before "$r"
  bench after "$r"
done
log "summary"; cat "$OUT/summary.txt"; echo "status=$status"; cat "$OUT/phases.txt" 2>/dev/null
for f in "$OUT"/kv_*.log; do echo "== $f"; tail -12 "$f"; done
mkdir -p "$FINAL"
tar czf "$FINAL/xfer-before-after.tgz" -C "$OUT" .
exit $status
