#!/usr/bin/env bash
# Checks docs/architecture.md against the CMake targets, so that its layer diagram cannot fall
# behind the code again. Fails (exit 1, naming each problem) when
#   - a library target that src/**/CMakeLists.txt adds (add_library) is not named on the page;
#   - a folder of src/ is not named on the page as `folder/`;
#   - the "## Layers" diagram names a ferry_* target that neither src/ nor cmake/ defines.
# Usage: scripts/check-architecture.sh [REPO_ROOT]. Run by ctest as architecture_doc (label unit).
set -euo pipefail

root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
doc=$root/docs/architecture.md
[[ -f $doc ]] || { echo "check-architecture: $doc not found" >&2; exit 1; }

lib_names() {  # the names that add_library( declares in the files given
  grep -hoE 'add_library\([A-Za-z0-9_]+' "$@" | sed 's/^add_library(//' | sort -u
}

mapfile -t cmake_files < <(find "$root/src" -name CMakeLists.txt | sort)
mapfile -t src_targets < <(lib_names "${cmake_files[@]}")
declare -A defined=()
for t in $(lib_names "${cmake_files[@]}" "$root"/cmake/*.cmake); do defined[$t]=1; done

problems=0
for t in "${src_targets[@]}"; do
  # -w: ferry_xfer must appear as itself, not only inside ferry_xfer_types.
  if ! grep -qw -- "$t" "$doc"; then
    echo "docs/architecture.md does not name the library target $t (add it to the Layers diagram)"
    problems=$((problems + 1))
  fi
done

for d in "$root"/src/*/; do
  name=$(basename "$d")
  if ! grep -qF -- "$name/" "$doc"; then
    echo "docs/architecture.md does not name the folder src/$name/"
    problems=$((problems + 1))
  fi
done

# The diagram: the first code block after "## Layers".
diagram=$(awk '/^## Layers/ {in_section = 1; next}
               in_section && /^```/ {if (in_block) exit; in_block = 1; next}
               in_block {print}' "$doc")
[[ -n $diagram ]] || { echo "docs/architecture.md has no diagram under '## Layers'"; exit 1; }
for t in $(grep -oE '\bferry_[a-z0-9_]+' <<<"$diagram" | sort -u); do
  if [[ -z ${defined[$t]:-} ]]; then
    echo "docs/architecture.md's diagram names $t, which no add_library in src/ or cmake/ defines"
    problems=$((problems + 1))
  fi
done

if ((problems > 0)); then
  echo "check-architecture: $problems problem(s)" >&2
  exit 1
fi
echo "check-architecture: docs/architecture.md names all ${#src_targets[@]} library targets of src/"
