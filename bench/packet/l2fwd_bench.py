#!/usr/bin/env python3
"""ferry l2fwd against stock DPDK forwarding, through net_null (docs/bench/packet.md).

net_null is a source that never runs dry and a sink that takes everything, so a
run measures the forwarding path alone: RX, the worker (CPU or a GPU launch
method), TX. For each packet size, burst and mode, `ferry l2fwd` runs for
--seconds and is stopped with SIGINT; its JSON gives Mpps, Gbps and the
per-burst latency. The baseline, in the same run, is dpdk-testpmd's macswap
forwarding (one core doing RX, the swap and TX), read from its per-second
statistics. Prints a table per size and writes everything as JSON.
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time


def run_for(cmd, seconds):
    """Runs cmd for `seconds`, then SIGINT; its exit status and output."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         stdin=subprocess.DEVNULL)
    time.sleep(seconds)
    p.send_signal(signal.SIGINT)
    try:
        text, _ = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        text, _ = p.communicate()
    return p.returncode, text


def run_ferry(args, mode, burst, size, workdir):
    out = os.path.join(workdir, f"ferry-{mode}-{burst}-{size}.json")
    cmd = [args.ferry, "l2fwd", "--no-huge", "-m", str(args.eal_mem), "--no-pci", "--no-shconf",
           "--file-prefix", f"ferry-bench-{os.getpid()}", "--lcores", args.lcores,
           "--vdev", f"net_null0,size={size},copy={args.copy}", "--",
           "--mode", mode, "--burst", str(burst), "--items", str(args.items), "--gpu-lanes", str(args.gpu_lanes),
           "--stats-interval", "0",
           "--json-out", out]
    code, text = run_for(cmd, args.seconds)
    if code != 0 or not os.path.exists(out):
        return {"error": f"exit {code}: {text[-800:]}"}
    with open(out) as f:
        stats = json.load(f)
    t = stats["total"]
    return {"mpps": t["tx_mpps"], "gbps": t["tx_gbps"], "dropped": t["dropped"],
            "latency_p50_us": t["burst_latency_p50_us"], "latency_p99_us": t["burst_latency_p99_us"],
            "seconds": stats["seconds"], "mbufs_not_returned": stats.get("mbufs_not_returned")}


def run_testpmd(args, burst, size):
    cmd = [args.testpmd, "--no-huge", "-m", str(args.eal_mem), "--no-pci", "--no-shconf",
           "--file-prefix", f"testpmd-bench-{os.getpid()}", "-l", "0-1"]
    for d in args.pmd:
        cmd += ["-d", d]
    cmd += ["--vdev", f"net_null0,size={size},copy={args.copy}", "--", "--forward-mode=macswap",
            f"--burst={burst}", "--stats-period", "1", "--auto-start", "--total-num-mbufs=16384"]
    code, text = run_for(cmd, args.seconds + 2)  # its first second is start-up
    if args.log_dir:
        with open(os.path.join(args.log_dir, f"testpmd-{size}-{burst}.log"), "w") as f:
            f.write(text)
    pps = [int(x) for x in re.findall(r"Tx-pps:\s+(\d+)", text)]
    pps = [x for x in pps if x > 0]
    if len(pps) > 2:
        pps = pps[1:]  # the first second includes start-up
    if not pps:
        return {"error": f"exit {code}: {text[-800:]}"}
    mpps = statistics.median(pps) / 1e6
    return {"mpps": mpps, "gbps": mpps * 1e6 * size * 8 / 1e9, "samples": len(pps)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ferry", default="build/apps/ferry/ferry")
    ap.add_argument("--testpmd", default="", help="dpdk-testpmd for the baseline; empty: none")
    ap.add_argument("--pmd", action="append", default=[], help="a PMD .so testpmd loads (-d); repeatable")
    ap.add_argument("--modes", default="cpu,none,burst,persistent,graph,memops")
    ap.add_argument("--bursts", default="16,32,64,128")
    ap.add_argument("--sizes", default="64,1024")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--items", type=int, default=64, help="communication list items per pipeline")
    ap.add_argument("--gpu-lanes", type=int, default=4, help="GPU modes: items of a pipeline in work at once")
    ap.add_argument("--copy", type=int, default=1, help="net_null copies packet data on RX and TX (1) or not (0)")
    ap.add_argument("--lcores", default="0-2", help="EAL lcores for ferry l2fwd (--lcores): main, RX, TX")
    ap.add_argument("--eal-mem", type=int, default=2048, help="MiB of EAL memory (--no-huge)")
    ap.add_argument("--repeats", type=int, default=1,
                    help="runs per point, in rotating order; the point is their median (the rest are kept in 'runs')")
    ap.add_argument("--out", default="l2fwd-bench.json")
    ap.add_argument("--log-dir", default="", help="keep each testpmd run's output here")
    args = ap.parse_args()

    modes = args.modes.split(",")
    bursts = [int(b) for b in args.bursts.split(",")]
    sizes = [int(s) for s in args.sizes.split(",")]
    results = {"config": vars(args), "ferry": {}, "testpmd": {}}
    runs = {}  # (kind, key) -> [results]
    with tempfile.TemporaryDirectory() as workdir:
        for rep in range(args.repeats):
            for size in sizes:
                for burst in bursts:
                    # Rotate the order, so that no mode always runs first.
                    order = (["testpmd"] if args.testpmd else []) + modes
                    order = order[rep % len(order):] + order[:rep % len(order)]
                    for mode in order:
                        if mode == "testpmd":
                            key, r = ("testpmd", f"{size}/{burst}"), run_testpmd(args, burst, size)
                        else:
                            key, r = ("ferry", f"{mode}/{size}/{burst}"), run_ferry(args, mode, burst, size, workdir)
                        runs.setdefault(key, []).append(r)
                        print(f"{mode} size {size} burst {burst}: {r}", file=sys.stderr, flush=True)
    for (kind, key), rs in runs.items():
        good = sorted((r for r in rs if "error" not in r), key=lambda r: r["mpps"])
        best = dict(good[len(good) // 2]) if good else dict(rs[0])
        best["runs"] = rs
        results[kind][key] = best
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)

    for size in sizes:
        print(f"\n{size}-byte packets, Mpps (ratio to testpmd macswap on one core)")
        print("mode".ljust(12) + "".join(f"burst {b}".rjust(18) for b in bursts))
        base = {b: results["testpmd"].get(f"{size}/{b}", {}).get("mpps") for b in bursts}
        if args.testpmd:
            print("testpmd".ljust(12) + "".join(
                (f"{base[b]:.2f}" if base[b] else "error").rjust(18) for b in bursts))
        for mode in modes:
            cells = []
            for b in bursts:
                r = results["ferry"][f"{mode}/{size}/{b}"]
                if "error" in r:
                    cells.append("error")
                elif base[b]:
                    cells.append(f"{r['mpps']:.2f} ({r['mpps'] / base[b]:.2f}x)")
                else:
                    cells.append(f"{r['mpps']:.2f}")
            print(mode.ljust(12) + "".join(c.rjust(18) for c in cells))
    print(f"\nJSON: {args.out}")


if __name__ == "__main__":
    main()
