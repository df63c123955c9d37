#!/usr/bin/env bash
# Issue 40: the launch methods against the minimal mechanisms under them, in one
# call: ROUNDS (3) rounds of `ferry-launch-bench` over every GPU method at 64 B,
# each printing the minimal ping-pong (the floor), the minimal launch, graph and
# memops round trips, the persistent kernel's lone request step by step, and
# each method's ratio to its own; then the persistent kernel's latency and 64 B
# capacity at 1, 4, 8 and 16 channels. Carry .carry with
# bench/launch/ferry-launch-bench (scripts/device/carry-build.sh).
# - With .carry-before/ferry-launch-bench also carried, each round runs that
#   binary too, interleaved (before, after): the same call's A/B.
# - KV=1 then pushes and pulls 64 KiB blocks through `ferry agent` with each of
#   KV_AGENT_FLAGS (";"-separated agent flag sets, "" the defaults), beside
#   cudaMemcpyAsync over 4 and 8 streams and the other copy baselines.
# Results: $OUT.
set -uo pipefail
FINAL=${OUT:-$PWD/launch-results}
OUT=$(mktemp -d)
. "$(dirname "$0")/device-steps.sh"
BEFORE=$PWD/.carry-before/ferry-launch-bench
methods() {  # NAME BINARY
  step "$1" "$2" --methods persistent,burst,graph,memops --sizes 64 --bursts 1,32,1024 \
    --seconds "${SECONDS_PER_POINT:-0.5}" --json-out "$OUT/$1.json"
  grep -E "floor|acquire|minimal|handler|step by step|^  [a-z+]|^persistent|^burst|^graph|^memops" "$OUT/$1.log"
}
for r in $(seq "${ROUNDS:-3}"); do
  [ -x "$BEFORE" ] && methods "before_$r" "$BEFORE"
  methods "launch_$r" "$LAUNCH_BENCH"
done
for ch in ${CHANNELS:-1 4 8 16}; do
  step "persistent_${ch}ch" "$LAUNCH_BENCH" --methods persistent --sizes 64 --bursts 1,1024 --channels "$ch" \
    --seconds "${SECONDS_PER_POINT:-0.5}" --json-out "$OUT/persistent_${ch}ch.json"
  grep -E "floor|^persistent" "$OUT/persistent_${ch}ch.log"
done
if [ "${KV:-0}" = 1 ]; then
  IFS=';' read -ra flag_sets <<<"${KV_AGENT_FLAGS:-}"
  [ ${#flag_sets[@]} -eq 0 ] && flag_sets=("")
  n=0
  for flags in "${flag_sets[@]}"; do
    n=$((n + 1))
    ep="unix:ferry-kv64-$n"
    # The agent on cores 8-15, the application on 0-7, as in xfer-gpu-check.sh.
    # shellcheck disable=SC2086
    "$FERRY" agent --endpoint "$ep" --tier dram:12GiB --staging-mib 1024 --queue-depth 8 --copy auto \
      --cpus 8,9,10,11,12,13,14,15 $flags --ready-file "$OUT/ready-$n" 2>"$OUT/agent_kv64_$n.log" &
    agent=$!
    for i in $(seq 100); do [ -f "$OUT/ready-$n" ] && break; sleep 0.1; done
    echo "kv64_$n: agent flags: ${flags:-defaults}" | tee -a "$OUT/kv64_flags.txt"
    for streams in 4 8; do
      step "kv64_${n}_s$streams" taskset -c 0-7 "$KV_BENCH" --endpoint "$ep" --mem vram \
        --total-bytes "${KV_TOTAL:-4294967296}" --block-sizes 65536 --baseline-streams "$streams" \
        --json-out "$OUT/kv64_${n}_s$streams.json"
      grep -E "^ferry|^cuda|^copy|^engines" "$OUT/kv64_${n}_s$streams.log"
    done
    kill -TERM $agent; wait $agent
  done
fi
log "summary"; cat "$OUT/summary.txt"; echo "status=$status"
mkdir -p "$FINAL"
tar czf "$FINAL/launch-check.tgz" -C "$OUT" .
exit $status
