#!/usr/bin/env bash
# Kernel durations under Nsight Compute on the GPU machine: the copy kernel as the
# agent launches it (one lane, a whole 256 MiB request per launch) against the same
# kernel in the application's own baseline (ferry-kv-bench, contiguous pinned memory).
# Tells a slow kernel from a slow pipeline around it. Binaries from .carry/.
# Usage: [BLOCKS="65536 1048576"] [TOTAL=bytes] [QD=1] [CHUNK_KIB=262144] scripts/device/xfer-ncu.sh
set -uo pipefail
FINAL=${OUT:-$PWD/xfer-ncu}
OUT=$(mktemp -d)
. "$(dirname "$0")/device-steps.sh"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
BLOCKS=${BLOCKS:-"65536 1048576"}
TOTAL=${TOTAL:-1073741824}
METRICS=gpu__time_duration.sum,pcie__read_bytes.sum,pcie__write_bytes.sum,dram__bytes_read.sum,dram__bytes_write.sum
profile() { "$NCU" --target-processes all -k regex:copy_pieces --metrics "$METRICS" --csv "$@"; }
ep=unix:ferry-ncu
profile --log-file "$OUT/agent-ncu.csv" "$FERRY" agent --endpoint "$ep" --tier dram:12GiB --staging-mib 1024 \
  --chunk-kib "${CHUNK_KIB:-262144}" --queue-depth "${QD:-1}" --copy kernel --cpus 8,9,10,11,12,13,14,15 \
  --ready-file "$OUT/ready" 2>"$OUT/agent.log" &
agent=$!
for i in $(seq 600); do [ -f "$OUT/ready" ] && break; sleep 0.1; done
# shellcheck disable=SC2086
step bench_agent taskset -c 0-7 "$KV_BENCH" --endpoint "$ep" --mem vram --total-bytes "$TOTAL" \
  --block-sizes $BLOCKS --no-baselines
# ncu is the agent's parent: stop the agent itself, then ncu writes its CSV and exits.
pkill -TERM -x ferry; wait $agent
# The application's baseline kernel (and an unprofiled agent, which it needs).
"$FERRY" agent --endpoint "$ep-2" --tier dram:12GiB --copy kernel --cpus 8,9,10,11,12,13,14,15 \
  --ready-file "$OUT/ready2" 2>"$OUT/agent2.log" &
agent=$!
for i in $(seq 600); do [ -f "$OUT/ready2" ] && break; sleep 0.1; done
# shellcheck disable=SC2086
step bench_app profile --log-file "$OUT/app-ncu.csv" taskset -c 0-7 "$KV_BENCH" --endpoint "$ep-2" \
  --mem vram --total-bytes "$TOTAL" --block-sizes $BLOCKS
kill -TERM $agent; wait $agent
for f in agent app; do
  echo "== $f: copy_pieces launches (grid, duration, bytes)"
  python3 - "$OUT/$f-ncu.csv" <<'PY'
import csv, sys, collections
rows = list(csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"')))
k = collections.defaultdict(dict)
for r in rows:
    k[(r["ID"], r.get("Grid Size", ""))][r["Metric Name"]] = (r["Metric Unit"], r["Metric Value"].replace(",", ""))
for (i, grid), m in k.items():
    print(i, grid, " ".join(f"{n.split('__')[1]}={v}{u}" for n, (u, v) in sorted(m.items())))
PY
done
mkdir -p "$FINAL"
tar czf "$FINAL/xfer-ncu.tgz" -C "$OUT" .
exit $status
