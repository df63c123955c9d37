#!/usr/bin/env bash
# Issue 36's baselines on the GPU machine:
#   model  bench/infer/st_baseline.py: PyTorch eager and torch.compile(mode="reduce-overhead")
#          beside ferry-model-bench, issue 36's uniform shapes and the mixed-length batches
#   load   bench/infer/embed_bench.py --parts infinity: Infinity 0.0.78 (torch engine) on its
#          /embeddings beside ferry http on /v1/embeddings, same cores, same load generator,
#          lone-request latency from ferry-open-loop --closed, and wrk where .carry/tools has it
#
# The model (scripts/device/carry-model.sh) and Infinity's wheels (scripts/device/carry-infinity.sh)
# are more than one call may carry, so they travel over calls in a row while the machine stays
# warm; each call but the last runs `stash` with the parts it carries:
#
#   step 1 (carry .carry-model-a):                       bash scripts/device/check.sh baselines stash
#   step 2 (carry .carry-model-b):                       bash scripts/device/check.sh baselines stash
#   step 3 (carry .carry-infinity/1):                    bash scripts/device/check.sh baselines stash
#   step 4 (carry .carry-infinity/2 and .carry-model-c): bash scripts/device/check.sh baselines stash
#   step 5 (carry .carry):                PART=model bash scripts/device/check.sh baselines
#   step 6 (carry .carry):                PART=load  bash scripts/device/check.sh baselines
#
# (PART=all runs both, if they fit in one call's 10 minutes.) Make .carry with
#   CARRY_FILES="apps/ferry/ferry bench/infer/ferry-model-bench bench/http/ferry-open-loop" \
#     scripts/device/carry-build.sh build && scripts/device/carry-http-tools.sh
# Infinity installs once per machine into /tmp/ferry-infinity/site (pip --target, --no-deps),
# and only embed_bench's step sees it (PYTHONPATH): st_baseline.py uses the machine's own
# torch, transformers and sentence-transformers. INFINITY_BATCH_SIZES (32,128),
# INFINITY_COMPILE (off,on), INFINITY_RATES, SECONDS_PER_RUN (3), SECONDS_MODEL (2) and COMPILE_DYNAMIC
# (static: a graph compiled per shape, the strongest; auto: torch's default) tune it.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
I=/tmp/ferry-infinity
stash_infinity_parts() {
  mkdir -p $I/wheels
  for d in .carry-infinity/*/; do [ -f "$d/MANIFEST" ] && cp "$d"* $I/wheels/; done
  echo "$(ls $I/wheels | wc -l) files in $I/wheels"
}
if [ "${1:-}" = stash ]; then
  if ls .carry-model-*/part.* >/dev/null 2>&1; then . "$here/model-parts.sh" stash; fi
  stash_infinity_parts
  exit 0
fi
FINAL=${OUT:-$PWD/baseline-results}
OUT=$(mktemp -d)
. "$here/device-steps.sh"
. "$here/model-parts.sh" || exit 1
export PATH=$C/tools:$PATH
B=$C/build
PART=${PART:-all}

# Every wheel the MANIFEST names, with its sha256, then one install per machine.
install_infinity() {
  stash_infinity_parts
  (cd $I/wheels && sha256sum -c --quiet MANIFEST) || { echo "a part is missing: run the stash calls"; return 1; }
  if [ ! -f $I/site/.installed ]; then
    rm -rf $I/site
    python3 -m pip install --no-index --no-deps --target $I/site $I/wheels/*.whl || return 1
    touch $I/site/.installed
  fi
  PYTHONPATH=$I/site python3 -c "import infinity_emb, numpy, transformers, sentence_transformers, scipy, sklearn, torch
print('infinity-emb', infinity_emb.__version__, 'numpy', numpy.__version__, 'transformers', transformers.__version__,
      'sentence-transformers', sentence_transformers.__version__, 'scipy', scipy.__version__, 'torch', torch.__version__)"
}

case "$PART" in model|all)
  step model_vs_torch_cuda timeout 560 python3 bench/infer/st_baseline.py --model "$FERRY_MODEL_DIR" \
    --seconds "${SECONDS_MODEL:-2}" --compile-dynamic "${COMPILE_DYNAMIC:-static}" \
    --modes "${MODEL_MODES:-eager,compile,compile-gpu,compile-stream}" \
    --ferry "$B/bench/infer/ferry-model-bench" --mixed-file "$OUT/mixed.lengths" \
    --json "$OUT/model_vs_torch_cuda.json" ;;
esac
case "$PART" in load|all)
  step infinity_install install_infinity
  parts=infinity; command -v wrk >/dev/null && parts=infinity,wrk
  # USE_*: transformers would otherwise import the machine's jax, whose extension fails to load there.
  step infinity_vs_ferry env PYTHONPATH=$I/site USE_FLAX=0 USE_TF=0 USE_JAX=0 USE_TORCH=1 timeout 560 python3 bench/infer/embed_bench.py --ferry "$FERRY" \
    --open-loop "$B/bench/http/ferry-open-loop" --model "$FERRY_MODEL_DIR" --backend cuda \
    --launch "${BENCH_LAUNCH:-persistent}" --proxy-cpus 0,1,2,3 --batcher-cpu 4 --client-cpus 8-15 \
    --client-threads 4 --seconds "${SECONDS_PER_RUN:-3}" --parts "$parts" --infinity $I/site/bin/infinity_emb \
    --infinity-batch-sizes "${INFINITY_BATCH_SIZES:-32,128}" --infinity-compile "${INFINITY_COMPILE:-off,on}" \
    ${INFINITY_RATES:+--infinity-rates "$INFINITY_RATES"} --json "$OUT/infinity_vs_ferry.json" ;;
esac
log "summary"; cat "$OUT/summary.txt"; echo "status=$status"
for f in infinity_install model_vs_torch_cuda infinity_vs_ferry; do [ -f "$OUT/$f.log" ] && { echo "== $f"; tail -45 "$OUT/$f.log"; }; done
mkdir -p "$FINAL"
tar czf "$FINAL/baseline-check.tgz" -C "$OUT" .
cp "$OUT"/summary.txt "$FINAL/"
exit $status
