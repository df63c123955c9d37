#!/usr/bin/env bash
# Ferry as a package: installs a build tree into a fresh prefix, builds
# examples/upper_server against it with find_package(ferry) from a clean build
# directory, and drives the example over TCP with `ferry client` (the DOCA
# wire), checking every response. Where nvcc and a GPU are present, the same
# runs on each CUDA launch method too.
#
#   scripts/example-check.sh BUILD_DIR WORK_DIR       build, install and run
#   scripts/example-check.sh --run UPPER_SERVER FERRY BACKEND [LAUNCH]
#                                                      run a built example only
#                                                      (the GPU machine, which has
#                                                      no -dev packages to build it)
set -euo pipefail

# Starts the example, sends 2 x 2000 requests, stops it with SIGTERM.
run_example() {
  local bin=$1 ferry=$2 backend=$3 launch=${4:-persistent}
  local dir; dir=$(mktemp -d)
  "$bin" --port-file "$dir/port" --backend "$backend" --launch "$launch" >"$dir/log" 2>&1 &
  local pid=$!
  for _ in $(seq 200); do [ -s "$dir/port" ] && break; sleep 0.05; done
  if [ ! -s "$dir/port" ]; then
    echo "example-check: upper_server ($backend $launch) did not start:"; cat "$dir/log"; kill -9 $pid 2>/dev/null; return 1
  fi
  local rc=0
  "$ferry" client -p "$(cat "$dir/port")" -m "hello, ferry" -e "HELLO, FERRY" -i 2000 -t 2 -l 30 || rc=$?
  kill -TERM $pid
  wait $pid || rc=$?
  grep -q "answered 4000 requests" "$dir/log" || { echo "example-check: the example did not answer 4000 requests"; rc=1; }
  local what=$backend; [ "$backend" = cuda ] && what="cuda $launch"
  if [ $rc -eq 0 ]; then echo "example-check: upper_server ($what) ok"
  else echo "example-check: upper_server ($what) FAILED"; cat "$dir/log"; fi
  rm -rf "$dir"
  return $rc
}

if [ "${1:-}" = "--run" ]; then
  run_example "$2" "$3" "$4" "${5:-persistent}"
  exit
fi

BUILD=$(realpath "$1")
WORK=$2
rm -rf "$WORK"
mkdir -p "$WORK"
WORK=$(realpath "$WORK")
SRC=$(cd "$(dirname "$0")/.." && pwd)
echo "example-check: installing $BUILD into $WORK/prefix"
cmake --install "$BUILD" --prefix "$WORK/prefix" >"$WORK/install.log"
for f in include/ferry/offload/server.h lib/cmake/ferry/ferryConfig.cmake lib/pkgconfig/ferry.pc bin/ferry \
         bin/doca_dpu_gpu_remote_offload_server bin/doca_dpu_gpu_remote_offload_orchestrator \
         bin/doca_dpu_gpu_remote_offload_client; do
  [ -e "$WORK/prefix/$f" ] || { echo "example-check: the install has no $f"; exit 1; }
done
# Only the public headers: nothing from src/.
if [ -d "$WORK/prefix/include/xfer" ] || [ -d "$WORK/prefix/include/core" ]; then
  echo "example-check: internal headers were installed"; exit 1
fi
echo "example-check: building examples/upper_server against the package"
cmake -S "$SRC/examples/upper_server" -B "$WORK/example" -DCMAKE_PREFIX_PATH="$WORK/prefix" -DCMAKE_BUILD_TYPE=Release \
  >"$WORK/configure.log"
cmake --build "$WORK/example" -j"$(nproc)" >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; exit 1; }
"$WORK/prefix/bin/doca_dpu_gpu_remote_offload_client" --help | grep -q "Closed-loop client" \
  || { echo "example-check: the DOCA client name does not run the client"; exit 1; }
run_example "$WORK/example/upper_server" "$WORK/prefix/bin/ferry" cpu
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  for m in persistent burst graph memops; do run_example "$WORK/example/upper_server" "$WORK/prefix/bin/ferry" cuda $m; done
fi
