#!/usr/bin/env bash
# The transfer engine on the GPU machine, in one call: the end-to-end suite with
# real CUDA IPC, then `ferry-kv-bench` (4 GiB per block size and direction,
# DRAM tier) beside the cudaMemcpyAsync-loop, cudaMemcpyBatchAsync and copy-kernel
# baselines, once with each of the agent's device copy modes worth comparing:
# auto (the default: the copy kernel for small blocks, the copy engines with
# the kernel checksumming from --engines-from) and batch; COPY_MODES="auto batch kernel" adds
# kernel. The agent's loop mode is left out (it lost to batch everywhere); the
# application's cudaMemcpyAsync loop stays among the batch run's baselines.
# Also the hung-kernel test on the GPU launch methods (issue 3). Results go to
# $OUT as one tarball.
#
# Binaries come prebuilt in .carry/ (scripts/device/carry-build.sh).
set -uo pipefail
FINAL=${OUT:-$PWD/xfer-results}
OUT=$(mktemp -d)
. "$(dirname "$0")/device-steps.sh"
step xfer_e2e_gpu "$C/build/tests/xfer/xfer_e2e_test" --mem=vram --gpu
step xfer_e2e_gpu_kernel "$C/build/tests/xfer/xfer_e2e_test" --mem=vram --gpu --copy=kernel
step xfer_e2e_gpu_batch "$C/build/tests/xfer/xfer_e2e_test" --mem=vram --gpu --copy=batch
for m in persistent burst; do
  step "hang_cuda_$m" "$C/build/tests/offload/e2e_test" --backend=cuda --launch=$m --gtest_filter='Faults.AHung*'
done
for copy in ${COPY_MODES:-auto batch}; do
  ep="unix:ferry-bench-$copy"
  # The agent on its own cores (8-15); the application runs on 0-7.
  "$FERRY" agent --endpoint "$ep" --tier dram:12GiB --staging-mib 1024 --queue-depth 8 \
    --copy $copy --cpus 8,9,10,11,12,13,14,15 --ready-file "$OUT/ready-$copy" 2>"$OUT/agent_$copy.log" &
  agent=$!
  for i in $(seq 100); do [ -f "$OUT/ready-$copy" ] && break; sleep 0.1; done
  step "kv_bench_$copy" taskset -c 0-7 "$KV_BENCH" --endpoint "$ep" --mem vram --total-bytes 4294967296 \
    --json-out "$OUT/kv_bench_$copy.json" $([ $copy != batch ] && echo --no-baselines)
  kill -TERM $agent; wait $agent
  grep -o "agent time per phase.*" "$OUT/agent_$copy.log" | sed "s/^/$copy: /" >>"$OUT/phases.txt"
done
log "summary"; cat "$OUT/summary.txt"; echo "status=$status"; cat "$OUT/phases.txt" 2>/dev/null
cat "$OUT"/kv_bench_auto.log "$OUT"/kv_bench_batch.log "$OUT"/kv_bench_kernel.log 2>/dev/null
mkdir -p "$FINAL"
tar czf "$FINAL/xfer-results.tgz" -C "$OUT" .
exit $status
