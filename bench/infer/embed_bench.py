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
  lone      a lone request's latency from a C++ client: ferry-open-loop
            --closed on one connection (the next request leaves when the
            answer is in), on POST /embed and POST /v1/embeddings
  baseline  (--st-server) the same idle and sweep against a plain
            sentence-transformers HTTP server (st_server.py): what a user
            would write without Ferry
  infinity  (--infinity) Infinity (infinity-emb, torch engine, the same
            model folder) against Ferry in the same run: both pinned to the
            same cores (--proxy-cpus and --batcher-cpu), driven by the same
            load generator on --client-cpus with one short input per
            request, Infinity on its OpenAI route POST /embeddings and Ferry
            on POST /v1/embeddings. Infinity runs once per setting of
            --infinity-batch-sizes x --infinity-compile; each gets the lone
            request and an open-loop sweep (--infinity-rates). The summary
            takes Infinity's best setting: the most requests/s it sustains
            (all answered, no error, at least 95% of the offered rate), with
            its p99, and Ferry's most sustained at a p99 no worse.
  wrk       (--wrk) wrk, closed-loop, 8 threads at --wrk-connections, on
            Ferry's POST /embed and, with --infinity, on Infinity's
            /embeddings: the issue's earlier figures were wrk's

    embed_bench.py --ferry build/apps/ferry/ferry --open-loop build/bench/http/ferry-open-loop \\
        --model DIR --backend cuda --json out.json [--st-server bench/infer/st_server.py] \\
        [--infinity /tmp/inf/bin/infinity_emb] [--wrk]

  capacity  (--parts capacity) the most single-input requests/s sustained at
            p99 <= --p99-target-ms on POST /v1/embeddings, POST /embed and
            GET /inference, for each server layout of --capacity-layouts
            (proxy cores / batcher core / client cores / client threads)

--parts chooses which of ferry (idle, stages, sweep, cpu workers, batching,
lone), st, infinity, wrk and capacity run; a run for Infinity alone is
`--parts infinity`, which also measures Ferry on /v1/embeddings.

Prints tables and writes one JSON file.
"""
import argparse
import http.client
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from http_bench import run_wrk  # noqa: E402

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


def open_loop(args, port, rates, seconds, threads, connections, path="/inference?d=hello+world", body=None):
    """ferry-open-loop's rows, one per rate; rates None: one row of the closed loop."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    # The client spins on its own cores, apart from the proxy threads and the batcher.
    load = ["--closed"] if rates is None else ["--rates", ",".join(str(r) for r in rates)]
    cmd = ["taskset", "-c", args.client_cpus, args.open_loop, "-p", str(port), "--path", path] + load + \
        ["--seconds", str(seconds), "-t", str(threads), "-c", str(connections), "--json", out] + \
        (["--body", body] if body else [])
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


def openai_body(args):
    return json.dumps({"input": "hello world", "model": os.path.basename(os.path.normpath(args.model))})


TEI_BODY = json.dumps({"inputs": "hello world"})


def server_cpus(args):
    """The cores Ferry's server runs on (proxy threads and batcher): Infinity gets the same."""
    return f"{args.proxy_cpus},{args.batcher_cpu}"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def post_json(port, path, body, timeout=30):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    if r.status != 200:
        raise RuntimeError(f"POST {path} on port {port}: {r.status} {data[:300]!r}")
    return json.loads(data)


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def lone(args, port, path, body, label):
    """A lone request's latency: the closed loop on one connection, from ferry-open-loop (C++)."""
    row = open_loop(args, port, None, args.seconds, 1, 1, path=path, body=body)[0]
    print_sweep(f"{label}: lone requests, closed loop on one connection (C++ client)", [row])
    return row


def sustained(rows):
    """The row with the most requests/s answered while keeping up: every request answered
    with 200, and at least 95% of the offered rate; None if none kept up."""
    ok = [r for r in rows if r["errors"] == 0 and r["other_status"] == 0 and r["busy_429"] == 0
          and r["answered_rps"] >= 0.95 * r["offered_rps"]]
    return max(ok, key=lambda r: r["answered_rps"]) if ok else None


def wrk_post(args, port, path, body, label):
    """wrk with a Lua POST body at each of --wrk-connections, on the client cores."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(f'wrk.method = "POST"\nwrk.body = {json.dumps(body)}\n'
                'wrk.headers["Content-Type"] = "application/json"\n')
        script = f.name
    cpus = parse_cpus(args.client_cpus)
    rows = []
    print(f"\n{label}: wrk (closed loop), {min(len(cpus), 8)} threads, POST {path}")
    print(f"{'connections':>11} {'requests/s':>11} {'p50 ms':>8} {'p99 ms':>8} {'non-2xx':>8}")
    for c in [int(x) for x in args.wrk_connections.split(",")]:
        row = run_wrk(f"http://127.0.0.1:{port}{path}", c, int(args.seconds), cpus[:8], script=script,
                      allow_non2xx=True)
        rows.append(row)
        print(f"{c:>11} {row['rps']:>11.0f} {row['p50_us'] / 1e3:>8.3f} {row['p99_us'] / 1e3:>8.3f} "
              f"{row['non2xx']:>8}")
    os.unlink(script)
    return rows


def parse_cpus(text):
    out = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def start_infinity(args, batch_size, compile_):
    """Infinity's server (torch engine, the model folder) on Ferry's cores; its port, once /health answers."""
    port = free_port()
    name = os.path.basename(os.path.normpath(args.model))
    cuda = args.backend == "cuda"
    cmd = ["taskset", "-c", server_cpus(args), sys.executable, args.infinity, "v2", "--model-id", args.model,
           "--served-model-name", name, "--engine", "torch", "--device", "cuda" if cuda else "cpu",
           "--dtype", "float16" if cuda else "float32", "--batch-size", str(batch_size),
           "--compile" if compile_ else "--no-compile", "--no-bettertransformer", "--host", "127.0.0.1",
           "--port", str(port), "--log-level", "warning"]
    # No network there: no telemetry, no hub.
    env = dict(os.environ, DO_NOT_TRACK="1", INFINITY_ANONYMOUS_USAGE_STATS="0", HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1")
    log_path = os.path.join(tempfile.mkdtemp(prefix="infinity-"), "infinity.log")
    log = open(log_path, "w")
    print("+", " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    deadline = time.time() + args.infinity_start_s
    while True:
        if proc.poll() is not None or time.time() > deadline:
            stop(proc)
            log.close()
            raise RuntimeError(f"Infinity did not start (exit {proc.poll()}):\n" + open(log_path).read()[-6000:])
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                c.close()
                break
        except OSError:
            pass
        time.sleep(0.5)
    # Warm: torch.compile(dynamic=True) compiles on the first batches; the lower half of the
    # sweep's rates makes batches of several sizes without burying the server.
    try:
        for _ in range(50):
            post_json(port, "/embeddings", openai_body(args), timeout=300)
        rates = sorted(int(r) for r in args.infinity_rates.split(","))
        open_loop(args, port, rates[:max(1, len(rates) // 2)], 1, args.client_threads, 16, path="/embeddings",
                  body=openai_body(args))
    except Exception as e:
        stop(proc)
        log.close()
        raise RuntimeError(f"Infinity failed its warm-up: {e}\n" + open(log_path).read()[-6000:]) from e
    return proc, port, log_path


def infinity_part(args, result):
    """Ferry on /v1/embeddings, then Infinity at each setting on /embeddings: same cores, same client."""
    rates = [int(r) for r in args.rates.split(",")]
    inf_rates = [int(r) for r in args.infinity_rates.split(",")]
    body = openai_body(args)
    proc, port = start_ferry(args, [])
    try:
        ferry_vec = post_json(port, "/v1/embeddings", body)["data"][0]["embedding"]
        ferry_lone = lone(args, port, "/v1/embeddings", body, "Ferry POST /v1/embeddings")
        ferry_sweep = open_loop(args, port, rates, args.seconds, args.client_threads, 16, path="/v1/embeddings",
                                body=body)
        print_sweep("Ferry POST /v1/embeddings, open-loop sweep", ferry_sweep)
    finally:
        stop(proc)
    out = {"cpus": server_cpus(args), "ferry": {"lone": ferry_lone, "sweep": ferry_sweep}, "settings": []}
    for bs in [int(x) for x in args.infinity_batch_sizes.split(",")]:
        for comp in [x == "on" for x in args.infinity_compile.split(",")]:
            label = f"Infinity batch {bs}, compile {'on' if comp else 'off'}"
            try:
                proc, iport, log_path = start_infinity(args, bs, comp)
            except RuntimeError as e:
                # A setting that cannot run is a result too: its error goes into the JSON.
                print(f"\n{label}: {e}", flush=True)
                out["settings"].append({"batch_size": bs, "compile": comp, "error": str(e)})
                continue
            try:
                vec = post_json(iport, "/embeddings", body)["data"][0]["embedding"]
                setting = {"batch_size": bs, "compile": comp, "cosine_vs_ferry": cosine(vec, ferry_vec),
                           "lone": lone(args, iport, "/embeddings", body, label)}
                setting["sweep"] = open_loop(args, iport, inf_rates, args.seconds, args.client_threads, 16,
                                             path="/embeddings", body=body)
                print_sweep(f"{label}: POST /embeddings, open-loop sweep", setting["sweep"])
                if args.wrk:
                    setting["wrk"] = wrk_post(args, iport, "/embeddings", body, label)
            finally:
                stop(proc)
                print(f"(Infinity's log: {log_path})")
            out["settings"].append(setting)

    # Infinity's best setting, and Ferry's most sustained rate at a p99 no worse than Infinity's there.
    best = None
    ran = [st for st in out["settings"] if "error" not in st]
    for st in ran:
        row = sustained(st["sweep"])
        if row and (best is None or row["answered_rps"] > best[1]["answered_rps"]):
            best = (st, row)
    summary = {"least_cosine_vs_ferry": min((st["cosine_vs_ferry"] for st in ran), default=None),
               "failed_settings": len(out["settings"]) - len(ran)}
    if best:
        st, row = best
        fits = [r for r in ferry_sweep if r["p99_ms"] <= row["p99_ms"]]
        ferry_row = sustained(fits)
        summary.update({"infinity_batch_size": st["batch_size"], "infinity_compile": st["compile"],
                        "infinity_rps": row["answered_rps"], "infinity_p99_ms": row["p99_ms"],
                        "infinity_lone_p50_ms": st["lone"]["p50_ms"],
                        "ferry_rps_at_that_p99": ferry_row["answered_rps"] if ferry_row else None,
                        "ferry_p99_ms": ferry_row["p99_ms"] if ferry_row else None,
                        "ferry_lone_p50_ms": ferry_lone["p50_ms"]})
        if ferry_row:
            summary["ferry_over_infinity"] = ferry_row["answered_rps"] / row["answered_rps"]
        print(f"\nInfinity's best: batch {st['batch_size']}, compile {'on' if st['compile'] else 'off'}: "
              f"{row['answered_rps']:.0f}/s sustained, p99 {row['p99_ms']:.3f} ms; Ferry at a p99 no worse: "
              + (f"{ferry_row['answered_rps']:.0f}/s (p99 {ferry_row['p99_ms']:.3f} ms), "
                 f"{summary['ferry_over_infinity']:.2f}x" if ferry_row else "none of its rates"))
        print(f"lone request p50: Ferry {ferry_lone['p50_ms']:.3f} ms, Infinity {st['lone']['p50_ms']:.3f} ms; "
              f"least cosine Infinity vs Ferry {summary['least_cosine_vs_ferry']:.5f}")
    elif ran:
        print("\nInfinity kept up with none of its offered rates: lower --infinity-rates")
    else:
        print("\nInfinity ran at no setting: see the errors above")
    out["summary"] = summary
    result["infinity"] = out


PARTS = ("ferry", "st", "infinity", "wrk", "capacity")


def capacity_part(args, result):
    """The most single-input requests/s sustained at p99 <= --p99-target-ms, for each
    server layout of --capacity-layouts and each route, in one run."""
    out = []
    routes = [("POST /v1/embeddings", "/v1/embeddings", openai_body(args)), ("POST /embed", "/embed", TEI_BODY),
              ("GET /inference", "/inference?d=hello+world", None)]
    rates = [int(r) for r in args.capacity_rates.split(",")]
    for layout in args.capacity_layouts.split(";"):
        proxies, batcher, clients, threads = layout.split("/")
        run = argparse.Namespace(**vars(args))
        run.proxy_cpus, run.batcher_cpu, run.client_cpus = proxies, int(batcher), clients
        proc, port = start_ferry(run, ["--queue-slots", "8192"])
        try:
            for label, path, body in routes:
                rows = open_loop(run, port, rates, args.seconds, int(threads), 16, path=path, body=body)
                title = f"proxies {proxies}, batcher {batcher}, client {clients} ({threads} threads): {label}"
                print_sweep(title, rows)
                best = sustained([r for r in rows if r["p99_ms"] <= args.p99_target_ms])
                print(f"most sustained at p99 <= {args.p99_target_ms} ms: "
                      + (f"{best['answered_rps']:.0f}/s (p99 {best['p99_ms']:.3f} ms)" if best else "none"))
                out.append({"proxy_cpus": proxies, "batcher_cpu": int(batcher), "client_cpus": clients,
                            "client_threads": int(threads), "route": label, "sweep": rows,
                            "best_rps": best["answered_rps"] if best else None,
                            "best_p99_ms": best["p99_ms"] if best else None})
        finally:
            stop(proc)
    result["capacity"] = {"p99_target_ms": args.p99_target_ms, "runs": out}


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
    p.add_argument("--parts", help="comma-separated, of " + ", ".join(PARTS) + " (default: ferry, and each "
                   "baseline whose flag is given)")
    p.add_argument("--st-server", help="st_server.py: also measure a plain sentence-transformers server")
    p.add_argument("--infinity", help="Infinity's infinity_emb script (run with this Python; its packages on "
                   "PYTHONPATH): also measure Infinity against Ferry's /v1/embeddings")
    p.add_argument("--infinity-batch-sizes", default="32,128", help="Infinity's --batch-size, one run each")
    p.add_argument("--infinity-compile", default="off,on",
                   help="Infinity's --compile (torch.compile(dynamic=True)): off, on or both, one run each")
    p.add_argument("--infinity-rates", default="250,500,1000,2000,4000,8000",
                   help="offered rates for Infinity's sweep")
    p.add_argument("--infinity-start-s", type=float, default=300, help="how long Infinity may take to answer /health")
    p.add_argument("--wrk", action="store_true", help="also wrk (on PATH) on POST /embed, and on Infinity")
    p.add_argument("--wrk-connections", default="64,256")
    p.add_argument("--capacity-layouts", default="0,1,2,3/4/8-15/4;0,1,2,3,4,5,6,7/8/9-15/6",
                   help="capacity: ';'-separated PROXY_CPUS/BATCHER_CPU/CLIENT_CPUS/CLIENT_THREADS, one server each")
    p.add_argument("--capacity-rates", default="100000,125000,150000,175000,200000")
    p.add_argument("--p99-target-ms", type=float, default=5.0, help="capacity: the p99 a sustained rate must keep")
    p.add_argument("--json", dest="json_path")
    args = p.parse_args()
    if args.parts:
        parts = [x for x in args.parts.split(",") if x]
        for x in parts:
            if x not in PARTS:
                p.error(f"--parts {x}: expected one of {', '.join(PARTS)}")
    else:
        parts = ["ferry"] + (["st"] if args.st_server else []) + (["infinity"] if args.infinity else []) + \
            (["wrk"] if args.wrk else [])
    if "st" in parts and not args.st_server:
        p.error("--parts st needs --st-server")
    if "infinity" in parts and not args.infinity:
        p.error("--parts infinity needs --infinity")
    args.wrk = args.wrk or "wrk" in parts
    rates = [int(r) for r in args.rates.split(",")]
    result = {"bench": "embed", "backend": args.backend, "launch": args.launch, "proxy_cpus": args.proxy_cpus,
              "batcher_cpu": args.batcher_cpu, "client_cpus": args.client_cpus,
              "client_threads": args.client_threads, "seconds": args.seconds, "parts": parts}

    if "ferry" in parts or "wrk" in parts:
        proc, port = start_ferry(args, [])
        try:
            if "ferry" in parts:
                result["idle"] = open_loop(args, port, [200], args.seconds, 1, 1)[0]
                print_sweep("idle: one request at a time (200/s on one connection)", [result["idle"]])
                result["lone"] = {"/embed": lone(args, port, "/embed", TEI_BODY, "POST /embed"),
                                  "/v1/embeddings": lone(args, port, "/v1/embeddings", openai_body(args),
                                                         "POST /v1/embeddings")}
                result["stages"] = stage_breakdown(port, 500)
                result["sweep"] = open_loop(args, port, rates, args.seconds, args.client_threads, 16)
                print_sweep("open-loop sweep (one short input per request)", result["sweep"])
            if args.wrk:
                result["wrk"] = wrk_post(args, port, "/embed", TEI_BODY, "Ferry")
        finally:
            stop(proc)

    if "ferry" in parts and args.backend == "cuda":
        # The same model with the HTTP work on CPU worker threads: what the GPU's
        # PCIe round trips cost the routing stage.
        proc, port = start_ferry(args, [], backend="cpu")
        try:
            result["cpu_workers_idle"] = open_loop(args, port, [200], args.seconds, 1, 1)[0]
            print_sweep("idle, HTTP on CPU workers, model on the GPU", [result["cpu_workers_idle"]])
            result["cpu_workers_stages"] = stage_breakdown(port, 500)
        finally:
            stop(proc)

    if "ferry" in parts:
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

    if "capacity" in parts:
        capacity_part(args, result)

    if "st" in parts:
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

    if "infinity" in parts:
        infinity_part(args, result)

    if "ferry" in parts:
        best = max(result["sweep"], key=lambda r: r["answered_rps"] if r["errors"] == 0 else 0)
        result["summary"] = {
            "idle_p50_ms": result["idle"]["p50_ms"],
            "lone_p50_ms": {k: v["p50_ms"] for k, v in result["lone"].items()},
            "max_answered_rps": best["answered_rps"],
            "best_offered_rps": best["offered_rps"],
        }
        print(f"\nsummary: idle p50 {result['idle']['p50_ms']:.3f} ms; lone request p50 (closed loop) "
              + ", ".join(f"{k} {v['p50_ms']:.3f} ms" for k, v in result["lone"].items())
              + f"; most answered {best['answered_rps']:.0f}/s (offered {best['offered_rps']}/s)")
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
