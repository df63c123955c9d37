#!/usr/bin/env python3
"""The embedding service end to end: `ferry http --model` under open-loop load.

One run measures, on the same machine:

  idle      single requests, one at a time: p50/p99 end to end (ferry-open-loop
            at a low rate on one connection), and the stage breakdown GAZSI
            publishes, from the T0..T8 times each /inference answer carries
  sweep     requests/s answered, p50 and p99, at each offered rate (one short
            input per request), up to saturation
  batching  saturation throughput and latency for each --max-batch and
            --max-wait-us setting
  baseline  (--st-server) the same idle and sweep against a plain
            sentence-transformers HTTP server (st_server.py): what a user
            would write without Ferry

    embed_bench.py --ferry build/apps/ferry/ferry --open-loop build/bench/http/ferry-open-loop \\
        --model DIR --backend cuda --json out.json [--st-server bench/infer/st_server.py]

Prints tables and writes one JSON file.
"""
import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

STAGES = ["t0_received", "t1_routed", "t2_tokenized", "t3_queued", "t4_batched", "t5_launched", "t6_computed",
          "t7_delivered", "t8_built"]
# GAZSI's published per-request stages, and the Ferry stages that do the same work.
GAZSI = [
    ("slot allocation", "~10", "t0_received", "t1_routed", "proxy -> worker (parse, route) -> proxy"),
    ("GPU write to UVM", "~5", "t1_routed", "t3_queued", "decode, tokenize, into the ring"),
    ("CPU detection", "~50", "t3_queued", "t4_batched", "ring -> batcher"),
    ("inference", "500-2000", "t5_launched", "t6_computed", "the batch's model call"),
    ("response sent", "~100", "t6_computed", "t8_built", "result to the proxy thread, JSON built"),
]


def start_ferry(args, extra, backend=None):
    backend = backend or args.backend
    tmp = tempfile.mkdtemp(prefix="embed-bench-")
    port_file = os.path.join(tmp, "port")
    cmd = [args.ferry, "http", "-p", "0", "--listen-address", "127.0.0.1", "--port-file", port_file,
           "--cpu", args.proxy_cpus, "--backend", backend, "--model", args.model,
           "--model-device", args.backend, "--batcher-cpu", str(args.batcher_cpu), "--log-level", "40"] + \
        (["--launch", args.launch] if backend == "cuda" else []) + extra
    log = open(os.path.join(tmp, "ferry.log"), "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 90
    while not os.path.exists(port_file):
        if proc.poll() is not None or time.time() > deadline:
            log.close()
            sys.exit("embed_bench: ferry http did not start:\n" + open(os.path.join(tmp, "ferry.log")).read())
        time.sleep(0.05)
    port = int(open(port_file).read())
    # Warm the model's shapes (the CUDA model captures a graph per shape).
    warm(port, 400)
    return proc, port


def stop(proc):
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


def warm(port, n):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for i in range(n):
        c.request("GET", f"/inference?d=warm+up+{i % 7}")
        c.getresponse().read()
    c.close()


def open_loop(args, port, rates, seconds, threads, connections, path="/inference?d=hello+world"):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    # The client spins on its own cores, apart from the proxy threads and the batcher.
    cmd = ["taskset", "-c", args.client_cpus, args.open_loop, "-p", str(port), "--path", path, "--rates", ",".join(str(r) for r in rates),
           "--seconds", str(seconds), "-t", str(threads), "-c", str(connections), "--json", out]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    rows = json.load(open(out))
    os.unlink(out)
    return rows


def stage_breakdown(port, n):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    deltas = {s: [] for s in STAGES}
    for i in range(n):
        c.request("GET", "/inference?d=hello+world")
        st = json.loads(c.getresponse().read())["stages_us"]
        for s in STAGES:
            deltas[s].append(st[s])
    c.close()
    at = {s: statistics.median(v) for s, v in deltas.items()}
    rows = []
    print(f"\nstage breakdown, single requests (medians of {n}), beside GAZSI's published table")
    print(f"{'GAZSI stage':<18} {'GAZSI us':>10} {'Ferry us':>9}  Ferry stages")
    for name, theirs, a, b, what in GAZSI:
        per = [y - x for x, y in zip(deltas[a], deltas[b])]
        ours = statistics.median(per)
        rows.append({"stage": name, "gazsi_us": theirs, "ferry_us": ours, "ferry_from": a, "ferry_to": b,
                     "ferry_p99_us": sorted(per)[int(0.99 * (len(per) - 1))], "what": what})
        print(f"{name:<18} {theirs:>10} {ours:>9.1f}  {a} -> {b}: {what}")
    return {"medians_us": at, "gazsi": rows}


def print_sweep(title, rows):
    print(f"\n{title}")
    print(f"{'offered/s':>10} {'answered/s':>11} {'p50 ms':>8} {'p99 ms':>8} {'429':>7} {'errors':>7}")
    for r in rows:
        print(f"{r['offered_rps']:>10.0f} {r['answered_rps']:>11.0f} {r['p50_ms']:>8.3f} {r['p99_ms']:>8.3f} "
              f"{r['busy_429']:>7} {r['errors'] + r['other_status']:>7}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ferry", required=True)
    p.add_argument("--open-loop", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--backend", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--launch", default="persistent")
    p.add_argument("--proxy-cpus", default="0,1,2,3", help="ferry http --cpu")
    p.add_argument("--client-threads", type=int, default=4)
    p.add_argument("--client-cpus", default="8-15", help="cores the load generator runs on (taskset)")
    p.add_argument("--batcher-cpu", type=int, default=4, help="ferry http --batcher-cpu")
    p.add_argument("--rates", default="2000,10000,25000,50000,75000,100000,150000")
    p.add_argument("--seconds", type=float, default=4)
    p.add_argument("--batches", default="1,8,32")
    p.add_argument("--waits", default="0,500")
    p.add_argument("--saturate", type=int, default=200000, help="offered rate for the batching runs")
    p.add_argument("--st-server", help="st_server.py: also measure a plain sentence-transformers server")
    p.add_argument("--json", dest="json_path")
    args = p.parse_args()
    rates = [int(r) for r in args.rates.split(",")]
    result = {"bench": "embed", "backend": args.backend, "launch": args.launch, "proxy_cpus": args.proxy_cpus,
              "batcher_cpu": args.batcher_cpu, "client_cpus": args.client_cpus,
              "client_threads": args.client_threads, "seconds": args.seconds}

    proc, port = start_ferry(args, [])
    try:
        result["idle"] = open_loop(args, port, [200], args.seconds, 1, 1)[0]
        print_sweep("idle: one request at a time (200/s on one connection)", [result["idle"]])
        result["stages"] = stage_breakdown(port, 500)
        result["sweep"] = open_loop(args, port, rates, args.seconds, args.client_threads, 16)
        print_sweep("open-loop sweep (one short input per request)", result["sweep"])
    finally:
        stop(proc)

    if args.backend == "cuda":
        # The same model with the HTTP work on CPU worker threads: what the GPU's
        # PCIe round trips cost the routing stage.
        proc, port = start_ferry(args, [], backend="cpu")
        try:
            result["cpu_workers_idle"] = open_loop(args, port, [200], args.seconds, 1, 1)[0]
            print_sweep("idle, HTTP on CPU workers, model on the GPU", [result["cpu_workers_idle"]])
            result["cpu_workers_stages"] = stage_breakdown(port, 500)
        finally:
            stop(proc)

    result["batching"] = []
    for b in [int(x) for x in args.batches.split(",")]:
        for w in [int(x) for x in args.waits.split(",")]:
            proc, port = start_ferry(args, ["--max-batch", str(b), "--max-wait-us", str(w), "--queue-slots", "4096"])
            try:
                row = open_loop(args, port, [args.saturate], args.seconds, args.client_threads, 16)[0]
            finally:
                stop(proc)
            row.update({"max_batch": b, "max_wait_us": w})
            result["batching"].append(row)
    print(f"\nsaturation ({args.saturate}/s offered) by batching setting")
    print(f"{'max batch':>9} {'wait us':>8} {'answered/s':>11} {'p50 ms':>8} {'p99 ms':>8} {'429':>8}")
    for r in result["batching"]:
        print(f"{r['max_batch']:>9} {r['max_wait_us']:>8} {r['answered_rps']:>11.0f} {r['p50_ms']:>8.3f} "
              f"{r['p99_ms']:>8.3f} {r['busy_429']:>8}")

    if args.st_server:
        tmp = tempfile.mkdtemp(prefix="st-server-")
        port_file = os.path.join(tmp, "port")
        st = subprocess.Popen([sys.executable, args.st_server, "--model", args.model, "--port-file", port_file,
                               "--device", "cuda" if args.backend == "cuda" else "cpu"])
        try:
            deadline = time.time() + 120
            while not os.path.exists(port_file):
                if st.poll() is not None or time.time() > deadline:
                    sys.exit("embed_bench: st_server.py did not start")
                time.sleep(0.1)
            sport = int(open(port_file).read())
            warm(sport, 50)
            result["st_idle"] = open_loop(args, sport, [50], args.seconds, 1, 1)[0]
            print_sweep("sentence-transformers server, idle (50/s on one connection)", [result["st_idle"]])
            st_rates = [100, 200, 400, 800]  # a plain server saturates in the hundreds
            result["st_sweep"] = open_loop(args, sport, st_rates, args.seconds, args.client_threads, 16)
            print_sweep("sentence-transformers server, open-loop sweep", result["st_sweep"])
        finally:
            stop(st)

    best = max(result["sweep"], key=lambda r: r["answered_rps"] if r["errors"] == 0 else 0)
    result["summary"] = {
        "idle_p50_ms": result["idle"]["p50_ms"],
        "max_answered_rps": best["answered_rps"],
        "best_offered_rps": best["offered_rps"],
    }
    print(f"\nsummary: idle p50 {result['idle']['p50_ms']:.3f} ms; most answered {best['answered_rps']:.0f}/s "
          f"(offered {best['offered_rps']}/s)")
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
