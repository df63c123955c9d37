#!/usr/bin/env bash
# Where process mode loses time on qs-mini, on the 16-core GPU machine, in one
# call (about 3 minutes). Not the benchmark (scripts/device/route-device.sh is): a set
# of A/B variants of the same qs-mini run, interleaved round-robin so that
# drift hits every variant alike, each printed with its split of rank time
# (engine, of which barrier, handlers). Also records the machine's CPU
# topology (which cores are hyperthread siblings) and clock source.
#
#   PROBE_WORKS="0 2" PROBE_REPEAT=3 scripts/device/route-qs-probe.sh
#
# Variants (name: what differs from the inline / process runs):
#   inline         apps on cores 0-7
#   inline_busy8   inline, with a busy loop on core 8 (what one spinning core
#                  beside the apps costs them: turbo, a shared physical core)
#   process        router on core 8
#   process_spin   --route-idle-spins=50000000 (waits never yield or sleep)
# (The c08b6c1 probes also tried software prefetch of the ring chunks, 64 or 512
# delivery chunks per progress() instead of 16, and CLDEMOTE of published
# chunks: no gain; see docs/bench/route.md.)
# Needs .carry/build/bench/route/qs_mini and .carry/lib (scripts/device/carry-build.sh).
set -uo pipefail
FINAL=${OUT:-$PWD/route-probe}
mkdir -p "$FINAL/runs"
C=$PWD/.carry
export LD_LIBRARY_PATH=$C/lib:${LD_LIBRARY_PATH:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
BIN=$C/build/bench/route/qs_mini
[ -x "$BIN" ] || { echo "missing $BIN" >&2; exit 2; }
command -v mpirun >/dev/null || { echo "no mpirun" >&2; exit 2; }

{
  echo "== cpus"; nproc; lscpu | grep -E "Model name|Socket|Core|Thread|NUMA|L2|L3|MHz"
  echo "== cpu core socket node (lscpu -e)"; lscpu -e=CPU,CORE,SOCKET,NODE 2>/dev/null
  echo "== thread siblings"
  for c in /sys/devices/system/cpu/cpu[0-9]*; do
    echo "$(basename "$c"): $(cat "$c/topology/thread_siblings_list" 2>/dev/null)"
  done | sort -V
  echo "== clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)"
  echo "== load"; uptime
} | tee "$FINAL/machine.txt"

P=${PROBE_PARTICLES:-400000}
QS=(--particles-per-rank $P --cells-x-per-rank 1 --cells-y 4 --cells-z 4 --cell-width 8
    --xs-scale 0.25 --cycles 4 --census 2 --work-table-mib 64 --quiet)
VARIANTS=${PROBE_VARIANTS:-"inline inline_busy8 process process_spin"}

run() {  # variant work rep
  local v=$1 w=$2 rep=$3 np=8 flags=(--route-mode=inline --route-app-cpus=0-7) busy=
  case $v in
    inline) ;;
    inline_busy8) busy=8 ;;
    process*) np=9 flags=(--route-mode=process --route-app-cpus=0-7 --route-router-cpus=8) ;;
  esac
  case $v in *_spin*) flags+=(--route-idle-spins=50000000) ;; esac
  local count=$((P * 6 / (6 + w)))
  local args=("${QS[@]}")
  args[1]=$count
  local pid=
  if [ -n "$busy" ]; then taskset -c "$busy" bash -c 'while :; do :; done' & pid=$!; fi
  local json=$FINAL/runs/$v-w$w.$rep.json
  timeout 60 mpirun --oversubscribe --bind-to none -np $np "$BIN" "${flags[@]}" "${args[@]}" \
    --work-per-message "$w" --json-out "$json" > "$FINAL/runs/$v-w$w.$rep.log" 2>&1
  local rc=$?
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  if [ $rc -ne 0 ]; then echo "$v w$w rep$rep: exit $rc"; tail -5 "$FINAL/runs/$v-w$w.$rep.log"; return; fi
  python3 - "$json" "$v" "$w" "$rep" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1])); v, w, rep = sys.argv[2:5]
n = d["messages"]; ranks = len(d["per_rank"])
rank_ns = d["seconds"] * ranks * 1e9 / n
eng = d["comm_s"] * 1e9 / n; bar = d["barrier_s"] * 1e9 / n; hnd = d["handler_s"] * 1e9 / n
secs = sorted(r["seconds"] for r in d["per_rank"])
pend = d["routers"][0]["pending_max"] if d["routers"] else 0
print(f"{v:<16} w{w} rep{rep}  {d['seconds']:.3f} s  {'OK' if d['verified'] else 'FAILED'}  ns/msg: rank {rank_ns:.0f}"
      f" engine {eng:.0f} (barrier {bar:.0f}) handlers {hnd:.0f} rest {rank_ns - eng - hnd:.0f}"
      f"  parked max {pend}")
EOF
}

for w in ${PROBE_WORKS:-0 2}; do
  for rep in $(seq 1 "${PROBE_REPEAT:-3}"); do
    for v in $VARIANTS; do run "$v" "$w" "$rep"; done
  done
done 2>&1 | tee "$FINAL/probe.txt"
# The device tool brings back a limited number of files: one archive.
tar czf "$FINAL/runs.tgz" -C "$FINAL" runs && rm -rf "$FINAL/runs"
