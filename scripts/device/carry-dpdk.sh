#!/usr/bin/env bash
# Adds to .carry/ the baseline of ferry l2fwd's benchmark (run
# scripts/device/carry-build.sh first, which carries ferry and libpcap):
# Debian's dpdk-testpmd, with the shared DPDK libraries it links and the PMD
# plugins it loads (-d .carry/dpdk/pmds).
set -euo pipefail
C=.carry
mkdir -p "$C/dpdk/lib" "$C/dpdk/pmds"
cp -L /usr/bin/dpdk-testpmd "$C/dpdk/"
ldd /usr/bin/dpdk-testpmd | awk '$3 ~ /^\// {print $3}' | grep -vE '/(libc|libm|libpthread|libdl|librt)\.so' |
  while read -r lib; do cp -L "$lib" "$C/dpdk/lib/"; done
P=/usr/lib/x86_64-linux-gnu/dpdk/pmds-23.0
for pmd in librte_net_null librte_net_ring librte_net_memif librte_mempool_ring; do
  cp -L "$P/$pmd.so" "$C/dpdk/pmds/$pmd.so"
  ldd "$P/$pmd.so" | awk '$3 ~ /^\// {print $3}' | grep -vE '/(libc|libm|libpthread|libdl|librt)\.so' |
    while read -r lib; do cp -Ln "$lib" "$C/dpdk/lib/" 2>/dev/null || true; done
done
du -sh "$C"
