#!/usr/bin/env bash
# Packs Debian's OpenMPI runtime into .carry/mpi, unpacked, for a machine that
# has no MPI and no package registry (scripts/device/route-device.sh uses it there when
# mpirun is missing). Run it here, where apt works; it downloads only these
# packages' .deb files and unpacks them (no install, no root needed).
# Usage: scripts/device/route-carry-mpi.sh [DEST]   (default .carry/mpi)
set -euo pipefail
D=${1:-.carry/mpi}
PKGS="openmpi-bin openmpi-common libopenmpi3 libpmix2 libhwloc15 libevent-core-2.1-7 libevent-pthreads-2.1-7 libmunge2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download $PKGS)
rm -rf "$D"
mkdir -p "$D"
for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$D"; done
# Debian names mpirun through update-alternatives, which an unpacked tree lacks.
ln -sf orterun "$D/usr/bin/mpirun"
du -sh "$D"
