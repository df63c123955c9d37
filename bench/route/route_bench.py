#!/usr/bin/env python3
"""Times the route's applications in every mode under mpirun, one run, one machine.

For each application, rank count and --work-per-message, the same program runs
in inline, thread and process mode (and optionally `process2`: two routers, as
two virtual nodes). Every rank, progress thread and router gets a core of its
own (--route-app-cpus / --route-progress-cpus / --route-router-cpus); the ratio
of a mode's time to inline's is the speedup, measured in this run.

  python3 bench/route/route_bench.py --build-dir build --size small --out /tmp/route

Prints a table; writes each run's JSON under OUT/runs/ and every number to
OUT/route-results.json. plot_route.py draws speedup against the
memory-to-communication ratio from it. Standard library only.
"""

import argparse
import datetime
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time

# processK_tT_sS: K routers (as K virtual nodes), T threads each, rings of S
# slots (default 64); "process" = process1_t1.
MODE_RE = re.compile(r"^(inline|thread|process(\d*)(?:_t(\d+|auto))?(?:_s(\d+))?)$")

# Problem sizes per application: `small` for CI-class machines (numbers mean
# nothing there), `full` for the 16-core machine (about a second per run).
SIZES = {
    "small": {
        "histogram": ["--updates", "200000", "--slots-per-rank", "65536"],
        "index_gather": ["--requests", "100000", "--entries-per-rank", "65536"],
        "transpose": ["--rows-per-rank", "8192", "--nnz-per-row", "16"],
        "qs_mini": ["--particles-per-rank", "20000"],
        "qs_mini_escape": ["--particles-per-rank", "20000", "--boundary", "escape", "--cycles", "1", "--census", "8"],
        "qs_mini_thin": ["--particles-per-rank", "20000", "--xs-scale", "0.1", "--cycles", "2", "--census", "4"],
        "randperm": ["--items-per-rank", "100000"],
    },
    "full": {
        "histogram": ["--updates", "8000000", "--slots-per-rank", "1048576"],
        "index_gather": ["--requests", "4000000", "--entries-per-rank", "1048576"],
        "transpose": ["--rows-per-rank", "262144", "--nnz-per-row", "16", "--verify", "false"],
        # Quicksilver's loop (cycles to census, reflecting boundary) at its
        # communication-heavy end: one cell per slab along x, cells 8 wide
        # across, thin material, 4 cycles: about 3 segments per slab crossing.
        "qs_mini": ["--particles-per-rank", "400000", "--cells-x-per-rank", "1", "--cells-y", "4", "--cells-z", "4",
                    "--cell-width", "8", "--xs-scale", "0.25", "--cycles", "4", "--census", "2"],
        # The geometry before Quicksilver's loop (escape boundary, one cycle, 32x32 unit cells): ends
        # lose particles, so the end ranks idle; about 5 segments a crossing.
        "qs_mini_escape": ["--particles-per-rank", "400000", "--cells-x-per-rank", "1", "--cells-y", "32",
                           "--cells-z", "32", "--xs-scale", "0.5", "--boundary", "escape", "--cycles", "1",
                           "--census", "8"],
        # The thin end: 2 cycles, a tenth of the cross sections, ~2.2 segments a crossing.
        "qs_mini_thin": ["--particles-per-rank", "400000", "--cells-x-per-rank", "1", "--cells-y", "4", "--cells-z", "4",
                         "--cell-width", "8", "--xs-scale", "0.1", "--cycles", "2", "--census", "4"],
        "randperm": ["--items-per-rank", "4000000"],
    },
}
# The flag that sets each application's amount of work (scaled down as
# --work-per-message grows, so a sweep point stays about as long as the first).
COUNT_FLAG = {"histogram": "--updates", "index_gather": "--requests", "transpose": "--rows-per-rank",
              "qs_mini": "--particles-per-rank", "randperm": "--items-per-rank"}
# Settings of an application under a name of their own: name -> program.
PROGRAM = {"qs_mini_escape": "qs_mini", "qs_mini_thin": "qs_mini"}


class BenchError(Exception):
    pass


def int_list(text):
    return [int(x) for x in text.split(",") if x.strip()]


def scaled_args(app, size, work):
    args = list(SIZES[size][app])
    flag = COUNT_FLAG[PROGRAM.get(app, app)]
    i = args.index(flag)
    # On the H100 machine a random DRAM read of the work table cost about a
    # sixth of a message's base cost (~20 ns against ~120 ns in transpose), so
    # keep (1 + work / 6) * count roughly constant.
    args[i + 1] = str(max(1000, int(int(args[i + 1]) * 6 / (6 + work))))
    return args


def plan(mode, ranks, cpus):
    """mpirun -np, route flags, and the cores used, for one mode at `ranks` application ranks."""
    # processK_tT: K routers, as K virtual nodes of ranks/K applications + 1
    # router, each with T threads (T=auto: as router_threads=auto picks).
    m = MODE_RE.match(mode)
    routers, threads = 0, 1
    if mode.startswith("process"):
        routers = int(m.group(2) or 1)
        if ranks % routers:
            raise BenchError(f"{mode} needs a rank count divisible by {routers}")
        # _tauto: what router_threads=auto picks (one thread per 2 applications of a node).
        threads = -(-(ranks // routers) // 2) if m.group(3) == "auto" else int(m.group(3) or 1)
    flags = [f"--route-mode={'process' if routers else mode}"]
    need, np_ = ranks, ranks
    if mode == "thread":
        need = 2 * ranks
    elif routers:
        need, np_ = ranks + routers * threads, ranks + routers
        if routers > 1:
            flags.append(f"--route-node-size={ranks // routers + 1}")
        flags.append(f"--route-router-threads={threads}")  # explicit: the cores below are counted for it
        if m.group(4):  # fewer ring slots: a smaller cache footprint of the rings
            flags.append(f"--route-ring-slots={m.group(4)}")
    pinned = need <= cpus
    if pinned:
        # Application ranks on cores 0..ranks-1 (virtual node by virtual node),
        # progress threads or routers on the next cores.
        flags.append(f"--route-app-cpus=0-{ranks - 1}")
        if mode == "thread":
            flags.append(f"--route-progress-cpus={ranks}-{2 * ranks - 1}")
        elif routers:
            flags.append(f"--route-router-cpus={ranks}-{ranks + routers * threads - 1}")
    return np_, flags, need, pinned


def run_one(a, app, mode, ranks, work, out_dir):
    np_, flags, need, pinned = plan(mode, ranks, a.cpus)
    name = f"{app}-{mode}-np{ranks}-w{work}"
    cmd = [a.mpirun, "--oversubscribe", "--bind-to", "none", "-np", str(np_)] + shlex.split(a.mpirun_args)
    cmd += [os.path.join(a.build_dir, "bench", "route", PROGRAM.get(app, app))] + flags + scaled_args(app, a.size, work)
    cmd += ["--work-per-message", str(work), "--work-table-mib", str(a.work_table_mib), "--quiet"]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    results = []
    for attempt in range(a.repeat):
        json_path = os.path.join(out_dir, "runs", f"{name}.{attempt}.json")
        cmd_i = cmd + ["--json-out", json_path]
        start = time.time()
        try:
            p = subprocess.run(cmd_i, env=env, capture_output=True, text=True, timeout=a.timeout)
        except subprocess.TimeoutExpired:
            raise BenchError(f"{name}: timed out after {a.timeout} s:\n  {shlex.join(cmd)}")
        with open(os.path.join(out_dir, "logs", f"{name}.{attempt}.log"), "w") as f:
            f.write(shlex.join(cmd) + "\n" + p.stdout + p.stderr)
        if p.returncode != 0 or not os.path.exists(json_path):
            raise BenchError(f"{name}: exit {p.returncode} after {time.time() - start:.1f} s:\n  {shlex.join(cmd)}\n"
                             + (p.stdout + p.stderr)[-3000:])
        r = json.load(open(json_path))
        if not r.get("verified"):
            raise BenchError(f"{name}: the application's check failed: {r.get('detail')}")
        r.update(run=name, app=app, mode_label=mode, cores=need, pinned=pinned, np=np_, command=shlex.join(cmd_i))
        results.append(r)
    # The fastest, or the median run (an odd --repeat gives a run that happened).
    results.sort(key=lambda r: r["seconds"])
    pick = results[0] if a.stat == "min" else results[(len(results) - 1) // 2]
    pick["repeat_seconds"] = [r["seconds"] for r in results]
    return pick


def table(rows):
    head = f"{'app':<13}{'ranks':>5}{'work':>5}{'mem/comm':>9}  {'mode':<9}{'cores':>5}{'s':>8}{'M msg/s':>9}" \
           f"{'MB/s':>9}{'speedup':>8}{'cpu ns/msg':>11}{'comm s':>8}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['app']:<13}{r['ranks']:>5}{r['work_per_message']:>5}{r['mem_comm_ratio']:>9.1f}  "
                     f"{r['mode_label']:<9}{r['cores']:>5}{r['seconds']:>8.3f}{r['msgs_per_s'] / 1e6:>9.2f}"
                     f"{r['bytes_per_s'] / 1e6:>9.1f}{r.get('speedup', float('nan')):>8.2f}"
                     f"{r['cpu_ns_per_msg']:>11.0f}{r['comm_s']:>8.3f}")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", default="build")
    p.add_argument("--out", default="route-results")
    p.add_argument("--size", choices=sorted(SIZES), default="small")
    p.add_argument("--apps", default="histogram,index_gather,transpose,qs_mini,randperm")
    p.add_argument("--modes", default="inline,thread,process")
    p.add_argument("--ranks", default="4,8")
    p.add_argument("--works", default="0", help="--work-per-message values for every app")
    p.add_argument("--sweep-apps", default="transpose,qs_mini", help="apps swept over --sweep-works")
    p.add_argument("--sweep-works", default="0,1,2,4,8,16,32")
    p.add_argument("--sweep-ranks", default="8")
    p.add_argument("--sweep-modes", default="inline,thread,process")
    p.add_argument("--work-table-mib", type=int, default=64)
    p.add_argument("--repeat", type=int, default=1, help="runs per point")
    p.add_argument("--stat", choices=["min", "median"], default="min", help="which of the repeats counts")
    p.add_argument("--cpus", type=int, default=os.cpu_count(), help="cores to place ranks on (0..cpus-1)")
    p.add_argument("--mpirun", default="mpirun")
    p.add_argument("--mpirun-args", default="", help="extra mpirun arguments")
    p.add_argument("--timeout", type=int, default=120)
    p.add_argument("--deadline", type=float, default=0,
                   help="seconds: points not started by then are skipped (and listed), 0 = none")
    a = p.parse_args()
    for d in ("runs", "logs"):
        os.makedirs(os.path.join(a.out, d), exist_ok=True)
    modes = [m for m in a.modes.split(",") if m]
    for m in modes + a.sweep_modes.split(","):
        if not MODE_RE.match(m):
            raise BenchError(f"unknown mode {m}: inline, thread, process, processK, processK_tT, processK_tauto, processK_tT_sS")
    # Order: the largest rank count first, then the sweep, so that a --deadline
    # cuts the least telling points.
    points = []  # (app, ranks, work, modes)
    base_ranks = sorted(int_list(a.ranks), reverse=True)
    sweep = []
    for app in [x for x in a.sweep_apps.split(",") if x]:
        for ranks in int_list(a.sweep_ranks):
            for w in int_list(a.sweep_works):
                sweep.append((app, ranks, w, a.sweep_modes.split(",")))
    for i, ranks in enumerate(base_ranks):
        for app in a.apps.split(","):
            for w in int_list(a.works):
                if not any(s[:3] == (app, ranks, w) for s in sweep):
                    points.append((app, ranks, w, modes))
        if i == 0:
            points += sweep
    rows = []
    skipped = []
    t0 = time.time()
    for app, ranks, work, ms in points:
        if a.deadline and time.time() - t0 > a.deadline:
            skipped.append(f"{app}-np{ranks}-w{work}")
            continue
        base = None
        for mode in ms:
            r = run_one(a, app, mode, ranks, work, a.out)
            if mode == "inline":
                base = r
            r["speedup"] = base["seconds"] / r["seconds"] if base else float("nan")
            r["ranks"] = ranks
            rows.append(r)
            print(f"  {r['run']}: {r['seconds']:.3f} s, {r['msgs_per_s'] / 1e6:.2f} M msg/s, "
                  f"speedup {r['speedup']:.2f}{'' if r['pinned'] else ' (NOT pinned: oversubscribed)'}", flush=True)
    print()
    print(table(rows))
    oversub = [r["run"] for r in rows if not r["pinned"]]
    if oversub:
        print(f"\nWARNING: {len(oversub)} runs needed more cores than --cpus {a.cpus}: they ran oversubscribed "
              "and unpinned; their times say nothing about the modes.")
    if skipped:
        print(f"\nSKIPPED after the {a.deadline:.0f} s deadline: {', '.join(skipped)}")
    summary = {
        "skipped": skipped,
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpus": a.cpus,
        "size": a.size,
        "args": vars(a),
        "elapsed_s": time.time() - t0,
        "rows": [{k: v for k, v in r.items() if k not in ("per_rank",)} for r in rows],
    }
    with open(os.path.join(a.out, "route-results.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(f"\nwrote {os.path.join(a.out, 'route-results.json')} ({time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as e:
        print(f"route_bench: {e}", file=sys.stderr)
        sys.exit(1)
