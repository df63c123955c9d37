#!/usr/bin/env bash
# Issue 40: the launch methods against the minimal mechanisms under them, in one
# call: ROUNDS (3) rounds of `ferry-launch-bench` over every GPU method at 64 B,
# each printing the minimal ping-pong (the floor), the minimal launch, graph and
# memops round trips, and each method's ratio to its own; then the persistent
# kernel's latency and 64 B capacity at 1, 4, 8 and 16 channels. Carry .carry
# with bench/launch/ferry-launch-bench (scripts/device/carry-build.sh). Results: $OUT.
set -uo pipefail
FINAL=${OUT:-$PWD/launch-results}
OUT=$(mktemp -d)
. "$(dirname "$0")/device-steps.sh"
for r in $(seq "${ROUNDS:-3}"); do
  step "launch_$r" "$LAUNCH_BENCH" --methods persistent,burst,graph,memops --sizes 64 --bursts 1,32,1024 \
    --seconds "${SECONDS_PER_POINT:-0.5}" --json-out "$OUT/launch_$r.json"
  grep -E "floor|acquire|minimal|handler|^persistent|^burst|^graph|^memops" "$OUT/launch_$r.log"
done
for ch in ${CHANNELS:-1 4 8 16}; do
  step "persistent_${ch}ch" "$LAUNCH_BENCH" --methods persistent --sizes 64 --bursts 1,1024 --channels "$ch" \
    --seconds "${SECONDS_PER_POINT:-0.5}" --json-out "$OUT/persistent_${ch}ch.json"
  grep -E "floor|^persistent" "$OUT/persistent_${ch}ch.log"
done
log "summary"; cat "$OUT/summary.txt"; echo "status=$status"
mkdir -p "$FINAL"
tar czf "$FINAL/launch-check.tgz" -C "$OUT" .
exit $status
