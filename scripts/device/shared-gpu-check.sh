#!/usr/bin/env bash
# The GPU model beside the HTTP workers' launch methods on one GPU (issue 36).
# The model travels in parts, as for embed-check.sh: `check.sh shared-gpu stash`
# carrying .carry-model-a, then -b, then this with .carry and .carry-model-c.
# LAUNCHES, SOAK_SECONDS (120 each), PROBE_MODES, MODEL, E2E, PROFILE, BENCH, AB, CALLERS and CAPACITY choose what runs.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ "${1:-}" = stash ] && { . "$here/model-parts.sh" stash; exit 0; }
FINAL=${OUT:-$PWD/shared-gpu-results}
OUT=$(mktemp -d)
. "$here/device-steps.sh"
. "$here/model-parts.sh" || exit 1
B=$C/build
cat > "$OUT/stacks.sh" <<'SH'
#!/usr/bin/env bash
# Every thread's stack of a process, and the kernels running on its GPU.
timeout 120 cuda-gdb -p "$1" -batch -ex "info cuda kernels" -ex "thread apply all bt" 2>&1 | grep -v "^\[New Thread\|^warning:" 
SH
chmod +x "$OUT/stacks.sh"
# MODEL=1: first the CUDA model against sentence-transformers' vectors.
[ "${MODEL:-1}" = 1 ] && step bert_cuda_test timeout 300 "$B/tests/infer/model/bert_cuda_test"
if [ -x "$C/tools/shared-gpu-probe" ]; then
  for mode in ${PROBE_MODES:-same-graph eager new-graph new-stream}; do
    step "probe_$mode" timeout 60 "$C/tools/shared-gpu-probe" "$mode" "${PROBE_RUNS:-400}"
    step "probe_${mode}_32" env CUDA_DEVICE_MAX_CONNECTIONS=32 timeout 60 "$C/tools/shared-gpu-probe" "$mode" "${PROBE_RUNS:-400}"
  done
fi
soak() {
  step "soak_$1" env FERRY_SOAK_SECONDS=${SOAK_SECONDS:-120} FERRY_SOAK_ON_FAILURE="$OUT/stacks.sh" \
    timeout 800 "$B/tests/infer/service/embed_soak_test" --backend=cuda --launch=$1
}
# SOAK_TOGETHER=1: the launch methods' servers at once, each beside its own model, all on one GPU.
for m in ${LAUNCHES-persistent burst graph memops}; do
  if [ "${SOAK_TOGETHER:-0}" = 1 ]; then soak $m & else soak $m; fi
done
wait
grep -q "^FAILED  soak_" "$OUT/summary.txt" && status=1  # steps run in the background set it in their subshell
# E2E=1: the embedding e2e suite with the GPU model and each of E2E_LAUNCHES.
if [ "${E2E:-0}" = 1 ]; then
  for m in ${E2E_LAUNCHES:-persistent graph}; do
    step "embed_e2e_cuda_$m" timeout 300 "$B/tests/infer/service/embed_e2e_test" --backend=cuda --launch=$m
  done
fi
# PROFILE=1: where a batch's GPU time goes, kernel by kernel (ncu), for this
# build and, when .carry-before holds one, the build before.
if [ "${PROFILE:-0}" = 1 ]; then
  for shape in ${PROFILE_SHAPES:-128x128 32x32}; do
    for build in "" -before; do
      bench=$PWD/.carry$build/build/bench/infer/ferry-model-bench
      [ -x "$bench" ] || continue
      step "profile${build}_$shape" timeout 300 python3 bench/infer/kernel_profile.py --bench "$bench" \
        --model "$FERRY_MODEL_DIR" --batch "${shape%x*}" --length "${shape#*x}" --json "$OUT/profile${build}_$shape.json"
      cat "$OUT/profile${build}_$shape.log"
    done
  done
fi
# BENCH=1: then the model alone against torch eager and torch.compile (uniform and mixed
# lengths; compile per shape, and on ids already on the GPU), and Ferry with the exact GELU.
if [ "${BENCH:-0}" = 1 ]; then
  step model_vs_torch timeout 580 python3 bench/infer/st_baseline.py --model "$FERRY_MODEL_DIR" \
    --modes "${BENCH_MODES:-eager,compile,compile-gpu,compile-stream}" --compile-dynamic "${COMPILE_DYNAMIC:-static}" \
    ${BENCH_SHAPES:+--shapes "$BENCH_SHAPES"} ${BENCH_RUNS:+--runs "$BENCH_RUNS"} \
    --seconds "${BENCH_SECONDS:-1}" --ferry "$B/bench/infer/ferry-model-bench" --mixed-file "$OUT/mixed.lengths" \
    --json "$OUT/model_vs_torch.json"
  tail -40 "$OUT/model_vs_torch.log"
  step model_exact_gelu timeout 120 "$B/bench/infer/ferry-model-bench" --model "$FERRY_MODEL_DIR" --gelu exact \
    --batches 1,8,32,128 --lengths 32,128,256 --seconds "${BENCH_SECONDS:-1}" --json "$OUT/model_exact_gelu.json"
  cat "$OUT/model_exact_gelu.log"
fi
# AB=1: the model bench of the build in .carry-before against this one, interleaved
# round by round (AB_ROUNDS) at AB_BATCHES x AB_LENGTHS, so that a change to the
# model is judged against the same machine's drift.
if [ "${AB:-0}" = 1 ] && [ -x .carry-before/build/bench/infer/ferry-model-bench ]; then
  for round in $(seq "${AB_ROUNDS:-3}"); do
    for build in before now; do
      bench=$B/bench/infer/ferry-model-bench
      [ $build = before ] && bench=.carry-before/build/bench/infer/ferry-model-bench
      step "ab_${build}_$round" timeout 120 "$bench" --model "$FERRY_MODEL_DIR" --batches "${AB_BATCHES:-8,32,128}" \
        --lengths "${AB_LENGTHS:-128,256}" --seconds "${BENCH_SECONDS:-1}" --json "$OUT/ab_${build}_$round.json"
      cat "$OUT/ab_${build}_$round.log"
    done
  done
fi
# CALLERS=1: the model bench with 1, 2 and 3 callers at once (ferry-model-bench
# --callers, one lane each), interleaved round by round (CALLERS_ROUNDS).
if [ "${CALLERS:-0}" = 1 ]; then
  for round in $(seq "${CALLERS_ROUNDS:-2}"); do
    for n in ${CALLERS_COUNTS:-1 2 3}; do
      step "callers_${n}_$round" timeout 120 "$B/bench/infer/ferry-model-bench" --model "$FERRY_MODEL_DIR" --callers "$n" \
        --batches "${AB_BATCHES:-8,32,128}" --lengths "${AB_LENGTHS:-32,128,256}" --seconds "${BENCH_SECONDS:-1}" \
        --json "$OUT/callers_${n}_$round.json"
      cat "$OUT/callers_${n}_$round.log"
    done
  done
fi
# CAPACITY=1: the service's most single-input requests/s at p99 <= 5 ms, per server layout and route.
if [ "${CAPACITY:-0}" = 1 ]; then
  step capacity timeout 580 python3 bench/infer/embed_bench.py --ferry "$FERRY" --open-loop "$B/bench/http/ferry-open-loop" \
    --model "$FERRY_MODEL_DIR" --backend cuda --launch "${CAPACITY_LAUNCH:-persistent}" --parts capacity \
    --seconds "${CAPACITY_SECONDS:-3}" ${CAPACITY_LAYOUTS:+--capacity-layouts "$CAPACITY_LAYOUTS"} \
    ${CAPACITY_RATES:+--capacity-rates "$CAPACITY_RATES"} --json "$OUT/capacity.json"
  grep -A12 "^proxies\|^most" "$OUT/capacity.log" | head -120
fi
log "summary"; cat "$OUT/summary.txt"; echo "status=$status"
grep -h "^HANG\|^OK\|answered (" "$OUT"/*.log
mkdir -p "$FINAL"
tar czf "$FINAL/shared-gpu-check.tgz" -C "$OUT" .
cp "$OUT"/summary.txt "$FINAL/"
exit $status
