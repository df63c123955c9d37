#!/usr/bin/env bash
# Issue 38 part 5 on the GPU machine's 16-core host: the redis-cluster tier
# against redis-benchmark --cluster on clusters of 1, 3 and 6 primaries, objects
# of 64KiB, 256KiB and 1MiB (bench/xfer/store/cluster_bench.py; a core per
# server, the client on the other ten). The machine has no redis, so carry
# redis-server, redis-cli and redis-benchmark with ferry-store-bench (.carry is
# ignored by git):
#   CARRY_FILES="bench/xfer/store/ferry-store-bench" scripts/device/carry-build.sh build
# Writes $OUT/store-cluster.log (progress and the table) and $OUT/store-cluster.json.
# Arguments go to cluster_bench.py (e.g. --repeat 5 --threads 16).
# Usage (from the device tool): bash scripts/device/check.sh store-cluster [ARGS...]
set -euo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
C=$PWD/.carry
BENCH=$C/build/bench/xfer/store/ferry-store-bench
for f in "$BENCH" "$C/redis/redis-server" "$C/redis/redis-cli" "$C/redis/redis-benchmark"; do
  [ -x "$f" ] || { echo "store-cluster-check: $f is not here: carry .carry (see the top of $0)"; exit 1; }
done
export PATH="$C/redis:$PATH"
export LD_LIBRARY_PATH="$C/lib:${LD_LIBRARY_PATH:-}"  # liblzf, libjemalloc, hiredis, spdlog, fmt ...
echo "host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
redis-server --version
python3 bench/xfer/store/cluster_bench.py --bench "$BENCH" --json-out "$OUT/store-cluster.json" "$@" 2>&1 |
  tee "$OUT/store-cluster.log"
