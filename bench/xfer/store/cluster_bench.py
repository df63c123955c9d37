#!/usr/bin/env python3
"""The redis-cluster tier against redis-benchmark --cluster, on 1, 3 and 6 primaries.

For each cluster size this script starts that many redis-server primaries (no
replicas, no persistence: --save '' --appendonly no) on loopback ports, in temp
directories, and joins them: `redis-cli --cluster create` for 3 or more (its
minimum), CLUSTER ADDSLOTSRANGE 0 16383 for one. Each server gets a core of its
own when there are enough (cores 0..P-1, P the largest cluster size), and this
script, ferry-store-bench and redis-benchmark the rest, the same set for every
cluster size, so that scaling is the servers' and not the client's.

On each cluster, for each object size:
  - ferry-store-bench --tier redis-cluster://<every node>?connections=<c>
    --threads <t> --batch <b>: a key per object (bench/<i>, spread over the
    16384 slots), SET then GET of --total bytes;
  - redis-benchmark --cluster -t set,get -d <size> -r <objects> -n <objects>
    -c <clients> -P <pipeline> on the same objects (--total, or --min-objects
    of them if that is more), its requests per second times the size; on one
    primary without --cluster, which redis-benchmark refuses for one node.
In cluster mode redis-benchmark's clock stops on a 250 ms timer's tick (runs of
5000 and of 20000 requests both read 0.25 s), so runs must last seconds
(--total, default 8GiB) for that error to stay small.
Every point --repeat times, the two interleaved, the median kept; the cluster is
flushed before each run. The table gives GB/s (1e9 bytes of values per second),
ours / redis-benchmark from the same run, and each cluster's throughput over the
one-primary cluster's. Writes the numbers as JSON with --json-out.

  python3 bench/xfer/store/cluster_bench.py --build-dir build --json-out cluster.json
"""

import argparse
import datetime
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from store_bench import (BenchError, cpu_model, fmt_size, git_commit, parse_size, redis_benchmark_rps, rotated, run,
                         tool_version)


def port_free(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def pick_ports(count, base):
    """count client ports and count bus ports: from base up if given (an error if one is busy), else the kernel's."""
    if base:
        ports = list(range(base, base + 2 * count))
        busy = [p for p in ports if not port_free(p)]
        if busy:
            raise BenchError(f"port(s) {busy} on 127.0.0.1 are in use: choose another --base-port")
        return ports[:count], ports[count:]
    socks, ports = [], []
    for _ in range(2 * count):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports[:count], ports[count:]


class Cluster:
    """count primaries on loopback; stopped and their directories removed on exit, whatever happened."""

    def __init__(self, count, cpus, base_port):
        self.count, self.cpus, self.base_port = count, cpus, base_port
        self.procs, self.dirs = [], []

    def __enter__(self):
        try:
            self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self):
        self.ports, bus = pick_ports(self.count, self.base_port)
        for i, (port, bus_port) in enumerate(zip(self.ports, bus)):
            d = tempfile.mkdtemp(prefix=f"ferry-cluster-bench-{port}-")
            self.dirs.append(d)
            argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--protected-mode", "no",
                    "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-port",
                    str(bus_port), "--cluster-node-timeout", "5000", "--save", "", "--appendonly", "no",
                    "--dir", d, "--logfile", os.path.join(d, "redis.log")]
            cpu = {self.cpus[i]} if self.cpus else None
            self.procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                               preexec_fn=(lambda c=cpu: os.sched_setaffinity(0, c)) if cpu else None))
        for i, port in enumerate(self.ports):
            self._wait(port, lambda: "PONG" in cli(port, "ping"), f"redis-server on port {port} did not start", i)
        if self.count >= 3:
            out = run(["redis-cli", "--cluster", "create"] + [f"127.0.0.1:{p}" for p in self.ports] +
                      ["--cluster-replicas", "0", "--cluster-yes"], timeout=60)
            if "[OK] All 16384 slots covered" not in out:
                raise BenchError(f"redis-cli --cluster create failed:\n{out}")
        else:
            for port in self.ports[1:]:
                cli(self.ports[0], "cluster", "meet", "127.0.0.1", str(port))
            step = 16384 // self.count
            for i, port in enumerate(self.ports):
                last = 16383 if i == self.count - 1 else (i + 1) * step - 1
                cli(port, "cluster", "addslotsrange", str(i * step), str(last))
        for i, port in enumerate(self.ports):
            self._wait(port, lambda: "cluster_state:ok" in cli(port, "cluster", "info"),
                       f"the cluster did not settle (node 127.0.0.1:{port})", i, 30)

    def _wait(self, port, ready, what, i, seconds=10):
        deadline = time.monotonic() + seconds
        while True:
            if self.procs[i].poll() is not None:
                log = os.path.join(self.dirs[i], "redis.log")
                tail = open(log).read()[-1500:] if os.path.exists(log) else ""
                raise BenchError(f"redis-server on port {port} exited with {self.procs[i].returncode}:\n{tail}")
            try:
                if ready():
                    return
            except BenchError:
                pass
            if time.monotonic() > deadline:
                raise BenchError(what)
            time.sleep(0.05)

    def flush(self):
        for port in self.ports:
            cli(port, "flushall")

    def seeds(self):
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        for d in self.dirs:
            shutil.rmtree(d, ignore_errors=True)
        return False


def cli(port, *args):
    return run(["redis-cli", "-p", str(port)] + list(args), timeout=30)


def ferry(bench, cluster, size, total, threads, batch, connections):
    tier = f"redis-cluster://{cluster.seeds()}?connections={connections}"
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        run([bench, "--tier", tier, "--block-size", str(size), "--qd", str(batch), "--batch", str(batch),
             "--total", str(total), "--threads", str(threads), "--json-out", out.name])
        d = json.load(open(out.name))
    return {"set": d["put"]["gbps"], "get": d["get"]["gbps"]}


def redis_benchmark(cluster, size, objects, clients, pipeline):
    # redis-benchmark --cluster refuses a cluster of one node ("Invalid cluster: 1 node(s)"); on one, every
    # key's slot is that node's, so plain mode sends the same commands to the same place.
    mode = ["--cluster"] if cluster.count > 1 else []
    rps = redis_benchmark_rps(["-h", "127.0.0.1", "-p", str(cluster.ports[0])] + mode + [
        "-t", "set,get", "-d", str(size), "-r", str(objects), "-n", str(objects), "-c", str(clients),
        "-P", str(pipeline), "--csv", "-q"])
    # In cluster mode the clock stops on the next 250 ms tick after the last reply, so the true time lies
    # within 0.25 s below the one it reports: *_max is the rate at that bound (the ratio's worst case).
    best = lambda op: objects / max(objects / rps[op] - (0.25 if mode else 0), 1e-3) * size / 1e9
    return {"set": rps["SET"] * size / 1e9, "get": rps["GET"] * size / 1e9, "set_max": best("SET"),
            "get_max": best("GET")}


def split_cpus(server_count):
    """(a core per server, the client's cores), or (None, None) when there are too few to pin."""
    try:
        mine = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None, None
    if len(mine) < server_count + 2:
        return None, None
    return mine[:server_count], mine[server_count:]


def table(rows):
    # A ratio's worst case (in brackets) is against redis-benchmark's rate had its clock stopped 0.25 s sooner.
    lines = ["| primaries | object | Ferry SET GB/s | redis-benchmark SET | **SET ratio** (worst) | SET vs 1 primary "
             "| Ferry GET GB/s | redis-benchmark GET | **GET ratio** (worst) | GET vs 1 primary |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        m = r["median"]
        scale = lambda k: f"{r[k]:.2f}x" if k in r else "-"
        lines.append(f"| {r['primaries']} | {fmt_size(r['size'])} | {m['ferry_set']:.3f} | {m['rb_set']:.3f} "
                     f"| **{r['set_ratio']:.2f}** ({r['set_ratio_worst']:.2f}) | {scale('set_scaling')} | {m['ferry_get']:.3f} "
                     f"| {m['rb_get']:.3f} | **{r['get_ratio']:.2f}** ({r['get_ratio_worst']:.2f}) "
                     f"| {scale('get_scaling')} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default="build", help="where ferry-store-bench was built")
    ap.add_argument("--bench", help="the ferry-store-bench binary (default: under --build-dir)")
    ap.add_argument("--primaries", default="1,3,6")
    ap.add_argument("--sizes", default="64KiB,256KiB,1MiB")
    ap.add_argument("--total", default="8GiB",
                    help="bytes SET, then GET, per run: redis-benchmark --cluster stops its clock only on its "
                         "250 ms timer's tick, so its time is up to 0.25 s long; keep runs to seconds")
    ap.add_argument("--min-objects", type=int, default=4096,
                    help="at least this many objects a run, whatever --total says")
    ap.add_argument("--threads", type=int, default=16, help="ferry-store-bench's concurrent callers (with 8 the client limited 64 KiB on three primaries)")
    ap.add_argument("--batch", type=int, default=32, help="objects per call: the tier's pipeline window (<= 128)")
    ap.add_argument("--connections", type=int, default=16, help="the tier's connections per primary")
    ap.add_argument("--rb-clients", type=int, default=0,
                    help="redis-benchmark -c (default: --threads x --batch / --rb-pipeline, the same objects in flight)")
    ap.add_argument("--rb-pipeline", type=int, default=16, help="redis-benchmark -P")
    ap.add_argument("--base-port", type=int, default=0,
                    help="client ports from here, bus ports after them (default: free ports the kernel picks)")
    ap.add_argument("--no-pin", action="store_true", help="leave every process on every core")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json-out")
    args = ap.parse_args()
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    try:
        primaries = [int(p) for p in args.primaries.split(",")]
        if min(primaries) < 1:
            raise BenchError("--primaries must be 1 or more")
        sizes = [parse_size(s) for s in args.sizes.split(",")]
        total = parse_size(args.total)
        rb_clients = args.rb_clients or max(1, args.threads * args.batch // args.rb_pipeline)
        bench = args.bench or os.path.join(args.build_dir, "bench/xfer/store/ferry-store-bench")
        if not os.access(bench, os.X_OK):
            raise BenchError(f"{bench} not found: build the ferry-store-bench target first")
        for tool in ("redis-server", "redis-cli", "redis-benchmark"):
            if shutil.which(tool) is None:
                raise BenchError(f"{tool} not found on PATH (scripts/install-deps.sh installs it)")
        server_cpus, client_cpus = (None, None) if args.no_pin else split_cpus(max(primaries))
        if client_cpus:
            os.sched_setaffinity(0, client_cpus)  # ferry-store-bench and redis-benchmark inherit it
            print(f"servers on cores {server_cpus}, clients on cores {client_cpus}", flush=True)
        else:
            print("not pinned: too few cores for a core per server and two for the client", flush=True)
        rows = []
        for count in primaries:
            print(f"{count} primar{'y' if count == 1 else 'ies'}:", flush=True)
            with Cluster(count, server_cpus, args.base_port) as cluster:
                for size in sizes:
                    objects = max(args.min_objects, total // size)
                    samples = {"ferry_set": [], "ferry_get": [], "rb_set": [], "rb_get": [], "rb_set_max": [],
                               "rb_get_max": []}
                    for rep in range(args.repeat):
                        for who in rotated(["ferry", "rb"], rep):
                            cluster.flush()
                            r = (ferry(bench, cluster, size, objects * size, args.threads, args.batch,
                                       args.connections) if who == "ferry" else
                                 redis_benchmark(cluster, size, objects, rb_clients, args.rb_pipeline))
                            for k, v in r.items():
                                samples[f"{who}_{k}"].append(v)
                    med = {k: statistics.median(v) for k, v in samples.items()}
                    row = {"primaries": count, "size": size, "objects": objects, "threads": args.threads,
                           "batch": args.batch, "connections": args.connections, "rb_clients": rb_clients,
                           "rb_pipeline": args.rb_pipeline, "samples": samples, "median": med,
                           "set_ratio": med["ferry_set"] / med["rb_set"], "get_ratio": med["ferry_get"] / med["rb_get"],
                           "set_ratio_worst": med["ferry_set"] / med["rb_set_max"],
                           "get_ratio_worst": med["ferry_get"] / med["rb_get_max"]}
                    one = next((r for r in rows if r["primaries"] == 1 and r["size"] == size), None)
                    if one and count != 1:
                        row["set_scaling"] = med["ferry_set"] / one["median"]["ferry_set"]
                        row["get_scaling"] = med["ferry_get"] / one["median"]["ferry_get"]
                    rows.append(row)
                    print(f"  {fmt_size(size):>7}: SET {med['ferry_set']:.3f} vs {med['rb_set']:.3f} "
                          f"({row['set_ratio']:.2f}x), GET {med['ferry_get']:.3f} vs {med['rb_get']:.3f} "
                          f"({row['get_ratio']:.2f}x) GB/s", flush=True)
    except (BenchError, ValueError, KeyError, OSError, subprocess.TimeoutExpired) as e:
        print(f"cluster_bench: {e}", file=sys.stderr)
        return 1
    print()
    print(table(rows))
    if args.json_out:
        meta = {"started": started, "command": " ".join(sys.argv), "commit": git_commit(os.path.dirname(__file__)),
                "cpu": cpu_model(), "cpus": os.cpu_count(), "kernel": platform.release(),
                "server_cpus": server_cpus, "client_cpus": client_cpus,
                "redis": tool_version(["redis-server", "--version"])}
        with open(args.json_out, "w") as f:
            json.dump({"machine": meta, "results": rows}, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
