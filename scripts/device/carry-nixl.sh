#!/usr/bin/env bash
# Packs .carry-nixl/ (ignored by git) for scripts/device/nixl-check.sh: NIXL 1.5.1
# for the GPU machine's Python 3.12 and torch cu130, whose `nixl` meta package
# picks nixl_cu13 (LMCache imports nixl._api from it).
#   nixl-1.5.1-py3-none-any.whl   the meta package, pure Python (12 KB)
#   nixl_cu13-1.5.1-min.tar.xz    nixl_cu13 cut down from its 59 MB wheel (237 MB
#                                 unpacked, mostly nixl_ep and plugins' SDKs) to
#                                 what the tests load: the Python package, libnixl
#                                 and the libraries its readelf -d NEEDED entries
#                                 reach, and the POSIX plugin (nixl_bench's
#                                 baseline); unpacked into the site folder it keeps
#                                 the wheel's layout, so every RPATH still resolves.
# Ferry's plugin travels in .carry (carry-build.sh) and LMCache in .carry-py
# (carry-py.sh). One device call carries all three, about 60 MiB:
#   CARRY_FILES="apps/ferry/ferry nixl-plugins/libplugin_DOCA_DMA_PROXY.so" scripts/device/carry-build.sh build
#   scripts/device/carry-py.sh && scripts/device/carry-nixl.sh
#   run: bash scripts/device/check.sh nixl    carry: [".carry", ".carry-py", ".carry-nixl"]
# Usage: scripts/device/carry-nixl.sh
set -euo pipefail
C=.carry-nixl
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 -d "$tmp" nixl-cu13==1.5.1 nixl==1.5.1
mkdir "$tmp/w"
(cd "$tmp/w" && python3 -m zipfile -e "$tmp"/nixl_cu13-1.5.1-cp312-*.whl .)

# The closure of NEEDED entries inside the wheel's two library folders; what
# resolves nowhere there is the machine's (glibc, libstdc++, libssl3, libz).
cd "$tmp/w"
queue=(nixl_cu13/_bindings.cpython-312-x86_64-linux-gnu.so nixl_cu13/_utils.cpython-312-x86_64-linux-gnu.so
       .nixl_cu13.mesonpy.libs/libnixl.so .nixl_cu13.mesonpy.libs/plugins/libplugin_POSIX.so)
declare -A seen=() system=()
while ((${#queue[@]})); do
  f=${queue[0]}; queue=("${queue[@]:1}")
  [ -n "${seen[$f]:-}" ] && continue
  seen[$f]=1
  for n in $(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
    found=
    for d in .nixl_cu13.mesonpy.libs nixl_cu13.libs; do
      if [ -e "$d/$n" ]; then queue+=("$d/$n"); found=1; break; fi
    done
    [ -n "$found" ] || system[$n]=1
  done
done
printf '%s\n' "${!seen[@]}" nixl_cu13/*.py nixl_cu13/py.typed | sort > "$tmp/files"
cd - > /dev/null
echo "carry-nixl: $(wc -l < "$tmp/files") files of nixl_cu13; from the machine: ${!system[*]}"

rm -rf "$C"
mkdir -p "$C"
tar -C "$tmp/w" -cJf "$C/nixl_cu13-1.5.1-min.tar.xz" -T "$tmp/files"
cp "$tmp"/nixl-1.5.1-py3-none-any.whl "$C/"
du -sh "$C"
# One call carries at most 64 MiB of ignored paths.
total=$({ du -scm --apparent-size .carry .carry-py "$C" 2>/dev/null || true; } | tail -n 1 | cut -f1)
echo "carry-nixl: .carry + .carry-py + $C = ${total} MiB (at most 64 in one call)"
[ "$total" -le 64 ] || echo "carry-nixl: too much for one call: rebuild .carry with only CARRY_FILES above" >&2
