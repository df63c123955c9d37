#!/usr/bin/env python3
"""Where one batch of the CUDA model spends its GPU time, kernel by kernel.

Runs ferry-model-bench on one shape under Nsight Compute (ncu), which times
each kernel on its own (--clock-control none: the card's clocks as they are),
skips the warm-up's launches, keeps one batch's worth, and prints the time of
each kind of kernel (cuBLAS products, attention, LayerNorm, GELU, embedding,
pooling) with its share of the batch. The sum is the GPU's busy time for a
batch with the kernels run one at a time: it leaves out launch gaps and the
host's copies, so it is below the batch's wall time.

    kernel_profile.py --bench build/bench/infer/ferry-model-bench --model DIR \\
        --batch 128 --length 128 [--ncu ncu] [--json FILE]
"""
import argparse
import csv
import io
import json
import os
import subprocess
import sys

FAMILIES = [  # (label, substrings of the kernel's name), first match wins
    ("products (cuBLAS)", ("gemm", "sm90_xmma", "cutlass", "ampere", "nvjet", "sm80")),
    ("attention", ("attention",)),
    ("bias+residual+LayerNorm", ("bias_residual_norm",)),
    ("bias+GELU", ("bias_gelu",)),
    ("embedding+LayerNorm", ("embed_norm",)),
    ("pooling", ("pool", "to_f32")),
]


def family(name):
    low = name.lower()
    for label, keys in FAMILIES:
        if any(k in low for k in keys):
            return label
    return "other: " + name[:40]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", required=True, help="ferry-model-bench")
    p.add_argument("--model", required=True, help="the model's folder")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--length", type=int, default=128)
    p.add_argument("--precision", default="f16")
    p.add_argument("--skip", type=int, default=1500,
                   help="launches to skip: the model's warm-up, which times the products' candidate "
                        "algorithms (about 1,000 launches), and its first batches")
    p.add_argument("--count", type=int, default=110, help="launches to time: at least two batches' worth")
    p.add_argument("--ncu", default="ncu")
    p.add_argument("--json", dest="json_path")
    args = p.parse_args()

    cmd = [args.ncu, "--clock-control", "none", "--metrics", "gpu__time_duration.sum", "--csv",
           "--launch-skip", str(args.skip), "--launch-count", str(args.count),
           args.bench, "--model", args.model, "--device", "cuda", "--precision", args.precision,
           "--batches", str(args.batch), "--lengths", str(args.length), "--seconds", "1"]
    # Graphs off: ncu then sees each kernel as its own launch.
    env = dict(os.environ, FERRY_CUDA_GRAPHS="0")
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(out.stdout[-2000:] + out.stderr[-2000:])
        sys.exit(f"ncu failed with {out.returncode}")
    lines = out.stdout.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        sys.exit("no CSV in ncu's output:\n" + out.stdout[-2000:])
    kernels = []
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "ns")
        scale = {"ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "nsecond": 1e-3}.get(unit, 1e-3)
        kernels.append((row["Kernel Name"], value * scale))
    # One batch: from the first embedding kernel to the next one.
    starts = [i for i, (name, _) in enumerate(kernels) if "embed_norm" in name]
    if len(starts) >= 2:
        kernels = kernels[starts[0]:starts[1]]
    elif starts:
        kernels = kernels[starts[0]:]
    totals = {}
    for name, us in kernels:
        f = family(name)
        n, t = totals.get(f, (0, 0.0))
        totals[f] = (n + 1, t + us)
    whole = sum(t for _, t in totals.values())
    print(f"one batch of {args.batch} x {args.length} tokens, {args.precision}: {len(kernels)} kernels, "
          f"{whole:.1f} us of GPU time")
    print(f"  {'kernels':<26} {'launches':>8} {'us':>10} {'share':>7}")
    for f, (n, t) in sorted(totals.items(), key=lambda kv: -kv[1][1]):
        print(f"  {f:<26} {n:>8} {t:>10.1f} {100 * t / whole:>6.1f}%")
    if args.json_path:
        with open(args.json_path, "w") as fh:
            json.dump({"batch": args.batch, "length": args.length, "precision": args.precision,
                       "kernels": len(kernels), "gpu_us": whole,
                       "families": {f: {"launches": n, "us": t} for f, (n, t) in totals.items()},
                       "each": [{"kernel": k, "us": us} for k, us in kernels]}, fh, indent=1)


if __name__ == "__main__":
    main()
