#!/usr/bin/env python3
"""Times Ferry's route applications beside the same applications on two peer
libraries, LLNL's YGM and bale's conveyors, in one run on one machine.

For each application and rank count, every library runs the same problem
(same flags, same random streams, same verification; bench/route/peers/):

  ferry_inline   Ferry, --route-mode=inline
  ferry_process  Ferry, --route-mode=process: one more rank, the router, with
                 a thread per 2 applications (router_threads=auto)
  ygm            bench/route/peers/ygm_<app>     (YGM's async + barrier)
  convey         bench/route/peers/convey_<app>  (bale's conveyor loop)

The rate is the app's main messages per rank per second: histogram updates,
index_gather requests, randperm items (bounces and replies are not counted).
Repeats run the libraries in turn (so drift hits all alike) and the median
counts. Every application rank gets a core of its own when --cpus allows:
Ferry pins through its --route-*-cpus options (as route_bench.py does), the
peers through taskset, rank r on core r; otherwise runs are oversubscribed
and flagged. The peers take their own settings from the environment
(YGM_COM_BUFFER_SIZE_KB, CONVEY_BUFFER_SIZE, CONVEY_NLOCAL), left as they are here.

  python3 bench/route/peers_bench.py --build build --size small --cpus 2 --ranks 2

The peer binaries are built only where their libraries were pointed at
(-DFERRY_YGM_INCLUDE, -DFERRY_CONVEY_PREFIX; bench/route/peers/CMakeLists.txt);
a library whose binary is missing is skipped with a message. Prints a table;
writes every run's numbers (each app's own JSON included) to --json-out.
Standard library only.
"""

import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import route_bench  # noqa: E402  (plan(): Ferry's mpirun -np, route flags and pinning)

from route_bench import BenchError, int_list  # noqa: E402

APPS = ("histogram", "index_gather", "randperm")
LIBRARIES = ("ferry_inline", "ferry_process", "ygm", "convey")
PEERS = ("ygm", "convey")
# Ferry's libraries as route_bench.py modes (process mode with its default,
# router_threads=auto: one router thread per 2 applications).
FERRY_MODE = {"ferry_inline": "inline", "ferry_process": "process_tauto"}
# The params key (the apps' JSON) holding each app's main messages per rank.
MAIN_PER_RANK = {"histogram": "updates_per_rank", "index_gather": "requests_per_rank",
                 "randperm": "items_per_rank"}
# small and large are route_bench.py's small and full; default lies between.
SIZES = {
    "small": {app: route_bench.SIZES["small"][app] for app in APPS},
    "default": {
        "histogram": ["--updates", "2000000", "--slots-per-rank", "1048576"],
        "index_gather": ["--requests", "1000000", "--entries-per-rank", "1048576"],
        "randperm": ["--items-per-rank", "1000000"],
    },
    "large": {app: route_bench.SIZES["full"][app] for app in APPS},
}
# Pins a peer's rank to the core of its node-local rank (Open MPI, then MPICH).
PIN = 'exec taskset -c "${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-0}}" "$@"'


def binary(a, library, app):
    if library.startswith("ferry_"):
        return os.path.join(a.build, "bench", "route", app)
    return os.path.join(a.peers_build, f"{library}_{app}")


def command(a, library, app, ranks, json_path):
    """The mpirun command line, the cores it needs, and whether it is pinned."""
    prog = binary(a, library, app)
    args = SIZES[a.size][app] + ["--seed", str(a.seed), "--work-per-message", str(a.work),
                                 "--work-table-mib", str(a.work_table_mib), "--quiet", "--json-out", json_path]
    if library.startswith("ferry_"):
        np_, flags, need, pinned = route_bench.plan(FERRY_MODE[library], ranks, a.cpus)
        argv = [prog] + flags + args
    else:
        np_, need = ranks, ranks
        pinned = ranks <= a.cpus and a.taskset is not None
        argv = (["sh", "-c", PIN, "sh"] if pinned else []) + [prog] + args
    cmd = [a.mpirun, "--oversubscribe", "--bind-to", "none", "-np", str(np_)] + shlex.split(a.mpirun_args) + argv
    return cmd, np_, need, pinned


def run_one(a, library, app, ranks, repeat, tmp):
    json_path = os.path.join(tmp, f"{app}-{library}-np{ranks}.{repeat}.json")
    cmd, np_, need, pinned = command(a, library, app, ranks, json_path)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    row = {"app": app, "ranks": ranks, "library": library, "repeat": repeat, "np": np_, "cores": need,
           "pinned": pinned, "command": shlex.join(cmd)}
    start = time.time()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.timeout)
    except subprocess.TimeoutExpired:
        row["error"] = f"timed out after {a.timeout} s"
        return row
    row["wall_s"] = time.time() - start
    if not os.path.exists(json_path):  # the app's report never came
        row["error"] = f"exit {p.returncode}, no report"
        row["output"] = (p.stdout + p.stderr)[-3000:]
        return row
    with open(json_path) as f:
        r = json.load(f)
    os.remove(json_path)
    if not r.get("verified"):
        row["error"] = f"the application's check failed: {r.get('detail')}"
    elif p.returncode != 0:
        row["error"] = f"exit {p.returncode} after a verified report"
        row["output"] = (p.stdout + p.stderr)[-3000:]
    main = r["params"][MAIN_PER_RANK[app]]
    row.update(seconds=r["seconds"], main_per_rank=main,
               rate=main / r["seconds"] if r["seconds"] > 0 else 0.0, result=r)
    return row


def ratio(x, y):
    return x / y if x and y else None


def fmt(v, width, digits=2):
    return f"{v:>{width}.{digits}f}" if v is not None else f"{'-':>{width}}"


def table(summary, libraries):
    head = f"{'app':<13}{'ranks':>5}" + "".join(f"{lib:>14}" for lib in libraries) + \
        f"{'inl/best':>10}{'inl/ygm':>9}{'inl/conv':>9}"
    lines = ["M updates/s per rank (median); inl/X: ferry_inline's rate over X's", head, "-" * len(head)]
    for s in summary:
        line = f"{s['app']:<13}{s['ranks']:>5}"
        for lib in libraries:
            v = s["rates"].get(lib)
            mark = "" if lib not in s["oversubscribed"] else "*"
            line += (f"{v / 1e6:>13.2f}{mark or ' '}" if v is not None else f"{'-':>13} ")
        line += fmt(s["inline_over_best_peer"], 10) + fmt(s["inline_over_ygm"], 9) + fmt(s["inline_over_convey"], 9)
        lines.append(line)
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", "--build-dir", dest="build", default="build", help="Ferry's build directory")
    p.add_argument("--peers-build", default=None,
                   help="where the peer binaries are (default: BUILD/bench/route/peers)")
    p.add_argument("--apps", default=",".join(APPS))
    p.add_argument("--ranks", default="2,4,8", help="application ranks (Ferry's process mode adds its router)")
    p.add_argument("--libraries", default=",".join(LIBRARIES))
    p.add_argument("--size", choices=list(SIZES), default="default")
    p.add_argument("--repeats", type=int, default=3, help="runs per point; the median counts")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--work", type=int, default=0, help="--work-per-message for every run")
    p.add_argument("--work-table-mib", type=int, default=64)
    p.add_argument("--cpus", type=int, default=os.cpu_count(), help="cores to place ranks on (0..cpus-1)")
    p.add_argument("--mpirun", default="mpirun")
    p.add_argument("--mpirun-args", default="", help="extra mpirun arguments")
    p.add_argument("--timeout", type=int, default=300, help="seconds per run")
    p.add_argument("--json-out", default="peers-results.json")
    a = p.parse_args()
    a.peers_build = a.peers_build or os.path.join(a.build, "bench", "route", "peers")
    a.taskset = shutil.which("taskset")
    apps = [x for x in a.apps.split(",") if x]
    libraries = [x for x in a.libraries.split(",") if x]
    for x in apps:
        if x not in APPS:
            raise BenchError(f"unknown app {x}: {', '.join(APPS)}")
    for x in libraries:
        if x not in LIBRARIES:
            raise BenchError(f"unknown library {x}: {', '.join(LIBRARIES)}")
    if a.repeats < 1:
        raise BenchError("--repeats must be at least 1")
    if a.taskset is None:
        print("note: no taskset here: the peers' ranks run unpinned", file=sys.stderr)

    # Which (library, app) can run: skip missing binaries, once, with the reason.
    available = {}
    for lib in libraries:
        missing = [binary(a, lib, app) for app in apps if not os.access(binary(a, lib, app), os.X_OK)]
        for app in apps:
            available[(lib, app)] = os.access(binary(a, lib, app), os.X_OK)
        if missing:
            how = {"ygm": "configure with -DFERRY_YGM_INCLUDE=<ygm>/include",
                   "convey": "configure with -DFERRY_CONVEY_PREFIX=<conveyors' install prefix>"}.get(
                       lib, f"build Ferry's route apps in {a.build}")
            print(f"skipping {lib} for {len(missing)} app(s): {', '.join(missing)} not found ({how})",
                  file=sys.stderr)
    if not any(available.values()):
        raise BenchError("no binary to run")

    runs, summary = [], []
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="peers_bench.") as tmp:
        for ranks in int_list(a.ranks):
            for app in apps:
                libs = [lib for lib in libraries if available[(lib, app)]]
                point = []
                for repeat in range(a.repeats):
                    for lib in libs:
                        r = run_one(a, lib, app, ranks, repeat, tmp)
                        point.append(r)
                        if "error" in r:
                            print(f"  {app}-{lib}-np{ranks} #{repeat}: FAILED: {r['error']}", flush=True)
                            if "output" in r:
                                print("    " + "\n    ".join(r["output"].strip().splitlines()[-8:]), flush=True)
                        else:
                            print(f"  {app}-{lib}-np{ranks} #{repeat}: {r['seconds']:.3f} s, "
                                  f"{r['rate'] / 1e6:.2f} M/s per rank"
                                  f"{'' if r['pinned'] else ' (NOT pinned: oversubscribed)'}", flush=True)
                runs += point
                rates, spread, over = {}, {}, []
                for lib in libs:
                    ok = [r["rate"] for r in point if r["library"] == lib and "error" not in r]
                    if ok:
                        rates[lib] = statistics.median(ok)
                        spread[lib] = [min(ok), max(ok)]
                    if any(not r["pinned"] for r in point if r["library"] == lib):
                        over.append(lib)
                inline = rates.get("ferry_inline")
                peers = [rates[x] for x in PEERS if x in rates]
                summary.append({
                    "app": app, "ranks": ranks, "rates": rates, "rate_min_max": spread, "oversubscribed": over,
                    "inline_over_best_peer": ratio(inline, max(peers) if peers else None),
                    "inline_over_ygm": ratio(inline, rates.get("ygm")),
                    "inline_over_convey": ratio(inline, rates.get("convey")),
                })
    print()
    print(table(summary, libraries))
    if any(s["oversubscribed"] for s in summary):
        print(f"\n* ran oversubscribed and unpinned (more ranks than --cpus {a.cpus}): those rates say little.")
    failed = [f"{r['app']}-{r['library']}-np{r['ranks']} #{r['repeat']}" for r in runs if "error" in r]
    if failed:
        print(f"\nFAILED runs: {', '.join(failed)}")
    out = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpus": a.cpus,
        "size": a.size,
        "sizes": SIZES[a.size],
        "args": vars(a),
        "elapsed_s": time.time() - t0,
        "binaries": {f"{lib}/{app}": binary(a, lib, app) for (lib, app), ok in available.items() if ok},
        "summary": summary,
        "runs": runs,
    }
    with open(a.json_out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"\nwrote {a.json_out} ({time.time() - t0:.0f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as e:
        print(f"peers_bench: {e}", file=sys.stderr)
        sys.exit(1)
