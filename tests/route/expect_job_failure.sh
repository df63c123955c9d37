#!/usr/bin/env bash
# Runs an MPI job that must FAIL: passes when the job exits non-zero within
# SECONDS and its output matches every PATTERN (extended regexes), i.e. a dead
# rank brought the others down with a clear message instead of a hang.
# Usage: expect_job_failure.sh SECONDS PATTERN... -- COMMAND...
set -u
limit=$1; shift
patterns=()
while [ "$1" != "--" ]; do patterns+=("$1"); shift; done
shift
out=$(mktemp)
start=$(date +%s%N)
timeout --kill-after=5 "$limit" "$@" >"$out" 2>&1
rc=$?
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
elapsed="$((elapsed_ms / 1000)).$(printf %03d $((elapsed_ms % 1000)))"
cat "$out"
echo "== job exit status $rc after ${elapsed} s (limit ${limit} s)"
status=0
if [ "$rc" -eq 0 ]; then echo "FAIL: the job succeeded although a rank died"; status=1; fi
if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then echo "FAIL: the job hung until the ${limit} s limit"; status=1; fi
for p in "${patterns[@]}"; do
  if ! grep -Eq "$p" "$out"; then echo "FAIL: no line matches /$p/"; status=1; fi
done
rm -f "$out"
[ $status -eq 0 ] && echo "PASS: the job failed in ${elapsed} s with the expected messages"
exit $status
