#!/usr/bin/env python3
"""O_DIRECT on one disk: NIXL POSIX's shape of I/O against the file tier's, paired.

nixl_bench.py finds the plugin below NIXL's POSIX backend under O_DIRECT. This probe
asks the disk alone which part of the agent's shape costs it, without Ferry in the
way. Each case writes, then reads, the same bytes in `--objects` objects of
`--size-mib`, and the cases take turns within every round, the first rotating, so
that the disk's drift between rounds falls on all of them alike:

- posix: one file per object, overwritten in place, one request per object, all
  objects in flight at once (what NIXL's POSIX backend submits);
- posix, two sets: the same, alternating between two sets of files each round (the
  file tier writes a new version into a spare file, not over the old one);
- lanes=N, whole: N threads take the objects in turn, one request per object (the
  agent's lanes stream one object at a time);
- lanes=N, whole+header: the same, each object after a 4 KiB header, which is
  read or written beside it (the file tier's layout); header+whole in one: the
  header and the data in one vectored request;
- lanes=N, pieces: each object in 1 MiB pieces, all in flight, the next object
  after the last completes; pieces+header: after a header, as the file tier did
  with 1 MiB pieces.

Prints GB/s (1e9 bytes) medians and each case's median paired ratio to posix;
--json writes the same. Needs a file system that takes O_DIRECT.
"""
import argparse
import json
import mmap
import os
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

MiB = 1 << 20
HEADER = 4096


def make_file(path, size):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
    buf = mmap.mmap(-1, size)
    buf.write(os.urandom(size))
    os.pwrite(fd, buf, 0)
    os.close(fd)
    return path


def io(op, fd, view, at):
    if op == "WRITE":
        return os.pwrite(fd, view, at)
    return os.preadv(fd, [view], at)


class Probe:
    def __init__(self, args):
        self.n, self.size = args.objects, args.size_mib * MiB
        os.makedirs(args.dir, exist_ok=True)
        self.sets = {
            name: [make_file(f"{args.dir}/{name}{i}", self.size + extra) for i in range(self.n)]
            for name, extra in (("a", 0), ("b", 0), ("c", 0), ("h", HEADER))
        }
        self.bufs = []
        for _ in range(self.n):
            b = mmap.mmap(-1, self.size)
            b.write(os.urandom(self.size))
            self.bufs.append(b)
        self.header = mmap.mmap(-1, HEADER)
        self.pool = ThreadPoolExecutor(max(64, self.n))
        self.round = 0

    def all_at_once(self, paths, op):
        def one(i):
            fd = os.open(paths[i], os.O_RDWR | os.O_DIRECT)
            io(op, fd, self.bufs[i], 0)
            os.close(fd)

        list(self.pool.map(one, range(self.n)))

    def in_lanes(self, op, lanes, pieces, header=True, one_request=False):
        paths = self.sets["h" if header else "a"]
        data_at = HEADER if header else 0

        def one_object(i):
            fd = os.open(paths[i], os.O_RDWR | os.O_DIRECT)
            view = memoryview(self.bufs[i])
            if one_request:  # header and data in one vectored request
                vec = [memoryview(self.header), view]
                os.pwritev(fd, vec, 0) if op == "WRITE" else os.preadv(fd, vec, 0)
                os.close(fd)
                return
            step = MiB if pieces else self.size
            parts = [(view[o:o + step], data_at + o) for o in range(0, self.size, step)]
            if header:
                parts.append((memoryview(self.header), 0))
            if len(parts) == 1:
                io(op, fd, *parts[0])
            else:
                threads = [threading.Thread(target=io, args=(op, fd, v, at)) for v, at in parts]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
            os.close(fd)

        def lane(first):
            for i in range(first, self.n, lanes):
                one_object(i)

        threads = [threading.Thread(target=lane, args=(k,)) for k in range(lanes)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default="/var/tmp/ferry-direct-shape-probe", help="a folder on the disk to probe")
    ap.add_argument("--objects", type=int, default=32, help="objects per transfer (default 32)")
    ap.add_argument("--size-mib", type=int, default=4, help="object size in MiB (default 4)")
    ap.add_argument("--rounds", type=int, default=6, help="rounds of every case (default 6)")
    ap.add_argument("--lanes", default="8,32", help="lane counts to try, comma-separated (default 8,32)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    probe = Probe(args)
    cases = {
        "posix": lambda op: probe.all_at_once(probe.sets["a"], op),
        "posix, two sets": lambda op: probe.all_at_once(probe.sets["b" if probe.round % 2 == 0 else "c"], op),
    }
    for lanes in (int(x) for x in args.lanes.split(",")):
        cases[f"lanes={lanes}, whole"] = lambda op, n=lanes: probe.in_lanes(op, n, pieces=False, header=False)
        cases[f"lanes={lanes}, whole+header"] = lambda op, n=lanes: probe.in_lanes(op, n, pieces=False)
        cases[f"lanes={lanes}, header+whole in one"] = lambda op, n=lanes: probe.in_lanes(op, n, False, one_request=True)
        cases[f"lanes={lanes}, pieces"] = lambda op, n=lanes: probe.in_lanes(op, n, pieces=True, header=False)
        cases[f"lanes={lanes}, pieces+header"] = lambda op, n=lanes: probe.in_lanes(op, n, pieces=True)
    rates = {(c, op): [] for c in cases for op in ("WRITE", "READ")}
    total = args.objects * args.size_mib * MiB
    for r in range(args.rounds):
        names = list(cases)
        names = names[r % len(names):] + names[:r % len(names)]
        for op in ("WRITE", "READ"):
            for c in names:
                t0 = time.perf_counter()
                cases[c](op)
                rates[(c, op)].append(total / (time.perf_counter() - t0) / 1e9)
        probe.round += 1
        print(f"round {r + 1}/{args.rounds} done", flush=True)
    rows = []
    print(f"\n{args.objects} objects of {args.size_mib} MiB, O_DIRECT, {args.rounds} rounds in turns")
    print(f"{'op':6s} {'case':30s} {'GB/s':>6s} {'paired / posix':>15s}")
    for op in ("WRITE", "READ"):
        for c in cases:
            v = rates[(c, op)]
            ratio = statistics.median(x / y for x, y in zip(v, rates[("posix", op)]))
            rows.append({"op": op, "case": c, "gbps": v, "gbps_median": statistics.median(v),
                         "paired_over_posix": ratio})
            print(f"{op:6s} {c:30s} {statistics.median(v):6.2f} {ratio:14.2f}x")
    for paths in probe.sets.values():
        for p in paths:
            os.unlink(p)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"bench": "direct_shape_probe", "objects": args.objects, "size_mib": args.size_mib,
                       "rounds": args.rounds, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
