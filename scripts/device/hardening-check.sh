#!/usr/bin/env bash
# Issue 35's hardening on the GPU machine, in one call: the reach into an
# application's plain memory measured (ferry-process-memory-probe: process_vm
# as the agent, as the memory's user, and /proc/<pid>/mem, interleaved), the
# transfer engine's suites (the setuid-exec and userfaultfd tests among them)
# with DRAM and with CUDA IPC, the mover's, ferry http's on the CPU and every
# launch method (pages by reference, the access log, chunk framing), and ferry
# l2fwd's (the pool's minimum). Make .carry with
#   CARRY_EXTRA="tests/http/http_e2e_test tests/xfer/exec_setuid_probe bench/xfer/ferry-process-memory-probe
#                tests/xfer/agent/xfer_mover_test tests/packet/l2fwd_gpu_test tests/packet/l2fwd_test"
#   scripts/device/carry-build.sh build
set -uo pipefail
FINAL=${OUT:-$PWD/hardening-results}
OUT=$(mktemp -d)
. "$(dirname "$0")/device-steps.sh"
step process_memory_probe "$C/build/bench/xfer/ferry-process-memory-probe" --mib 512 --threads 1 4 8 \
  --block-kib 64 1024 32768 --rounds 5 --json-out "$OUT/process_memory_probe.json"
step xfer_e2e_dram "$C/build/tests/xfer/xfer_e2e_test" --mem=dram
step xfer_e2e_gpu "$C/build/tests/xfer/xfer_e2e_test" --mem=vram --gpu
step xfer_mover_gpu "$C/build/tests/xfer/agent/xfer_mover_test" --gpu
step http_e2e_cpu "$C/build/tests/http/http_e2e_test" --backend=cpu --launch=cpu
for m in persistent burst graph memops; do
  step "http_e2e_cuda_$m" "$C/build/tests/http/http_e2e_test" --backend=cuda --launch=$m
done
step l2fwd_test "$C/build/tests/packet/l2fwd_test"
step l2fwd_gpu_test "$C/build/tests/packet/l2fwd_gpu_test"
log "summary"; cat "$OUT/summary.txt"; echo "status=$status"
cat "$OUT/process_memory_probe.log"
mkdir -p "$FINAL"
tar czf "$FINAL/hardening-results.tgz" -C "$OUT" .
cp "$OUT"/summary.txt "$OUT"/process_memory_probe.json "$FINAL/" 2>/dev/null
exit $status
