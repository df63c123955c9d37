# Sourced by the device scripts (gpu-check.sh, xfer-gpu-check.sh): the carried
# binaries' environment, and step NAME CMD..., which runs a command with its
# output in $OUT/NAME.log and records ok/FAILED in $OUT/summary.txt (status=1
# on any failure). The caller sets OUT first, and FINAL where results go back
# (partial.tgz there holds every finished step).
C=$PWD/.carry
export LD_LIBRARY_PATH=$C/lib:${LD_LIBRARY_PATH:-}
export FERRY_BIN=$C/build/apps/ferry/ferry
FERRY=$FERRY_BIN
LAUNCH_BENCH=$C/build/bench/launch/ferry-launch-bench
KV_BENCH=$C/build/bench/kv/ferry-kv-bench
[ -x "$C/redis/redis-server" ] && export FERRY_REDIS_SERVER=$C/redis/redis-server
log() { echo "== $(date +%T) $*"; }
status=0
step() {
  local name=$1; shift
  log "$name"
  if "$@" >"$OUT/$name.log" 2>&1; then
    echo "ok      $name" | tee -a "$OUT/summary.txt"
  else
    echo "FAILED  $name (rc=$?)" | tee -a "$OUT/summary.txt"; tail -25 "$OUT/$name.log"; status=1
  fi
  # Everything so far, after every step: a run cut off by the tool's time limit
  # still brings back what it measured (the final tarball is made only at the end).
  if [ -n "${FINAL:-}" ]; then mkdir -p "$FINAL" && tar czf "$FINAL/partial.tgz" -C "$OUT" .; fi
}
log "device"; nvidia-smi --query-gpu=name,pci.bus_id,driver_version,memory.total --format=csv | tee "$OUT/device.txt"
{ nproc; free -g; } | tee -a "$OUT/device.txt"
