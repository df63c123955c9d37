#!/usr/bin/env bash
# The agent's pipeline settings on the GPU machine: `ferry-kv-bench` (push and
# pull, DRAM tier) once per SETTINGS entry, "copy chunk_kib queue_depth" each.
# Which of batch size and lanes limits a block size shows as GB/s moving with one
# and not the other. Binaries come prebuilt in .carry/ (scripts/device/carry-build.sh).
# Usage: [SETTINGS="kernel 4096 8;kernel 16384 8"] [BLOCKS="65536 1048576"] [TOTAL=bytes] [TIER=dram:12GiB] [AGENT_FLAGS="--lane-spin-us 0"] scripts/device/xfer-sweep.sh
set -uo pipefail
FINAL=${OUT:-$PWD/xfer-sweep}
OUT=$(mktemp -d)
. "$(dirname "$0")/device-steps.sh"
SETTINGS=${SETTINGS:-"kernel 4096 8;kernel 16384 8;kernel 4096 16;kernel 8192 12"}
BLOCKS=${BLOCKS:-"65536 1048576 33554432"}
TOTAL=${TOTAL:-2147483648}
TIER=${TIER:-dram:12GiB}
IFS=';' read -ra runs <<<"$SETTINGS"
n=0
for r in "${runs[@]}"; do
  read -r copy chunk qd <<<"$r"
  n=$((n + 1))
  name="${n}_${copy}_c${chunk}_q${qd}"  # numbered: a setting may repeat
  ep="unix:ferry-sweep-$name"
  # The agent on cores 8-15, the application on 0-7, as in xfer-gpu-check.sh.
  "$FERRY" agent --endpoint "$ep" --tier "$TIER" --staging-mib 1024 --chunk-kib "$chunk" --queue-depth "$qd" \
    --copy "$copy" --cpus 8,9,10,11,12,13,14,15 ${AGENT_FLAGS:-} --ready-file "$OUT/ready-$name" 2>"$OUT/agent_$name.log" &
  agent=$!
  for i in $(seq 100); do [ -f "$OUT/ready-$name" ] && break; sleep 0.1; done
  # shellcheck disable=SC2086
  step "sweep_$name" taskset -c 0-7 "$KV_BENCH" --endpoint "$ep" --mem vram --total-bytes "$TOTAL" \
    --block-sizes $BLOCKS --no-baselines --json-out "$OUT/sweep_$name.json"
  kill -TERM $agent; wait $agent
  grep -o "agent time per phase.*" "$OUT/agent_$name.log" | sed "s/^/$name: /" >>"$OUT/phases.txt"
  grep "ferry p" "$OUT/sweep_$name.log" | sed "s/^/$name /"
done
cat "$OUT/phases.txt" 2>/dev/null
mkdir -p "$FINAL"
tar czf "$FINAL/xfer-sweep.tgz" -C "$OUT" .
exit $status
