#!/bin/sh
# Runs a test binary under ThreadSanitizer with every report, of the test and of
# the processes it starts (`ferry agent`), written to files; fails when the test
# fails or any process wrote a report. A child's report would otherwise go to its
# stderr log, which the test deletes with the child, and pass unseen.
# Usage (ctest, tsan builds only): tsan_clean.sh TEST_BINARY ARGS...
set -u
dir=$(mktemp -d "${TMPDIR:-/tmp}/ferry-tsan.XXXXXX")
TSAN_OPTIONS="${TSAN_OPTIONS:-} log_path=$dir/report" "$@"
rc=$?
if [ -n "$(ls "$dir")" ]; then
  cat "$dir"/*
  echo "tsan_clean.sh: ThreadSanitizer reports from the processes above ($(ls "$dir" | wc -l) files)"
  [ "$rc" -ne 0 ] || rc=1
fi
rm -rf "$dir"
exit "$rc"
