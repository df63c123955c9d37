#!/usr/bin/env python3
"""The storage tiers against the tools everyone trusts, in one run.

(a) The file tier against fio: same block size, queue depth and O_DIRECT
    setting, io_uring in both (fio --ioengine=io_uring --rw=write, then
    --rw=read). The tier is called with batches of --file-batch objects: a
    call returns when its batch is done, so its queue drains at the end of each
    call, which fio's never does. fio writes one file (fallocated up front); the tier writes a file
    per object (create, write header + data, rename) above its pack= threshold
    (the tier's default, 1MiB, unless --file-options says otherwise), and the
    objects of each call up to it into one pack file (--file-options ',pack=0'
    for a file per object). A second fio run with a
    file per block (--nrfiles, --create_on_open) separates the price of that
    layout from the tier's own overhead.
(b) The redis tier against redis-benchmark (-t set,get -d <size> -P <pipeline>
    -c <clients>), on a redis-server this script starts. redis-benchmark SETs and
    GETs one key over and over (no -r); the tier is run the same way (--keys 1)
    for the ratio, and once more with a key per object, as a cache really runs.

Every point is measured --repeat times, the tools interleaved, and the median
kept. Ratios are ours / theirs, both from this run. Prints a table and writes
every number to JSON (--json-out). Standard library only.

  python3 bench/xfer/store/store_bench.py --build-dir /work/build-store \\
      --json-out docs/bench/store.json
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

UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20,
         "g": 1 << 30, "gib": 1 << 30}


class BenchError(Exception):
    pass


def parse_size(text):
    t = text.strip().lower()
    i = len(t)
    while i > 0 and not t[i - 1].isdigit():
        i -= 1
    if t[i:] not in UNITS or i == 0:
        raise BenchError(f"'{text}' is not a size like 4096, 64KiB or 1MiB")
    return int(t[:i]) * UNITS[t[i:]]


def fmt_size(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return f"{n}B"


def run(argv, timeout=600):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise BenchError(f"{' '.join(argv[:8])} ... exited with {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p.stdout


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def fs_type(path):
    best, fstype = "", "unknown"
    try:
        with open("/proc/mounts") as f:
            for line in f:
                parts = line.split()
                mnt = parts[1]
                if os.path.abspath(path).startswith(mnt) and len(mnt) > len(best):
                    best, fstype = mnt, f"{parts[2]} on {parts[0]}"
    except OSError:
        pass
    return fstype


def git_commit(path):
    try:
        return subprocess.run(["git", "-C", path, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=5).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def tool_version(argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=5).stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def ours(bench, tier, size, qd, total, direct=False, threads=1, keys=0, batch=None):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        argv = [bench, "--tier", tier, "--block-size", str(size), "--qd", str(qd), "--batch", str(batch or qd),
                "--total", str(total), "--threads", str(threads), "--json-out", out.name]
        if direct:
            argv.append("--direct")
        if keys:
            argv += ["--keys", str(keys)]
        run(argv)
        d = json.load(open(out.name))
    return {"put": d["put"]["gbps"], "get": d["get"]["gbps"], "checksum_gbps": d["checksum_gbps"]}


def fio(target, rw, size, qd, total, direct, per_object=False):
    """GB/s of one fio job. target is a file, or (per_object) a directory that gets
    a file of `size` bytes per block, created as it is written, like the tier's."""
    argv = ["fio", "--name=" + rw, "--ioengine=io_uring", "--rw=" + rw, f"--bs={size}", f"--iodepth={qd}",
            f"--direct={1 if direct else 0}", f"--size={total}", "--output-format=json",
            # Buffered reads come from the page cache the write left, as the tier's do.
            "--invalidate=0"]
    if per_object:
        argv += ["--directory=" + target, f"--nrfiles={max(1, total // size)}", f"--filesize={size}",
                 f"--openfiles={qd}", "--file_service_type=sequential"]
        if rw == "write":
            argv.append("--create_on_open=1")  # created as they are written, not laid out first
    else:
        argv += ["--filename=" + target]
    out = run(argv)
    job = json.loads(out[out.index("{"):])["jobs"][0]
    return job["write" if rw == "write" else "read"]["bw_bytes"] / 1e9


def rotated(programs, rep):
    """The order of repeat `rep`: rotated, so that drift in the machine spreads
    over every program, and reversed every other time, so that no program always
    runs right after the same one (whose clean-up, a deleted directory's discards
    say, could slow the next)."""
    k = rep % len(programs)
    order = programs[k:] + programs[:k]
    return order[::-1] if (rep // len(programs)) % 2 else order


def sync_disk():
    os.sync()  # earlier runs' dirty pages must not be written back during the next measurement


def file_points(args, bench, before=None):
    rows = []
    root = tempfile.mkdtemp(prefix="ferry-store-bench-", dir=args.dir)
    try:
        for direct in args.direct:
            for size in args.file_sizes:
                samples = {"ours_put": [], "ours_get": [], "fio_write": [], "fio_read": [],
                           "fio_files_write": [], "fio_files_read": []}
                if before:
                    samples.update({"before_put": [], "before_get": []})
                for rep in range(args.repeat):
                    order = rotated(["ours", "fio", "fio_files"] + (["before"] if before else []), rep)
                    for who in order:
                        sync_disk()
                        if who in ("ours", "before"):
                            tier_dir = os.path.join(root, "tier")
                            r = ours(bench if who == "ours" else before, "file:" + tier_dir + args.file_options, size,
                                     args.file_qd, args.file_total, direct, batch=args.file_batch)
                            samples[who + "_put"].append(r["put"])
                            samples[who + "_get"].append(r["get"])
                            shutil.rmtree(tier_dir, ignore_errors=True)
                        elif who == "fio":
                            path = os.path.join(root, "fio.dat")
                            samples["fio_write"].append(fio(path, "write", size, args.file_qd, args.file_total, direct))
                            samples["fio_read"].append(fio(path, "read", size, args.file_qd, args.file_total, direct))
                            os.unlink(path)
                        else:
                            path = os.path.join(root, "fio-files")
                            os.makedirs(path)
                            samples["fio_files_write"].append(
                                fio(path, "write", size, args.file_qd, args.file_total, direct, per_object=True))
                            samples["fio_files_read"].append(
                                fio(path, "read", size, args.file_qd, args.file_total, direct, per_object=True))
                            shutil.rmtree(path)
                med = {k: statistics.median(v) for k, v in samples.items()}
                row = {"tier": "file", "options": args.file_options, "direct": direct, "size": size, "qd": args.file_qd,
                       "batch": args.file_batch, "samples": samples,
                       "median": med, "put_ratio": med["ours_put"] / med["fio_write"],
                       "get_ratio": med["ours_get"] / med["fio_read"],
                       "put_ratio_files": med["ours_put"] / med["fio_files_write"],
                       "get_ratio_files": med["ours_get"] / med["fio_files_read"]}
                if before:
                    row["put_vs_before"] = med["ours_put"] / med["before_put"]
                    row["get_vs_before"] = med["ours_get"] / med["before_get"]
                    print(f"  file {'direct ' if direct else 'buffered'} {fmt_size(size):>7}: the build before: put "
                          f"{med['before_put']:.3f} ({row['put_vs_before']:.2f}x of it), get {med['before_get']:.3f} "
                          f"({row['get_vs_before']:.2f}x of it)", flush=True)
                rows.append(row)
                print(f"  file {'direct ' if direct else 'buffered'} {fmt_size(size):>7}: put {med['ours_put']:.3f} "
                      f"vs fio {med['fio_write']:.3f} ({row['put_ratio']:.2f}x), get {med['ours_get']:.3f} vs "
                      f"{med['fio_read']:.3f} ({row['get_ratio']:.2f}x); fio with a file per block: write "
                      f"{med['fio_files_write']:.3f}, read {med['fio_files_read']:.3f}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return rows


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_cmd(port, *args):
    return run(["redis-cli", "-p", str(port)] + list(args))


def redis_benchmark_rps(argv):
    """Runs redis-benchmark -t set,get --csv (argv after the program's name): {"SET": rps, "GET": rps}."""
    out = run(["redis-benchmark"] + argv)
    rps = {}
    for line in out.splitlines():
        cells = [c.strip('"') for c in line.split(",")]
        if len(cells) > 1 and cells[0] in ("SET", "GET"):
            rps[cells[0]] = float(cells[1])
    if set(rps) != {"SET", "GET"}:
        raise BenchError(f"cannot read redis-benchmark's output:\n{out}")
    return rps


def redis_benchmark(port, size, pipeline, clients, requests):
    rps = redis_benchmark_rps(["-h", "127.0.0.1", "-p", str(port), "-t", "set,get", "-d", str(size),
                               "-P", str(pipeline), "-c", str(clients), "-n", str(requests), "--csv", "-q"])
    return {"set": rps["SET"] * size / 1e9, "get": rps["GET"] * size / 1e9}


def redis_points(args, bench, before=None):
    rows = []
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="ferry-redis-bench-")
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no", "--dir", workdir, "--protected-mode", "no"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                if "PONG" in redis_cmd(port, "ping"):
                    break
            except BenchError:
                pass
            if time.monotonic() > deadline:
                raise BenchError("redis-server did not start")
            time.sleep(0.05)
        url = f"redis://127.0.0.1:{port}"
        for size in args.redis_sizes:
            requests = max(args.redis_min_requests, args.redis_total // size)
            total = requests * size
            samples = {"ours_set": [], "ours_get": [], "rb_set": [], "rb_get": [], "ours_set_distinct": [],
                       "ours_get_distinct": []}
            if before:
                samples.update({"before_set": [], "before_get": []})
            for rep in range(args.repeat):
                order = rotated(["ours", "rb"] + (["before"] if before else []), rep)
                for who in order:
                    redis_cmd(port, "flushall")
                    if who == "ours":
                        r = ours(bench, url, size, args.redis_pipeline, total, threads=args.redis_clients, keys=1)
                        samples["ours_set"].append(r["put"])
                        samples["ours_get"].append(r["get"])
                        redis_cmd(port, "flushall")
                        r = ours(bench, url, size, args.redis_pipeline, total, threads=args.redis_clients)
                        samples["ours_set_distinct"].append(r["put"])
                        samples["ours_get_distinct"].append(r["get"])
                    elif who == "before":
                        r = ours(before, url, size, args.redis_pipeline, total, threads=args.redis_clients, keys=1)
                        samples["before_set"].append(r["put"])
                        samples["before_get"].append(r["get"])
                    else:
                        r = redis_benchmark(port, size, args.redis_pipeline, args.redis_clients, requests)
                        samples["rb_set"].append(r["set"])
                        samples["rb_get"].append(r["get"])
            med = {k: statistics.median(v) for k, v in samples.items()}
            row = {"tier": "redis", "size": size, "pipeline": args.redis_pipeline, "clients": args.redis_clients,
                   "requests": requests, "samples": samples, "median": med,
                   "set_ratio": med["ours_set"] / med["rb_set"], "get_ratio": med["ours_get"] / med["rb_get"]}
            if before:
                row["set_vs_before"] = med["ours_set"] / med["before_set"]
                row["get_vs_before"] = med["ours_get"] / med["before_get"]
                print(f"  redis {fmt_size(size):>7}: the build before: set {med['before_set']:.3f} "
                      f"({row['set_vs_before']:.2f}x of it), get {med['before_get']:.3f} "
                      f"({row['get_vs_before']:.2f}x of it)", flush=True)
            rows.append(row)
            print(f"  redis {fmt_size(size):>7}: set {med['ours_set']:.3f} vs {med['rb_set']:.3f} "
                  f"({row['set_ratio']:.2f}x), get {med['ours_get']:.3f} vs {med['rb_get']:.3f} "
                  f"({row['get_ratio']:.2f}x); a key per object: set {med['ours_set_distinct']:.3f}, "
                  f"get {med['ours_get_distinct']:.3f}", flush=True)
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(workdir, ignore_errors=True)
    return rows


def table(rows):
    lines = []
    files = [r for r in rows if r["tier"] == "file"]
    if files:
        lines += ["| file tier | block | qd / batch | put GB/s | fio write | **put / fio** | get GB/s | fio read "
                  "| **get / fio** | fio write, file per block | put / that | fio read, file per block "
                  "| get / that |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in files:
            m = r["median"]
            lines.append(f"| {'O_DIRECT' if r['direct'] else 'buffered'} | {fmt_size(r['size'])} | {r['qd']} / {r['batch']} "
                         f"| {m['ours_put']:.3f} | {m['fio_write']:.3f} | **{r['put_ratio']:.2f}** "
                         f"| {m['ours_get']:.3f} | {m['fio_read']:.3f} | **{r['get_ratio']:.2f}** "
                         f"| {m['fio_files_write']:.3f} | {r['put_ratio_files']:.2f} "
                         f"| {m['fio_files_read']:.3f} | {r['get_ratio_files']:.2f} |")
    reds = [r for r in rows if r["tier"] == "redis"]
    if reds:
        if lines:
            lines.append("")
        lines += ["| redis tier | value | pipeline | SET GB/s | redis-benchmark SET | **ratio** | GET GB/s "
                  "| redis-benchmark GET | **ratio** | SET, key per object | GET, key per object |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in reds:
            m = r["median"]
            lines.append(f"| c={r['clients']} | {fmt_size(r['size'])} | {r['pipeline']} | {m['ours_set']:.3f} "
                         f"| {m['rb_set']:.3f} | **{r['set_ratio']:.2f}** | {m['ours_get']:.3f} | {m['rb_get']:.3f} "
                         f"| **{r['get_ratio']:.2f}** | {m['ours_set_distinct']:.3f} | {m['ours_get_distinct']:.3f} |")
    compared = [r for r in rows if "put_vs_before" in r or "set_vs_before" in r]
    if compared:
        lines += ["", "| tier | block | write: before GB/s | after GB/s | **after / before** | read: before GB/s "
                  "| after GB/s | **after / before** |", "|---|---|---|---|---|---|---|---|"]
        for r in compared:
            m = r["median"]
            w, rd = ("put", "get") if r["tier"] == "file" else ("set", "get")
            name = f"file, {'O_DIRECT' if r['direct'] else 'buffered'}" if r["tier"] == "file" else "redis"
            lines.append(f"| {name} | {fmt_size(r['size'])} | {m['before_' + w]:.3f} | {m['ours_' + w]:.3f} "
                         f"| **{r[w + '_vs_before']:.2f}** | {m['before_' + rd]:.3f} | {m['ours_' + rd]:.3f} "
                         f"| **{r[rd + '_vs_before']:.2f}** |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default="build", help="where ferry-store-bench was built")
    ap.add_argument("--before-build-dir",
                    help="an older build's tree (its bench/xfer/store/ferry-store-bench): measured in the same "
                         "rotation, to show what a change did (after / before)")
    ap.add_argument("--dir", default="/var/tmp", help="a directory on the disk to measure (not tmpfs)")
    ap.add_argument("--file-sizes", default="64KiB,1MiB,4MiB")
    ap.add_argument("--file-qd", type=int, default=32, help="fio --iodepth and the tier's qd=")
    ap.add_argument("--file-batch", type=int, default=256,
                    help="objects per tier call: a call drains its queue at its end, fio never does")
    ap.add_argument("--file-total", default="1GiB")
    ap.add_argument("--file-options", default="",
                    help="appended to the file tier's spec: '' (the tier's defaults: objects up to 1MiB "
                         "in packs), ',pack=256KiB', or ',pack=0' (a file per object)")
    ap.add_argument("--direct", default="on,off", help="on, off or on,off")
    ap.add_argument("--redis-sizes", default="4KiB,64KiB,1MiB")
    ap.add_argument("--redis-pipeline", type=int, default=16)
    ap.add_argument("--redis-clients", type=int, default=1)
    ap.add_argument("--redis-total", default="512MiB")
    ap.add_argument("--redis-min-requests", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--skip-file", action="store_true")
    ap.add_argument("--skip-redis", action="store_true")
    ap.add_argument("--json-out")
    args = ap.parse_args()
    try:
        args.file_sizes = [parse_size(s) for s in args.file_sizes.split(",")]
        args.redis_sizes = [parse_size(s) for s in args.redis_sizes.split(",")]
        args.file_total = parse_size(args.file_total)
        args.redis_total = parse_size(args.redis_total)
        args.direct = [{"on": True, "off": False}[d] for d in args.direct.split(",")]
        bench = os.path.join(args.build_dir, "bench/xfer/store/ferry-store-bench")
        if not os.access(bench, os.X_OK):
            raise BenchError(f"{bench} not found: build the ferry-store-bench target first")
        before = None
        if args.before_build_dir:
            before = os.path.join(args.before_build_dir, "bench/xfer/store/ferry-store-bench")
            if not os.access(before, os.X_OK):
                raise BenchError(f"{before} not found")
        for tool in (["fio"] if not args.skip_file else []) + (
                ["redis-server", "redis-benchmark", "redis-cli"] if not args.skip_redis else []):
            if shutil.which(tool) is None:
                raise BenchError(f"{tool} not found (scripts/install-deps.sh installs it)")
        rows = []
        started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        if not args.skip_file:
            print(f"file tier vs fio in {args.dir} ({fs_type(args.dir)}):", flush=True)
            rows += file_points(args, bench, before)
        if not args.skip_redis:
            print("redis tier vs redis-benchmark:", flush=True)
            rows += redis_points(args, bench, before)
    except (BenchError, KeyError, subprocess.TimeoutExpired) as e:
        print(f"store_bench: {e}", file=sys.stderr)
        return 1
    print()
    print(table(rows))
    if args.json_out:
        meta = {"started": started, "command": " ".join(sys.argv), "commit": git_commit(os.path.dirname(__file__)),
                "cpu": cpu_model(), "cpus": os.cpu_count(), "kernel": platform.release(),
                "filesystem": fs_type(args.dir), "fio": tool_version(["fio", "--version"]),
                "redis": tool_version(["redis-server", "--version"])}
        with open(args.json_out, "w") as f:
            json.dump({"machine": meta, "results": rows}, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
