#!/usr/bin/env bash
# Ferry's package by components (cmake/install.cmake), against a tree that
# scripts/example-check.sh installed:
#   - core_consumer asks for core (and route as optional) with every other
#     component's packages disabled, builds and runs;
#   - xfer_consumer asks for xfer with MPI disabled, builds and runs;
#   - http_consumer builds tests/http/route_from_outside_test.cpp with
#     COMPONENTS http and MPI disabled, and runs it;
#   - unknown_component must fail, naming the component and the known ones.
#
#   tests/install/components-check.sh PREFIX WORK_DIR
set -euo pipefail
PREFIX=$(realpath "$1")
WORK=$2
HERE=$(cd "$(dirname "$0")" && pwd)
rm -rf "$WORK"
mkdir -p "$WORK"
WORK=$(realpath "$WORK")

# configure NAME [cmake args]: configures tests/install/NAME against PREFIX.
configure() {
  local name=$1; shift
  cmake -S "$HERE/$name" -B "$WORK/$name" -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_BUILD_TYPE=Release "$@" \
    >"$WORK/$name.configure.log" 2>&1
}

# build_and_run NAME: builds the consumer configured above and runs it.
build_and_run() {
  local name=$1
  cmake --build "$WORK/$name" -j"$(nproc)" >"$WORK/$name.build.log" 2>&1 \
    || { cat "$WORK/$name.build.log"; echo "components-check: $name does not build"; exit 1; }
  "$WORK/$name/$name"
}

configure core_consumer -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON -DCMAKE_DISABLE_FIND_PACKAGE_OpenSSL=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON \
  || { cat "$WORK/core_consumer.configure.log"; echo "components-check: COMPONENTS core looked beyond core's packages"; exit 1; }
build_and_run core_consumer

configure xfer_consumer -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON \
  || { cat "$WORK/xfer_consumer.configure.log"; echo "components-check: COMPONENTS xfer does not configure without MPI"; exit 1; }
build_and_run xfer_consumer

configure http_consumer -DFERRY_SOURCE_DIR="$HERE/../.." -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON \
  || { cat "$WORK/http_consumer.configure.log"; echo "components-check: COMPONENTS http looked beyond its packages"; exit 1; }
build_and_run http_consumer

if configure unknown_component; then
  echo "components-check: COMPONENTS no_such_component configured"; exit 1
fi
expected="ferry has no component 'no_such_component'; its components are core, worker, offload, infer, http, xfer, route"
# CMake wraps the message: compare with the line breaks made spaces.
tr -s ' \n' ' ' <"$WORK/unknown_component.configure.log" | grep -qF "$expected" \
  || { cat "$WORK/unknown_component.configure.log"; echo "components-check: no '$expected'"; exit 1; }
echo "components-check: an unknown component fails with: $expected"
