#!/usr/bin/env bash
# Packs Infinity (infinity-emb 0.0.78, the torch engine and its server), issue
# 36's end-to-end baseline, for the GPU machine's Python 3.12: its wheel and
# every dependency the machine's own packages cannot stand in for, into
# .carry-infinity/1, /2 ... (ignored by git), each at most INFINITY_PART_MIB
# (44) so that it travels in one call. scripts/device/baseline-check.sh
# stashes the parts over calls in a row and installs them with
# `pip install --no-index --no-deps --target`, beside the machine's packages.
#
# Why these: Infinity pins sentence-transformers < 4 and numpy < 2, where the
# machine has sentence-transformers 6.0.1, transformers 5, huggingface-hub 1
# and numpy 2. sentence-transformers 3.4.1 needs transformers < 5, which needs
# huggingface-hub < 1 and tokenizers < 0.23; scipy and scikit-learn, which
# transformers and sentence-transformers import, are the machine's builds for
# numpy 2 (its scipy fails on numpy 1.26: `np.long`), so numpy-1 builds travel
# too. fastapi, uvicorn, pydantic and the rest of the server are not on the
# machine. torch, the nvidia-* libraries, triton, requests, anyio, tqdm,
# safetensors, regex, pyyaml, packaging and pillow are the machine's own. The
# versions are the ones pip resolves for `infinity-emb[server,torch]==0.0.78`
# on Python 3.12 (torch excluded), checked here to import and serve with torch
# 2.11.0, the rest as on the machine (docs/bench/inference.md, Method).
# Needs PyPI; the wheels are fetched for cp312 manylinux x86_64 whatever this
# machine's Python is.
# Usage: scripts/device/carry-infinity.sh
set -euo pipefail
C=.carry-infinity
PART_MIB=${INFINITY_PART_MIB:-44}
rm -rf "$C"
mkdir -p "$C/all"
platforms=()
for p in manylinux_2_28 manylinux_2_27 manylinux_2_17 manylinux2014 manylinux1; do
  platforms+=(--platform "${p}_x86_64")
done
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${platforms[@]}" -d "$C/all" \
  infinity-emb==0.0.78 sentence-transformers==3.4.1 transformers==4.57.6 tokenizers==0.22.2 \
  huggingface-hub==0.36.2 numpy==1.26.4 scipy==1.17.1 scikit-learn==1.9.1 \
  click==8.1.8 typer==0.12.5 rich==13.9.4 uvicorn==0.32.1 httptools==0.9.0 watchfiles==1.3.0 \
  websockets==17.4 python-dotenv==1.2.4 fastapi==0.165.0 starlette==1.10.0 pydantic==2.14.4 \
  pydantic-core==2.50.5 annotated-types==0.8.0 annotated-doc==0.0.7 typing-inspection==0.4.5 \
  opentelemetry-api==1.45.2 orjson==3.13.0 posthog==7.91.1 backoff==2.2.1 distro==1.9.0 \
  prometheus-fastapi-instrumentator==8.1.0 prometheus-client==0.26.0
# Every part carries the whole list, so the install can tell a missing part.
(cd "$C/all" && sha256sum -- *.whl) > "$C/MANIFEST"
# Largest first, each into the first part with room.
python3 - "$C" "$PART_MIB" <<'PY'
import os, sys
root, limit = sys.argv[1], float(sys.argv[2]) * 2**20
wheels = sorted(os.listdir(os.path.join(root, "all")), key=lambda w: -os.path.getsize(os.path.join(root, "all", w)))
parts = []
for w in wheels:
    size = os.path.getsize(os.path.join(root, "all", w))
    if size > limit:
        sys.exit(f"carry-infinity: {w} alone is over INFINITY_PART_MIB")
    for p in parts:
        if p[0] + size <= limit:
            p[0] += size
            p[1].append(w)
            break
    else:
        parts.append([size, [w]])
for i, (_, ws) in enumerate(parts, 1):
    d = os.path.join(root, str(i))
    os.makedirs(d)
    for w in ws:
        os.rename(os.path.join(root, "all", w), os.path.join(d, w))
PY
rmdir "$C/all"
for d in "$C"/[0-9]*; do cp "$C/MANIFEST" "$d/"; done
rm "$C/MANIFEST"
du -sh "$C"/[0-9]*
