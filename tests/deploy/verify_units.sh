#!/usr/bin/env bash
# verify_units.sh DEPLOY_DIR FERRY_BIN: runs `systemd-analyze verify` on every unit in DEPLOY_DIR.
# The units name the installed binary (/usr/local/bin/ferry), and verify fails on an ExecStart
# that does not exist, so each unit is checked as a copy whose only change is that path, set to
# FERRY_BIN. Fails on a non-zero status or on any message about the units (a misspelt or ignored
# option is only a warning to systemd). Exits 77 (skipped) without systemd-analyze.
set -euo pipefail
deploy_dir=$1
ferry_bin=$2
installed=/usr/local/bin/ferry

if ! command -v systemd-analyze >/dev/null; then
  echo "deploy_units: skipped: systemd-analyze is not installed (Debian: the systemd package)"
  exit 77
fi
[ -x "$ferry_bin" ] || { echo "deploy_units: $ferry_bin is not an executable"; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
units=()
for unit in "$deploy_dir"/*.service; do
  name=$(basename "$unit")
  grep -q "^ExecStart=$installed " "$unit" || { echo "deploy_units: $name: ExecStart does not start $installed"; exit 1; }
  sed "s#^ExecStart=$installed #ExecStart=$ferry_bin #" "$unit" >"$work/$name"
  units+=("$work/$name")
done
[ ${#units[@]} -gt 0 ] || { echo "deploy_units: no unit in $deploy_dir"; exit 1; }

status=0
out=$(systemd-analyze verify "${units[@]}" 2>&1) || status=$?
[ -z "$out" ] || echo "$out"
if [ $status -ne 0 ]; then
  echo "deploy_units: systemd-analyze verify failed ($status)"
  exit 1
fi
for u in "${units[@]}"; do
  if grep -qF "$(basename "$u")" <<<"$out"; then
    echo "deploy_units: systemd-analyze has something to say about $(basename "$u")"
    exit 1
  fi
done
echo "deploy_units: ${#units[@]} units verified: $(cd "$deploy_dir" && ls ./*.service | tr '\n' ' ')"
