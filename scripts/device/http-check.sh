#!/usr/bin/env bash
# ferry http on the GPU machine, in one call: the end-to-end suite on the CPU
# backend and on every GPU launch method, then bench/http_bench.py (wrk against
# ferry http and nginx on the same cores) for the CPU backend in two core
# splits and for the GPU backend, and `ferry-launch-bench` at 1 and 8 channels
# with .carry-before's ferry beside this one (the CPU backend's worker loop
# changed). Make .carry with CARRY_EXTRA="tests/http/http_e2e_test"
# scripts/device/carry-build.sh build, then scripts/device/carry-http-tools.sh
# (wrk and nginx, which the machine lacks).
set -uo pipefail
FINAL=${OUT:-$PWD/http-results}
OUT=$(mktemp -d)
. "$(dirname "$0")/device-steps.sh"
export PATH=$C/tools:$PATH
SECONDS_PER_RUN=${SECONDS_PER_RUN:-5}
step http_e2e_cpu "$C/build/tests/http/http_e2e_test" --backend=cpu --launch=cpu
for m in persistent burst graph memops; do
  step "http_e2e_cuda_$m" "$C/build/tests/http/http_e2e_test" --backend=cuda --launch=$m
done
if [ -x "$C/build/bench/http/ferry_http_parser_bench" ]; then
  step parser_bench taskset -c 5 "$C/build/bench/http/ferry_http_parser_bench" --json-out "$OUT/parser_bench.json"
fi
# GPU_ONLY=1: the GPU suites and benchmarks alone (after a change to the GPU path).
if [ -z "${GPU_ONLY:-}" ]; then
B=$PWD/.carry-before/build
for ch in 1 8; do
  for side in before after; do
    bin=$FERRY; [ $side = before ] && bin=$B/apps/ferry/ferry
    step "launch_${ch}ch_${side}" "${bin%/apps/ferry/ferry}/bench/launch/ferry-launch-bench" --sizes 64 --channels $ch --json-out "$OUT/launch_${ch}ch_${side}.json"
  done
done
step http_bench_cpu_2p2w python3 bench/http_bench.py --build-dir "$C/build" --proxy-cpus 0,1 --worker-cpus 2,3 \
  --client-cpus 4-11 --seconds "$SECONDS_PER_RUN" --out "$OUT/http_cpu_2p2w.json"
step http_bench_cpu_3p1w python3 bench/http_bench.py --build-dir "$C/build" --proxy-cpus 0,1,2 --worker-cpus 3 \
  --client-cpus 4-11 --seconds "$SECONDS_PER_RUN" --out "$OUT/http_cpu_3p1w.json"
fi
step http_bench_cuda_persistent python3 bench/http_bench.py --build-dir "$C/build" --backend cuda \
  --launch persistent --proxy-cpus 0,1,2,3 --client-cpus 4-11 --seconds "$SECONDS_PER_RUN" \
  --out "$OUT/http_cuda_persistent.json"
step http_bench_cuda_burst python3 bench/http_bench.py --build-dir "$C/build" --backend cuda \
  --launch burst --proxy-cpus 0,1,2,3 --client-cpus 4-11 --seconds "$SECONDS_PER_RUN" \
  --out "$OUT/http_cuda_burst.json"
log "summary"; cat "$OUT/summary.txt"; echo "status=$status"
[ -f "$OUT/parser_bench.log" ] && tail -6 "$OUT/parser_bench.log"
for f in "$OUT"/http_bench_*.log; do echo "== $f"; grep -A11 "^(ferry" "$f"; done
mkdir -p "$FINAL"
tar czf "$FINAL/http-check.tgz" -C "$OUT" .
cp "$OUT"/summary.txt "$FINAL/"
exit $status
