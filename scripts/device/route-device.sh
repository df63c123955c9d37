#!/usr/bin/env bash
# The route benchmark on the 16-core GPU machine, in one call (under 6 minutes):
# every app in every mode at 4 and 8 ranks (process mode with one router thread
# and with four), then transpose and qs-mini swept over --work-per-message
# (speedup against the memory-to-communication ratio).
# ROUTE_ONLY=qs_mini: only qs-mini at 8 ranks (about 4 minutes): at work 0 its
# escape geometry (qs_mini_escape) and its thinnest setting, then its Quicksilver setting swept
# over the work, every point three times (the median counts). (71996b1 also
# timed 8-slot rings, process_s8: slower, so later code leaves it out.)
# ROUTE_ONLY=transpose: the transpose sweep alone at 8 ranks, every point three
# times (the median counts; about 4 minutes).
# Results go to $OUT (or ./route-results) as route-results.tgz plus the table,
# the JSON and the plot.
#
# Binaries come prebuilt in .carry/ (this machine has no -dev packages):
#   .carry/build/bench/route/{histogram,index_gather,transpose,qs_mini,randperm}
#   .carry/lib/ with libspdlog and libfmt (scripts/device/carry-build.sh puts them there)
# MPI: the machine's own OpenMPI 4.x (libmpi.so.40) when mpirun is on PATH;
# otherwise an unpacked Debian OpenMPI runtime in .carry/mpi (see
# scripts/device/route-carry-mpi.sh).
set -uo pipefail
FINAL=${OUT:-$PWD/route-results}
WORK=$(mktemp -d)
C=$PWD/.carry
export LD_LIBRARY_PATH=$C/lib:${LD_LIBRARY_PATH:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
log() { echo "== $(date +%T) $*"; }

if ! command -v mpirun >/dev/null 2>&1 && [ -x "$C/mpi/usr/bin/mpirun" ]; then
  # Debian's OpenMPI, relocated: OPAL_PREFIX moves every path it derives from /usr.
  M=$C/mpi/usr
  export PATH=$M/bin:$PATH OPAL_PREFIX=$M
  export LD_LIBRARY_PATH=$M/lib/x86_64-linux-gnu:$M/lib/x86_64-linux-gnu/openmpi/lib:$LD_LIBRARY_PATH
  export PMIX_INSTALL_PREFIX=$M/lib/x86_64-linux-gnu/pmix2 PMIX_PREFIX=$M/lib/x86_64-linux-gnu/pmix2
  export OMPI_MCA_mca_base_component_path=$M/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
  export PMIX_MCA_mca_base_component_path=$M/lib/x86_64-linux-gnu/pmix2/lib/pmix
  # Plugins for fabrics this machine lacks (verbs, ucx, netlink) fail to load: say nothing.
  export OMPI_MCA_mca_base_component_show_load_errors=0
  log "using the carried OpenMPI in $M"
fi
if ! command -v mpirun >/dev/null 2>&1; then
  echo "no mpirun on this machine and none carried in $C/mpi: run scripts/device/route-carry-mpi.sh where apt works" >&2
  exit 2
fi
for b in histogram index_gather transpose qs_mini randperm; do
  [ -x "$C/build/bench/route/$b" ] || { echo "missing $C/build/bench/route/$b (build bench/route, copy it to .carry)" >&2; exit 2; }
done

log "machine"
{ nproc; lscpu | grep -E "Model name|Socket|Core|Thread|NUMA node\(s\)|L3"; free -g | head -2; mpirun --version | head -1; } \
  | tee "$WORK/machine.txt"
CPUS=$(nproc)
PY=$(command -v python3)
[ -x /opt/torch/.venv/bin/python3 ] && PY=/opt/torch/.venv/bin/python3

status=0
if [ "${ROUTE_ONLY:-}" = transpose ]; then
  what="transpose only" deadline=260
  args=(--ranks 8 --apps transpose --modes inline --works 0
        --sweep-apps transpose --sweep-ranks 8 --sweep-works 0,1,2,4,8,16,32
        --sweep-modes inline,thread,process,process_t4,process2 --repeat 3 --stat median)
elif [ "${ROUTE_ONLY:-}" = qs_mini ]; then
  what="qs-mini only" deadline=230
  args=(--ranks 8 --apps qs_mini_escape,qs_mini_thin --modes inline,thread,process,process_t4 --works 0
        --sweep-apps qs_mini --sweep-ranks 8 --sweep-works 0,1,2,4,8,16,32
        --sweep-modes inline,thread,process,process_t4 --repeat 3 --stat median)
else
  what="benchmark" deadline=300
  args=(--ranks 8,4 --modes inline,thread,process,process_t4 --works 0
        --sweep-apps transpose,qs_mini --sweep-ranks 8 --sweep-works 0,1,2,4,8,16,32
        --sweep-modes inline,thread,process,process_t4,process2)
fi
log "$what (deadline $deadline s)"
"$PY" bench/route/route_bench.py --build-dir "$C/build" --size full --cpus "$CPUS" --out "$WORK" \
  "${args[@]}" --deadline "$deadline" --timeout 60 2>&1 | tee "$WORK/bench.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
if "$PY" -c "import matplotlib" 2>/dev/null; then
  "$PY" bench/route/plot_route.py "$WORK/route-results.json" "$WORK/route-speedup.png" || status=1
else
  echo "no matplotlib here: plot later with bench/route/plot_route.py" | tee -a "$WORK/bench.txt"
fi
mkdir -p "$FINAL"
tar czf "$FINAL/route-results.tgz" -C "$WORK" .
cp "$WORK"/route-results.json "$WORK"/bench.txt "$WORK"/machine.txt "$FINAL/" 2>/dev/null
cp "$WORK"/route-speedup.png "$FINAL/" 2>/dev/null
log "done, status=$status"
exit $status
