#!/usr/bin/env python3
"""`ferry http` against nginx, serving the same files on the same number of
cores, driven by the same wrk, in one run.

Ferry's cores are its proxy cores plus its CPU workers' cores (--backend cpu);
nginx gets that many worker processes, pinned to those cores. For each page
size (0 B, 1 KiB, 4 KiB) and connection count, wrk runs against both in turn;
the ratio Ferry / nginx of requests per second is the result.

  python3 bench/http_bench.py --build-dir build --proxy-cpus 0,1,2 --worker-cpus 3 --client-cpus 4-11

Prints a table and writes every number to JSON (--out). Needs wrk and nginx
(make deps-bench). Standard library only.
"""

import argparse
import datetime
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tcp_bench import BenchError, Proc, cpu_model, git_commit, parse_cpu_list, parse_int_list  # noqa: E402

SIZES = {"0B": 0, "1KiB": 1024, "4KiB": 4096}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and not proc.alive():
            raise BenchError(f"{proc.name} exited at start-up; see {proc.log}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise BenchError(f"nothing listens on port {port} after {timeout} s")


def to_us(text):
    m = re.match(r"([\d.]+)(us|ms|s)$", text)
    if not m:
        raise BenchError(f"cannot read wrk latency '{text}'")
    return float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[m.group(2)]


def run_wrk(url, connections, seconds, cpus, script=None, allow_non2xx=False):
    """wrk --latency on cpus (a thread per core, at most one per connection):
    requests/s, p50 and p99 in us. script: a Lua file (a POST body, say).
    Raises BenchError on socket errors, and on non-2xx answers unless
    allow_non2xx, which counts them in "non2xx" instead."""
    threads = max(1, min(len(cpus), connections))
    argv = ["taskset", "-c", ",".join(map(str, cpus)), "wrk", "--latency", f"-t{threads}", f"-c{connections}",
            f"-d{seconds}s"] + (["-s", script] if script else []) + [url]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60).stdout
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    p50 = re.search(r"^\s+50%\s+(\S+)", out, re.M)
    p99 = re.search(r"^\s+99%\s+(\S+)", out, re.M)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    socket_errors = re.search(r"Socket errors: (.*)", out)
    if not (rps and p50 and p99):
        raise BenchError(f"cannot read wrk's output:\n{out}")
    if socket_errors or (errors and not allow_non2xx):
        raise BenchError(f"wrk saw errors against {url}:\n{out}")
    row = {"rps": float(rps.group(1)), "p50_us": to_us(p50.group(1)), "p99_us": to_us(p99.group(1))}
    if allow_non2xx:
        row.update({"non2xx": int(errors.group(1)) if errors else 0, "connections": connections, "threads": threads})
    return row


def stage_means(port):
    """Mean microseconds per request of each stage, from ferry http's /metrics,
    over the whole run."""
    import urllib.request
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    sums, counts = {}, {}
    for line in text.splitlines():
        m = re.match(r'ferry_http_stage_seconds_(sum|count)\{stage="(\w+)"\} (\S+)', line)
        if m:
            (sums if m.group(1) == "sum" else counts)[m.group(2)] = float(m.group(3))
    return {k: (sums[k] / counts[k] * 1e6 if counts.get(k) else 0.0) for k in sums}


def nginx_conf(path, root, port, cpus, tmp):
    masks = " ".join(format(1 << c, "b") for c in cpus)
    with open(path, "w") as f:
        f.write(f"""worker_processes {len(cpus)};
worker_cpu_affinity {masks};
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log;
daemon off;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {tmp}/body; proxy_temp_path {tmp}/proxy; fastcgi_temp_path {tmp}/fcgi;
  uwsgi_temp_path {tmp}/uwsgi; scgi_temp_path {tmp}/scgi;
  sendfile on; tcp_nopush on; tcp_nodelay on;
  keepalive_requests 100000000; keepalive_timeout 75s;
  open_file_cache max=100;
  types {{ application/octet-stream bin; text/html html; }}
  server {{ listen 127.0.0.1:{port} reuseport backlog=4096; root {root}; }}
}}
""")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--backend", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--launch", default="persistent", help="cuda launch method")
    ap.add_argument("--proxy-cpus", default="0", help="Ferry's proxy cores, e.g. 0,1")
    ap.add_argument("--worker-cpus", default="1", help="Ferry's CPU workers' cores (cpu backend)")
    ap.add_argument("--client-cpus", default="1", help="wrk's cores")
    ap.add_argument("--sizes", default="0B,1KiB,4KiB", help=f"page sizes among {','.join(SIZES)}")
    ap.add_argument("--connections", default="1,64,256")
    ap.add_argument("--seconds", type=int, default=5, help="seconds per wrk run")
    ap.add_argument("--out", default="bench/results/http.json")
    args = ap.parse_args()
    try:
        for tool in ("wrk", "nginx", "taskset"):
            if shutil.which(tool) is None:
                raise BenchError(f"{tool} not found: make deps-bench installs it")
        ferry = os.path.join(args.build_dir, "apps/ferry/ferry")
        if not os.access(ferry, os.X_OK):
            raise BenchError(f"{ferry} not found: build first (make build)")
        proxy = parse_cpu_list(args.proxy_cpus)
        workers = parse_cpu_list(args.worker_cpus) if args.backend == "cpu" else []
        clients = parse_cpu_list(args.client_cpus)
        conns = parse_int_list(args.connections, "--connections")
        sizes = [s for s in args.sizes.split(",") if s]
        for s in sizes:
            if s not in SIZES:
                raise BenchError(f"--sizes: unknown size {s}")
        if args.backend == "cpu" and len(workers) > len(proxy):
            raise BenchError("--worker-cpus: at most one worker per proxy thread")
        nginx_cpus = sorted(set(proxy + workers))

        tmp = tempfile.mkdtemp(prefix="ferry-http-bench-")
        os.chmod(tmp, 0o755)  # nginx's workers run as another user and must read the files
        root = os.path.join(tmp, "www")
        os.makedirs(root, mode=0o755)
        for s in sizes:
            with open(os.path.join(root, f"{s}.bin"), "wb") as f:
                f.write(os.urandom(SIZES[s]))
            os.chmod(os.path.join(root, f"{s}.bin"), 0o644)
        results = []

        fport = free_port()
        argv = [ferry, "http", "-p", str(fport), "--listen-address", "127.0.0.1", "--root", root,
                "--backend", args.backend, "--launch", args.launch, "--cpu", ",".join(map(str, proxy)),
                "--max-connections-per-thread", "4096"]
        if workers:  # one worker thread per core, each serving several proxy threads' channels
            argv += ["--worker-cpu", ",".join(map(str, workers)), "--worker-threads", str(len(workers))]
        rows = {}
        with Proc("ferry-http", argv, tmp) as fp:
            wait_port(fport, fp)
            for s in sizes:
                for c in conns:
                    print(f"[http_bench] ferry {s} x {c} connections ...", file=sys.stderr)
                    rows[("ferry", s, c)] = run_wrk(f"http://127.0.0.1:{fport}/{s}.bin", c, args.seconds, clients)
            stages = stage_means(fport)
        nport = free_port()
        conf = os.path.join(tmp, "nginx.conf")
        nginx_conf(conf, root, nport, nginx_cpus, tmp)
        with Proc("nginx", ["nginx", "-c", conf, "-e", os.path.join(tmp, "nginx-error.log")], tmp) as npr:
            wait_port(nport, npr)
            for s in sizes:
                for c in conns:
                    print(f"[http_bench] nginx {s} x {c} connections ...", file=sys.stderr)
                    rows[("nginx", s, c)] = run_wrk(f"http://127.0.0.1:{nport}/{s}.bin", c, args.seconds, clients)

        print(f"(ferry: {len(proxy)} proxy + {len(workers)} worker core(s), {args.backend}"
              f"{' ' + args.launch if args.backend == 'cuda' else ''}; nginx: {len(nginx_cpus)} worker(s); "
              f"wrk on {len(clients)} core(s), {args.seconds} s a run)")
        print(f"{'page':>5} {'conns':>5} {'nginx req/s':>12} {'ferry req/s':>12} {'ratio':>6} "
              f"{'nginx p50/p99 us':>17} {'ferry p50/p99 us':>17}")
        for s in sizes:
            for c in conns:
                n, f = rows[("nginx", s, c)], rows[("ferry", s, c)]
                ratio = f["rps"] / n["rps"] if n["rps"] else 0.0
                print(f"{s:>5} {c:>5} {n['rps']:>12.0f} {f['rps']:>12.0f} {ratio:>6.3f} "
                      f"{n['p50_us']:>8.0f}/{n['p99_us']:<8.0f} {f['p50_us']:>8.0f}/{f['p99_us']:<8.0f}")
                results.append({"page": s, "page_bytes": SIZES[s], "connections": c, "nginx": n, "ferry": f,
                                "ratio": ratio})
        print("ferry's stages, mean us per request over the run: " +
              ", ".join(f"{k} {v:.2f}" for k, v in stages.items()))
        doc = {
            "benchmark": "http_bench", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
            "machine": {"cpu": cpu_model(), "cores": os.cpu_count()}, "git_commit": git_commit("."),
            "config": {"backend": args.backend, "launch": args.launch if args.backend == "cuda" else None,
                       "proxy_cpus": proxy, "worker_cpus": workers, "nginx_workers": len(nginx_cpus),
                       "client_cpus": clients, "seconds": args.seconds},
            "results": results,
            "ferry_stage_mean_us": stages,
        }
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=2)
        print(f"wrote {args.out}")
        shutil.rmtree(tmp, ignore_errors=True)
        return 0
    except BenchError as e:
        print(f"http_bench: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
