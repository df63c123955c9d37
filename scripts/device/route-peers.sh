#!/usr/bin/env bash
# Ferry's route beside the peer libraries (YGM, bale's conveyors) on the
# 16-core GPU machine, and the measurements behind issue 22's choices, in one
# call per part:
#   peers   histogram, index-gather and randperm at 2, 4 and 8 ranks on Ferry
#           (inline and process) and both peers, 3 repeats, median (~5 min)
#   ab      Ferry before and after a change, same run, every app at 8 ranks in
#           inline and process mode with 1, 2 and 4 router threads (needs the
#           "before" binaries in .carry/before/bench/route; ~2 min);
#           AB_RANKS and AB_MODES change the ranks and modes
#   sweep   transpose and qs-mini over --work-per-message, inline against
#           process mode with one router thread and with the default (auto:
#           one per 2 applications), 3 repeats (~3 min)
#
#   scripts/device/route-peers.sh peers|ab|sweep
#
# Needs, built here and packed by scripts/device/carry-build.sh (CARRY_FILES):
#   .carry/build/bench/route/{histogram,index_gather,randperm,transpose,qs_mini}
#   .carry/build/bench/route/peers/{ygm,convey}_{histogram,index_gather,randperm}
# and the machine's own mpirun. Results go to $OUT (or ./route-peers).
set -uo pipefail
PART=${1:?usage: route-peers.sh peers|ab|sweep}
FINAL=${OUT:-$PWD/route-peers}
mkdir -p "$FINAL"
C=$PWD/.carry
export LD_LIBRARY_PATH=$C/lib:${LD_LIBRARY_PATH:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
command -v mpirun >/dev/null || { echo "no mpirun on this machine" >&2; exit 2; }
log() { echo "== $(date +%T) $*"; }
CPUS=$(nproc)
{ nproc; lscpu | grep -E "Model name|Socket|Core|Thread|L3"; mpirun --version | head -1; uptime; } \
  | tee "$FINAL/machine.txt"

status=0
case "$PART" in
  peers)
    log "peers: Ferry, YGM, conveyors"
    python3 bench/route/peers_bench.py --build "$C/build" --size large --cpus "$CPUS" --ranks 2,4,8 \
      --libraries ferry_inline,ferry_process,ygm,convey --repeats 3 --timeout 120 \
      --json-out "$FINAL/peers.json" 2>&1 | tee "$FINAL/peers.txt"
    status=${PIPESTATUS[0]} ;;
  ab)
    for side in before build; do
      [ -d "$C/$side/bench/route" ] || { echo "missing $C/$side/bench/route" >&2; exit 2; }
      log "ab: $side"
      python3 bench/route/route_bench.py --build-dir "$C/$side" --size full --cpus "$CPUS" \
        --out "$FINAL/ab-$side" --ranks "${AB_RANKS:-8}" --apps histogram,index_gather,randperm,transpose,qs_mini \
        --modes "${AB_MODES:-inline,process,process_t2,process_t4}" --works 0 --sweep-apps "" --timeout 60 \
        ${AB_ARGS:-} 2>&1 | tee "$FINAL/ab-$side.txt"
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    done ;;
  sweep)
    log "sweep: transpose, inline against process"
    python3 bench/route/route_bench.py --build-dir "$C/build" --size full --cpus "$CPUS" --out "$FINAL/sweep" \
      --ranks 8 --apps transpose --modes inline --works 0 \
      --sweep-apps transpose,qs_mini --sweep-ranks 8 --sweep-works 0,2,8,32,64 \
      --sweep-modes inline,process,process_tauto --repeat 3 --stat median --timeout 60 2>&1 \
      | tee "$FINAL/sweep.txt"
    status=${PIPESTATUS[0]} ;;
  *) echo "unknown part $PART (peers|ab|sweep)" >&2; exit 2 ;;
esac
log "done, status=$status"
exit "$status"
