#!/usr/bin/env bash
# Every GPU e2e suite on every launch method, in one call: the offload e2e suite
# (cpu, then persistent, burst, graph, memops), ferry http's e2e suite (the
# same), and l2fwd_gpu_test; then (L2FWD=1, the default) ferry l2fwd's
# pipelines with GPU workers through net_null: -p 1, 2 and 4, persistent and
# graph, ROUNDS (2) rounds of SECONDS (8) each, interleaved.
# Carry .carry: CARRY_EXTRA="tests/http/http_e2e_test tests/packet/l2fwd_gpu_test
# tests/packet/l2fwd_test" scripts/device/carry-build.sh build (a ferry with the
# static, virtual-only DPDK). Results: $OUT.
set -uo pipefail
FINAL=${OUT:-$PWD/gpu-suites}
OUT=$(mktemp -d)
. "$(dirname "$0")/device-steps.sh"
step e2e_cpu "$C/build/tests/offload/e2e_test" --backend=cpu --launch=cpu
step http_e2e_cpu "$C/build/tests/http/http_e2e_test" --backend=cpu --launch=cpu
for m in persistent burst graph memops; do
  step "e2e_cuda_$m" "$C/build/tests/offload/e2e_test" --backend=cuda --launch=$m
  step "http_e2e_cuda_$m" "$C/build/tests/http/http_e2e_test" --backend=cuda --launch=$m
done
step l2fwd_gpu_test "$C/build/tests/packet/l2fwd_gpu_test"
if [ "${L2FWD:-1}" = 1 ]; then
  # One core per pipeline's RX and TX (-l 0-2p); timeout's SIGINT ends a run
  # cleanly, with its JSON written, so its exit status 124 is the expected one.
  l2fwd() {  # MODE PIPELINES ROUND
    timeout -s INT "${SECONDS_PER_RUN:-8}" "$FERRY" l2fwd --no-huge -m 2048 --no-pci --no-shconf \
      --file-prefix "l2fwd-$1-$2-$3" -l "0-$((2 * $2))" --vdev net_null0,size=64,copy=1 -- --mode "$1" -p "$2" \
      --burst 32 --gpu 0 -z 1000000 --stats-interval 0 --json-out "$OUT/l2fwd-$1-p$2-r$3.json" \
      >"$OUT/l2fwd-$1-p$2-r$3.log" 2>&1
    local rc=$?
    [ $rc = 124 ] && [ -s "$OUT/l2fwd-$1-p$2-r$3.json" ]
  }
  for r in $(seq "${ROUNDS:-2}"); do
    for p in 1 2 4; do
      for m in persistent graph; do step "l2fwd_${m}_p${p}_r$r" l2fwd "$m" "$p" "$r"; done
    done
  done
fi
log "summary"; cat "$OUT/summary.txt"; echo "status=$status"
mkdir -p "$FINAL"
tar czf "$FINAL/gpu-suites.tgz" -C "$OUT" .
exit $status
