#!/usr/bin/env bash
# Everything the GPU machine must run for the GPU issues, in one call (device
# time is scarce): tests of every backend and launch method, compute-sanitizer
# over the persistent kernel under load, the launch benchmark, the demo and the
# TCP benchmark with GPU and CPU workers. Results go to $OUT (or ./gpu-results).
#
# Binaries come prebuilt in .carry/ (scripts/device/carry-build.sh makes it): the GPU
# machine has CUDA and a compiler but none of Debian's -dev packages.
set -uo pipefail
FINAL=${OUT:-$PWD/gpu-results}
OUT=$(mktemp -d)  # everything lands here, then goes back as one tarball (the tool returns 8 files at most)
. "$(dirname "$0")/device-steps.sh"
PY=$(command -v python3)
[ -x /opt/torch/.venv/bin/python3 ] && PY=/opt/torch/.venv/bin/python3
step unit "$C/build/tests/core/core_unit_test"
step e2e_cpu "$C/build/tests/offload/e2e_test" --backend=cpu --launch=cpu
for m in persistent burst graph memops; do
  step "e2e_cuda_$m" "$C/build/tests/offload/e2e_test" --backend=cuda --launch=$m
done
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in memcheck racecheck; do
  step "sanitizer_$tool" "$SAN" --tool $tool --error-exitcode 9 --target-processes all \
    "$LAUNCH_BENCH" --methods persistent --sizes 64,1024 --bursts 1,32 --channels 2 --seconds 0.3 \
    --round-trips 300 --json-out "$OUT/sanitizer_$tool.json"
done
step bench_launch "$LAUNCH_BENCH" --json-out "$OUT/launch.json"
step bench_launch_8ch "$LAUNCH_BENCH" --methods cpu,persistent --sizes 64,1024 --channels 8 \
  --json-out "$OUT/launch_8ch.json"
for ch in 1 2 4 8 16; do  # does the persistent kernel's throughput scale with channels?
  step "scaling_${ch}ch" "$LAUNCH_BENCH" --methods persistent --sizes 64 --bursts 1024 --channels $ch \
    --round-trips 2000 --json-out "$OUT/scaling_${ch}ch.json"
done
step demo_gpu "$FERRY" demo --backend cuda
step demo_auto "$FERRY" demo
for backend in cuda cpu; do
  step "tcp_$backend" "$PY" bench/tcp_bench.py --build-dir "$C/build" --backend $backend --server-cpus 0,1 \
    --worker-cpus 2,3 --client-cpus 4-11 --iterations 2000000 --latency-iterations 20000 --repeat 3 --out "$OUT/tcp_$backend.json"
done
[ -f "$OUT/launch.json" ] && step plot "$PY" bench/plot_launch.py "$OUT/launch.json" "$OUT/launch.png"
cat "$OUT/bench_launch.log" 2>/dev/null | tail -30
log "summary"; cat "$OUT/summary.txt"; echo "status=$status"
mkdir -p "$FINAL"
tar czf "$FINAL/gpu-results.tgz" -C "$OUT" .
cp "$OUT"/launch.png "$OUT"/launch.json "$OUT"/summary.txt "$FINAL/" 2>/dev/null
exit $status
