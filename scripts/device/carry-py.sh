#!/usr/bin/env bash
# Packs .carry-py/ (ignored by git) for scripts/device/lmcache-check.sh: the
# ferry wheel for the GPU machine's Python 3.12, LMCache 0.5.6's wheel, and the
# pure-Python (or manylinux) dependencies that LMCache's L2 adapter path imports
# and the GPU machine's image lacks (the rest, torch among them, are there:
# /work/.library/device/KINDS.md lists them). Needs a Python 3.12 here
# (PY312=...; pyenv's by default) and PyPI.
# Usage: scripts/device/carry-py.sh
set -euo pipefail
PY312=${PY312:-python3.12}
"$PY312" -c '' 2>/dev/null || PY312=$(ls -d /root/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null | tail -n 1)
[ -n "$PY312" ] || { echo "carry-py: no Python 3.12 here: set PY312" >&2; exit 1; }
C=.carry-py
rm -rf "$C"
mkdir -p "$C/deps"
"$PY312" -m pip wheel -q --no-deps ./python -w "$C"
platforms=()
for p in manylinux_2_34 manylinux_2_28 manylinux_2_27 manylinux_2_26 manylinux_2_17 manylinux2014 manylinux1; do
  platforms+=(--platform "${p}_x86_64")
done
get() { python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
          "${platforms[@]}" -d "$1" "${@:2}"; }
get "$C" lmcache==0.5.6
# What lmcache/__init__, its distributed L2 adapters and its bench helpers import
# at module level, with what those need in turn; the versions that ran there
# (pydantic and opentelemetry pin their companions exactly).
get "$C/deps" aiofile==3.12.3 caio==0.12.10 cachetools==8.0.2 cryptography==50.0.2 cffi==2.1.1 pycparser==3.12 \
  fastapi==0.165.0 starlette==1.10.0 pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 \
  typing-inspection==0.4.5 msgspec==0.22.0 nvtx==0.2.17 opentelemetry-api==1.45.2 opentelemetry-sdk==1.45.2 \
  opentelemetry-semantic-conventions==0.66b2 importlib-metadata==10.2.0 uvicorn==0.54.0 pyzmq==27.3.0
du -sh "$C"
