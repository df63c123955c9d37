#!/usr/bin/env bash
# Which thread is the service's limit at a given offered rate: each thread's
# CPU share (from /proc) over the middle of an open-loop run, the server's and
# the load generator's, then the batch-size histogram from /metrics.
# FERRY_ARGS adds flags to ferry http.
#   capacity_threads.sh FERRY OPEN_LOOP MODEL_DIR RATE PROXY_CPUS BATCHER_CPU CLIENT_CPUS CLIENT_THREADS [PATH [BODY]]
set -euo pipefail
ferry=$1 open_loop=$2 model=$3 rate=$4 proxies=$5 batcher=$6 clients=$7 threads=$8
path=${9:-/inference?d=hello+world} body=${10:-}
tmp=$(mktemp -d)
"$ferry" http -p 0 --listen-address 127.0.0.1 --port-file "$tmp/port" --cpu "$proxies" --backend cuda \
  --launch persistent --model "$model" --batcher-cpu "$batcher" --queue-slots 8192 --log-level 40 ${FERRY_ARGS:-} >"$tmp/ferry.log" 2>&1 &
server=$!
for _ in $(seq 900); do [ -s "$tmp/port" ] && break; sleep 0.1; done
port=$(cat "$tmp/port")
for i in $(seq 200); do curl -s -o /dev/null "http://127.0.0.1:$port/inference?d=warm+$i"; done
ticks() {  # pid: "tid comm utime+stime" per thread
  for t in /proc/$1/task/*; do
    read -r line <"$t/stat" || continue
    rest=${line#*) }; set -- $rest
    echo "$(basename "$t") $(cat "$t/comm") $((${12} + ${13}))"
  done
}
taskset -c "$clients" "$open_loop" -p "$port" --path "$path" ${body:+--body "$body"} --rates "$rate" --seconds 6 \
  -t "$threads" -c 16 --json "$tmp/load.json" >"$tmp/load.log" 2>&1 &
client=$!
sleep 2
ticks $server >"$tmp/s0"; ticks $client >"$tmp/c0"
sleep 2
ticks $server >"$tmp/s1"; ticks $client >"$tmp/c1"
wait $client
hz=$(getconf CLK_TCK)
echo "offered $rate/s on $path: $(python3 -c "import json;r=json.load(open('$tmp/load.json'))[0];print(f\"answered {r['answered_rps']:.0f}/s p50 {r['p50_ms']:.3f} ms p99 {r['p99_ms']:.3f} ms\")")"
for side in s c; do
  [ $side = s ] && echo "server threads busier than 5% over 2 s (% of one core):" \
                || echo "load generator threads busier than 5%:"
  join <(sort "$tmp/${side}0") <(sort "$tmp/${side}1") | awk -v hz="$hz" '{p=($5-$3)*100/(2*hz); if (p>5) printf "  %-16s %6.1f%%\n", $2, p}' | sort -k2 -rn
done
curl -s "http://127.0.0.1:$port/metrics" | grep -E "^ferry_embed_batch_size_(sum|count)|^ferry_embed_batch_size_bucket" | tr '\n' ' '; echo
kill $server; wait $server 2>/dev/null || true
rm -rf "$tmp"
