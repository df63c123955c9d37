#!/usr/bin/env bash
# Embedding inference on the GPU machine. The model travels in three parts
# (scripts/device/carry-model.sh makes them; model-parts.sh says how):
#
#   step 1 (carry .carry-model-a):            bash scripts/device/check.sh embed stash
#   step 2 (carry .carry-model-b):            bash scripts/device/check.sh embed stash
#   step 3 (carry .carry and .carry-model-c): bash scripts/device/check.sh embed
#
# Step 3 joins the parts, checks the sha256, then runs the CUDA model's test
# against sentence-transformers' vectors, the embedding e2e suite on two launch
# methods, the model alone against sentence-transformers fp16 (and on the CPU),
# and bench/infer/embed_bench.py (open-loop load, batching, stages, and a plain
# sentence-transformers server). Make .carry with
#   CARRY_EXTRA="tests/infer/model/bert_cuda_test tests/infer/service/embed_e2e_test
#     bench/infer/ferry-model-bench bench/http/ferry-open-loop" scripts/device/carry-build.sh build
set -uo pipefail
[ "${1:-}" = stash ] && { . "$(dirname "$0")/model-parts.sh" stash; exit 0; }
FINAL=${OUT:-$PWD/embed-results}
OUT=$(mktemp -d)
. "$(dirname "$0")/device-steps.sh"
SECONDS_PER_RUN=${SECONDS_PER_RUN:-3}
. "$(dirname "$0")/model-parts.sh" || exit 1
B=$C/build
# PART=tests, PART=bench (embed_bench and the CPU model) or PART=load (embed_bench alone) runs part of
# what follows: one call may last 10 minutes.
PART=${PART:-all}
if [ "$PART" != bench ] && [ "$PART" != load ]; then
step bert_cuda_test timeout 300 "$B/tests/infer/model/bert_cuda_test"
for m in ${LAUNCHES:-persistent graph}; do
  step "embed_e2e_cuda_$m" timeout 300 "$B/tests/infer/service/embed_e2e_test" --backend=cuda --launch=$m
done
step model_vs_st_cuda timeout 300 python3 bench/infer/st_baseline.py --model "$FERRY_MODEL_DIR" --seconds 2 \
  --ferry "$B/bench/infer/ferry-model-bench" --json "$OUT/model_vs_st_cuda.json"
fi
if [ "$PART" != tests ]; then
step embed_bench_cuda timeout 420 python3 bench/infer/embed_bench.py --ferry "$FERRY" --open-loop "$B/bench/http/ferry-open-loop" \
  --model "$FERRY_MODEL_DIR" --backend cuda --launch "${BENCH_LAUNCH:-persistent}" --proxy-cpus 0,1,2,3 \
  --batcher-cpu 4 --client-cpus 8-15 --client-threads 4 --seconds "$SECONDS_PER_RUN" \
  --st-server bench/infer/st_server.py --json "$OUT/embed_bench_cuda.json"
[ "$PART" = load ] || step model_vs_st_cpu timeout 300 python3 bench/infer/st_baseline.py --device cpu --model "$FERRY_MODEL_DIR" --seconds 2 \
  --batches 1,8,32 --lengths 32 --ferry "$B/bench/infer/ferry-model-bench" --json "$OUT/model_vs_st_cpu.json"
fi
log "summary"; cat "$OUT/summary.txt"; echo "status=$status"
for f in model_vs_st_cuda embed_bench_cuda model_vs_st_cpu; do [ -f "$OUT/$f.log" ] && { echo "== $f"; tail -40 "$OUT/$f.log"; }; done
grep -h "least cosine\|minimum cosine\|min cos" "$OUT"/*.log | head
mkdir -p "$FINAL"
tar czf "$FINAL/embed-check.tgz" -C "$OUT" .
cp "$OUT"/summary.txt "$FINAL/"
exit $status
