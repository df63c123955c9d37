#!/usr/bin/env bash
# Adds wrk and nginx (the HTTP benchmark's client and baseline) to .carry/tools,
# with the libraries Ubuntu's GPU machine may lack, into .carry/lib.
set -euo pipefail
C=.carry
mkdir -p "$C/tools" "$C/lib"
for t in /usr/bin/wrk /usr/sbin/nginx; do
  [ -x "$t" ] || { echo "carry-http-tools: $t missing: make deps-bench"; exit 1; }
  cp -L "$t" "$C/tools/"
  ldd "$t" | awk '/luajit|pcre2/ {print $3}' | while read -r lib; do cp -L "$lib" "$C/lib/"; done
done
du -sh "$C/tools"
