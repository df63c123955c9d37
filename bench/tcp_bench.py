#!/usr/bin/env python3
"""Ferry against a plain epoll echo server, same client, same cores, one run.

For each message size, the echo baseline (bench/echo_server.cpp) and Ferry
(`ferry server` + `ferry orchestrator`) are started in turn and driven by the
same `ferry client`, once with a window of 128 (throughput, latency under load)
and once with one message in flight (latency). The ratio of the two is the cost
of Ferry's offload path over plain TCP; both numbers come from this run, on
this machine, never from two runs.

  python3 bench/tcp_bench.py --build-dir build --sizes 64,256,4096 --connections 1,8

Prints a table and writes every number to JSON (--out). Standard library only.
"""

import argparse
import datetime
import json
import os
import shlex
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

# Linux refuses a single argv string longer than this (MAX_ARG_STRLEN), and the
# client takes its message on the command line.
MAX_ARG_BYTES = 131072 - 1


class BenchError(Exception):
    pass


def parse_int_list(text, what):
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise BenchError(f"{what}: '{text}' is not a comma-separated list of integers")
    if not out:
        raise BenchError(f"{what}: empty list")
    return out


def parse_cpu_list(text):
    """'0,2-4' -> [0, 2, 3, 4]."""
    cpus = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part:
                lo, hi = part.split("-", 1)
                cpus.extend(range(int(lo), int(hi) + 1))
            else:
                cpus.append(int(part))
        except ValueError:
            raise BenchError(f"'{text}' is not a CPU list like 0,2-3")
    return sorted(set(cpus))


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def git_commit(path):
    try:
        return subprocess.run(["git", "-C", path, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=5).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def tail(path, lines=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


class Proc:
    """A background process in its own session, with its output in a log file,
    that is always gone when the `with` block ends."""

    def __init__(self, name, argv, logdir, cpus=None):
        self.name = name
        self.log = os.path.join(logdir, f"{name}.log")
        if cpus is not None:
            argv = ["taskset", "-c", ",".join(map(str, cpus))] + argv
        self.argv = argv
        self.logf = open(self.log, "w")
        self.p = subprocess.Popen(argv, stdout=self.logf, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, start_new_session=True)

    def alive(self):
        return self.p.poll() is None

    def check_alive(self):
        if not self.alive():
            raise BenchError(f"{self.name} exited with status {self.p.returncode}:\n"
                             f"  {' '.join(self.argv[:12])}\n{tail(self.log)}")

    def stop(self, timeout, sig=signal.SIGINT):
        """Sends `sig`, waits up to `timeout` s, then kills the process group.
        Returns a warning string when the process had to be killed."""
        if not self.alive():
            return None
        try:
            self.p.send_signal(sig)
            self.p.wait(timeout=timeout)
            return None
        except subprocess.TimeoutExpired:
            self.kill()
            return f"{self.name} did not exit {timeout:.0f} s after {signal.Signals(sig).name}; killed"

    def wait(self, timeout):
        try:
            self.p.wait(timeout=timeout)
            return None
        except subprocess.TimeoutExpired:
            self.kill()
            return f"{self.name} did not exit within {timeout:.0f} s; killed"

    def kill(self):
        if self.alive():
            try:
                os.killpg(self.p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.p.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()
        self.logf.close()


def wait_port_file(path, proc, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc.check_alive()
        try:
            with open(path) as f:
                text = f.read().strip()
            if text:
                return int(text)
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    raise BenchError(f"{proc.name} wrote no port to {path} within {timeout} s\n{tail(proc.log)}")


class Bench:
    def __init__(self, args):
        self.args = args
        build = args.build_dir
        self.ferry = os.path.join(build, "apps", "ferry", "ferry")
        self.echo = os.path.join(build, "bench", "ferry-echo-baseline")
        needed = {"echo": [self.echo], "ferry": [self.ferry]}
        missing = [b for s in args.systems for b in needed[s]]
        missing += [self.ferry]  # the client is `ferry client` in every case
        missing = [b for b in dict.fromkeys(missing) if not os.access(b, os.X_OK)]
        if missing:
            raise BenchError("missing binaries (build them first, e.g. "
                             "`cmake --build build --target ferry ferry-echo-baseline`):\n  " +
                             "\n  ".join(missing))
        self.notes = []
        self.logdir = tempfile.mkdtemp(prefix="ferry-tcp-bench-")
        self.server_cpus = parse_cpu_list(args.server_cpus)
        self.worker_cpus = parse_cpu_list(args.worker_cpus) if args.worker_cpus else None
        self.client_cpus = self.pick_client_cpus()
        self.channel_seq = 0

    def pick_client_cpus(self):
        usable = sorted(os.sched_getaffinity(0))
        bad = [c for c in self.server_cpus + (self.worker_cpus or []) if c not in usable]
        if bad:
            raise BenchError(f"CPUs {bad} are not usable by this process (usable: {usable})")
        if shutil.which("taskset") is None:
            self.notes.append("taskset not found: the client is not pinned")
            return None
        if self.args.client_cpus:
            cpus = parse_cpu_list(self.args.client_cpus)
        else:
            taken = set(self.server_cpus) | set(self.worker_cpus or [])
            cpus = [c for c in usable if c not in taken]
        overlap = sorted(set(cpus) & set(self.server_cpus))
        if not cpus:
            cpus = usable
            self.notes.append(f"only {len(usable)} usable cores: the client shares cores "
                              f"{usable} with the server")
        elif overlap:
            self.notes.append(f"the client shares cores {overlap} with the server")
        if self.worker_cpus is None and "ferry" in self.args.systems:
            self.notes.append("the orchestrator's workers are not pinned (--worker-cpus): they "
                              "share cores with the client")
        return cpus

    # One `ferry client` run; returns its JSON statistics.
    def run_client(self, port, size, conns, iterations, window, tag, timeout=None):
        timeout = self.args.timeout if timeout is None else timeout
        out = os.path.join(self.logdir, f"{tag}.json")
        if os.path.exists(out):
            os.unlink(out)
        argv = [self.ferry, "client", "-s", "127.0.0.1", "-p", str(port), "-t", str(conns),
                "-i", str(iterations), "-m", "x" * size,
                "--max-concurrent-messages", str(window), "--json-out", out]
        if self.client_cpus is not None:
            argv = ["taskset", "-c", ",".join(map(str, self.client_cpus))] + argv
        log = os.path.join(self.logdir, f"{tag}.log")
        with open(log, "w") as logf:
            try:
                rc = subprocess.run(argv, stdout=logf, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, timeout=timeout).returncode
            except subprocess.TimeoutExpired:
                raise BenchError(f"client run {tag} took more than {timeout:.0f} s\n{tail(log)}")
        if rc != 0:
            raise BenchError(f"client run {tag} failed with status {rc}:\n{tail(log)}")
        with open(out) as f:
            return json.load(f)

    # Until the server answers a request (Ferry's answers only once the
    # orchestrator has attached), try a one-request client.
    def wait_ready(self, port, size, servers, tag):
        deadline = time.monotonic() + self.args.ready_timeout
        last = ""
        while time.monotonic() < deadline:
            for s in servers:
                s.check_alive()
            try:
                left = max(1.0, deadline - time.monotonic())
                self.run_client(port, size, 1, 1, 1, f"{tag}-probe", timeout=left)
                return
            except BenchError as e:
                last = str(e)
            time.sleep(0.2)
        raise BenchError(f"{tag}: no valid response within {self.args.ready_timeout} s; "
                         f"last attempt:\n{last}")

    def measure(self, port, size, system, servers):
        """Runs every connection count against a started server."""
        out = {}
        self.wait_ready(port, size, servers, f"{system}-{size}")
        for conns in self.args.connections:
            runs = []
            lat = []
            for rep in range(self.args.repeat):
                tag = f"{system}-{size}-{conns}-r{rep}"
                runs.append(self.run_client(port, size, conns, self.args.iterations,
                                            self.args.window, f"{tag}-w{self.args.window}"))
                lat.append(self.run_client(port, size, conns, self.args.latency_iterations, 1,
                                           f"{tag}-w1"))
            for s in servers:
                s.check_alive()
            out[conns] = {"load": median_run(runs), "w1": median_run(lat),
                          "load_runs": runs, "w1_runs": lat}
        return out

    def run_echo(self, size, max_len):
        pf = os.path.join(self.logdir, f"echo-{size}.port")
        argv = [self.echo, "--port", "0", "--port-file", pf, "--max-message-length", str(max_len)]
        for c in self.server_cpus:
            argv += ["--cpu", str(c)]
        with Proc(f"echo-{size}", argv, self.logdir) as srv:
            port = wait_port_file(pf, srv, self.args.start_timeout)
            res = self.measure(port, size, "echo", [srv])
            warn = srv.stop(self.args.stop_timeout)
            if warn:
                self.notes.append(warn)
        return res

    def run_ferry(self, size, max_len):
        self.channel_seq += 1
        channel = f"bench{os.getpid()}n{self.channel_seq}"
        pf = os.path.join(self.logdir, f"ferry-{size}.port")
        argv = [self.ferry, "server", "-p", "0", "--port-file", pf, "-c", channel,
                "--max-message-length", str(max_len), "--listen-address", "127.0.0.1"]
        for c in self.server_cpus:
            argv += ["--cpu", str(c)]
        orch_argv = [self.ferry, "orchestrator", "-c", channel, "-t", str(len(self.server_cpus)),
                     "--max-message-length", str(max_len), "--backend", self.args.backend]
        orch_argv += shlex.split(self.args.orchestrator_args)
        with Proc(f"ferry-server-{size}", argv, self.logdir) as srv:
            port = wait_port_file(pf, srv, self.args.start_timeout)
            with Proc(f"ferry-orchestrator-{size}", orch_argv, self.logdir,
                      cpus=self.worker_cpus) as orch:
                res = self.measure(port, size, "ferry", [srv, orch])
                # The server's Ctrl-C path sends start_shutdown to the orchestrator.
                for warn in (srv.stop(self.args.stop_timeout), orch.wait(self.args.stop_timeout)):
                    if warn:
                        self.notes.append(warn)
                if srv.p.returncode not in (0, None):
                    self.notes.append(f"ferry server exited with status {srv.p.returncode} on "
                                      f"SIGINT (size {size}); log {srv.log}")
                if orch.p.returncode not in (0, None):
                    self.notes.append(f"ferry orchestrator exited with status "
                                      f"{orch.p.returncode} (size {size}); log {orch.log}")
        return res

    def run(self):
        results = []
        failures = 0
        for size in self.args.sizes:
            max_len = max(256, size + 4)
            per_system = {}
            for system in self.args.systems:
                fn = self.run_echo if system == "echo" else self.run_ferry
                print(f"[tcp_bench] size {size}: {system} ...", file=sys.stderr, flush=True)
                try:
                    per_system[system] = fn(size, max_len)
                except BenchError as e:
                    failures += 1
                    per_system[system] = {"error": str(e)}
                    print(f"[tcp_bench] size {size}, {system} failed: {e}", file=sys.stderr)
            for conns in self.args.connections:
                row = {"size": size, "connections": conns, "max_message_length": max_len}
                for system in self.args.systems:
                    r = per_system[system]
                    row[system] = {"error": r["error"]} if "error" in r else r[conns]
                add_comparison(row)
                results.append(row)
        return results, failures


def median_run(runs):
    """The run with the median throughput (a real run, not a mix of several)."""
    ordered = sorted(runs, key=lambda r: r["ops_per_s"])
    return ordered[(len(ordered) - 1) // 2]


def add_comparison(row):
    e, f = row.get("echo", {}), row.get("ferry", {})
    if "load" in e and "load" in f:
        row["ratio_ferry_over_echo"] = f["load"]["ops_per_s"] / e["load"]["ops_per_s"]
    if "w1" in e and "w1" in f:
        row["delta_p50_w1_us"] = f["w1"]["latency_us"]["p50"] - e["w1"]["latency_us"]["p50"]


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def get(row, system, run, *keys):
    d = row.get(system, {}).get(run)
    for k in keys:
        if d is None:
            return None
        d = d.get(k)
    return d


def print_table(results, window):
    head = ["size", "conns", "echo kop/s", "ferry kop/s", "ratio",
            f"echo p50/p99 us", f"ferry p50/p99 us", "w1 p50 echo", "w1 p50 ferry", "delta p50"]
    rows = []
    for r in results:
        kops = lambda s: (get(r, s, "load", "ops_per_s") or 0) / 1e3 or None
        pp = lambda s: (f"{fmt(get(r, s, 'load', 'latency_us', 'p50'), '.1f')}/"
                        f"{fmt(get(r, s, 'load', 'latency_us', 'p99'), '.1f')}")
        rows.append([str(r["size"]), str(r["connections"]), fmt(kops("echo"), ".1f"),
                     fmt(kops("ferry"), ".1f"), fmt(r.get("ratio_ferry_over_echo"), ".3f"),
                     pp("echo"), pp("ferry"),
                     fmt(get(r, "echo", "w1", "latency_us", "p50"), ".2f"),
                     fmt(get(r, "ferry", "w1", "latency_us", "p50"), ".2f"),
                     fmt(r.get("delta_p50_w1_us"), "+.2f")])
    widths = [max(len(h), *(len(x[i]) for x in rows)) for i, h in enumerate(head)]
    print(f"(load runs: window {window}; w1: one message in flight per connection; "
          f"ratio = ferry / echo throughput; delta = ferry - echo, us)")
    print("  ".join(h.rjust(w) for h, w in zip(head, widths)))
    for x in rows:
        print("  ".join(c.rjust(w) for c, w in zip(x, widths)))


def exit_on_sigterm(signum, frame):
    # Python dies on SIGTERM without unwinding, which left the server, workers
    # and clients running (a `timeout` around this script did that on the GPU
    # machine, and the next benchmark ran beside them). Exiting through
    # SystemExit runs every Proc's __exit__, which kills its process group.
    raise SystemExit(128 + signum)


def main():
    signal.signal(signal.SIGTERM, exit_on_sigterm)
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", required=True, help="CMake build directory")
    ap.add_argument("--sizes", default="64,256,4096", help="message sizes in bytes")
    ap.add_argument("--connections", default="1,8", help="client connection counts")
    ap.add_argument("--iterations", type=int, default=200000,
                    help="requests per connection in a load run")
    ap.add_argument("--latency-iterations", type=int, default=20000,
                    help="requests per connection in a window-1 run")
    ap.add_argument("--window", type=int, default=128, help="window of the load runs")
    ap.add_argument("--repeat", type=int, default=1,
                    help="runs per configuration; the median-throughput run is reported")
    ap.add_argument("--server-cpus", default="0", help="cores of the server threads (both servers)")
    ap.add_argument("--worker-cpus", default=None,
                    help="pin `ferry orchestrator` (and its CPU workers) to these cores")
    ap.add_argument("--client-cpus", default=None,
                    help="cores of the client (default: every usable core not given above)")
    ap.add_argument("--backend", default="cpu", help="ferry orchestrator --backend")
    ap.add_argument("--orchestrator-args", default="",
                    help="extra flags for `ferry orchestrator` (e.g. \"--worker-prefetch 0\")")
    ap.add_argument("--systems", default="echo,ferry",
                    help="which servers to run: echo, ferry or both")
    ap.add_argument("--out", default="bench/results/tcp.json", help="JSON output path")
    ap.add_argument("--timeout", type=float, default=300, help="seconds one client run may take")
    ap.add_argument("--start-timeout", type=float, default=30,
                    help="seconds a server may take to write its port file")
    ap.add_argument("--ready-timeout", type=float, default=60,
                    help="seconds until the first request is answered (orchestrator attach)")
    ap.add_argument("--stop-timeout", type=float, default=20,
                    help="seconds a process may take to exit after SIGINT")
    args = ap.parse_args()

    try:
        args.sizes = parse_int_list(args.sizes, "--sizes")
        args.connections = parse_int_list(args.connections, "--connections")
        args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
        if not args.systems or any(s not in ("echo", "ferry") for s in args.systems):
            raise BenchError("--systems takes echo, ferry or echo,ferry")
        if any(s < 0 or s > MAX_ARG_BYTES for s in args.sizes):
            raise BenchError(f"--sizes: each size must be 0..{MAX_ARG_BYTES} bytes (the client "
                             f"takes its message on the command line)")
        if any(c < 1 for c in args.connections) or args.iterations < 1 or args.window < 1 \
                or args.latency_iterations < 1 or args.repeat < 1:
            raise BenchError("connections, iterations, window and repeat must be at least 1")
        bench = Bench(args)
    except BenchError as e:
        print(f"tcp_bench: {e}", file=sys.stderr)
        return 2

    for n in bench.notes:
        print(f"[tcp_bench] note: {n}", file=sys.stderr)
    print(f"[tcp_bench] server cpus {bench.server_cpus}, client cpus {bench.client_cpus}, "
          f"logs in {bench.logdir}", file=sys.stderr)
    started = time.time()
    try:
        results, failures = bench.run()
    except KeyboardInterrupt:
        print("tcp_bench: interrupted", file=sys.stderr)
        return 130

    print_table(results, args.window)
    for n in bench.notes:
        print(f"note: {n}")

    doc = {
        "benchmark": "tcp_bench",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "duration_s": round(time.time() - started, 1),
        "machine": {
            "hostname": socket.gethostname(),
            "nproc": os.cpu_count(),
            "usable_cpus": len(os.sched_getaffinity(0)),
            "cpu_model": cpu_model(),
            "kernel": platform.release(),
        },
        "git_commit": git_commit(os.path.dirname(os.path.abspath(__file__))),
        "config": {
            "sizes": args.sizes, "connections": args.connections,
            "iterations": args.iterations, "latency_iterations": args.latency_iterations,
            "window": args.window, "repeat": args.repeat, "backend": args.backend,
            "systems": args.systems, "server_cpus": bench.server_cpus,
            "worker_cpus": bench.worker_cpus, "client_cpus": bench.client_cpus,
        },
        "notes": bench.notes,
        "results": results,
    }
    out_dir = os.path.dirname(args.out)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    print(f"wrote {args.out}")
    if failures:
        print(f"tcp_bench: {failures} server run(s) failed; logs in {bench.logdir}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
