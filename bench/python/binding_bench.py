#!/usr/bin/env python3
"""The Python module against the C++ API, in the same run, against the same agent.

For each block size, `ferry-kv-bench` (C++) and the same loop through `ferry`
(Python) push and pull `--total-bytes` in requests of `--batch-bytes`,
alternating which goes first, `--runs` times each. The result is the ratio of
the Python path's GB/s to the C++ path's (issue 20's target: within 5% from
1 MiB). Memory is GPU memory (torch CUDA tensors) where torch and a GPU are
present, else host memory (NumPy). Prints a table and writes JSON.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import ferry


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kv-bench", required=True, help="the ferry-kv-bench binary (bench/kv/ in the build)")
    p.add_argument("--endpoint", required=True, help="a running agent, e.g. unix:ferry.agent")
    p.add_argument("--block-sizes", default="1048576,4194304,33554432", help="bytes, comma-separated")
    p.add_argument("--total-bytes", type=int, default=16 << 30)
    p.add_argument("--batch-bytes", type=int, default=256 << 20)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--mem", choices=["auto", "vram", "dram"], default="auto")
    p.add_argument("--json-out", default="binding_bench.json")
    return p.parse_args()


def gpu_available():
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


def make_buffer(nbytes, mem):
    if mem == "vram":
        import torch
        return torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_(0, 256)
    import numpy as np
    return np.random.default_rng(0).integers(0, 256, size=nbytes, dtype=np.uint8)


def python_run(agent, buf, block, batch, iterations, op, prepared):
    """GB/s of `iterations` requests of `batch` blocks. prepared: the blocks
    resolved once into a DescList, as the C++ path resolves its descriptors
    once; else a list of buffers, resolved on every call."""
    views = [buf[i * block:(i + 1) * block] for i in range(batch)]
    if prepared:
        views = ferry.DescList(views, writable=True)
    keys = [f"pybench/{block}/{i}" for i in range(batch)]
    start = time.perf_counter()
    for _ in range(iterations):
        (agent.push if op == "push" else agent.pull)(keys, views).wait()
    seconds = time.perf_counter() - start
    return block * batch * iterations / seconds / 1e9


def cpp_run(args, block, mem, out_dir):
    out = os.path.join(out_dir, f"kv-{block}.json")
    subprocess.run([args.kv_bench, "--endpoint", args.endpoint, "--block-sizes", str(block),
                    "--total-bytes", str(args.total_bytes), "--batch-bytes", str(args.batch_bytes), "--mem", mem,
                    "--no-baselines", "--json-out", out, "-l", "30"], check=True, stdout=subprocess.DEVNULL)
    rows = json.load(open(out))["rows"]
    pick = lambda what: next(r["gbps"] for r in rows if r["what"].startswith(what) and "plain" not in r["what"])
    return {"push": pick("ferry push"), "pull": pick("ferry pull")}


def main():
    args = parse_args()
    mem = args.mem if args.mem != "auto" else ("vram" if gpu_available() else "dram")
    blocks = [int(b) for b in args.block_sizes.split(",")]
    agent = ferry.Agent(args.endpoint, name="binding-bench")
    buf = make_buffer(args.batch_bytes, mem)
    agent.register(buf)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for block in blocks:
            batch = max(1, args.batch_bytes // block)
            iterations = max(1, args.total_bytes // (block * batch))
            py = {"push": [], "pull": []}
            py_each = {"push": [], "pull": []}
            cpp = {"push": [], "pull": []}
            for run in range(args.runs):
                order = ["cpp", "py"] if run % 2 == 0 else ["py", "cpp"]
                for side in order:
                    if side == "cpp":
                        r = cpp_run(args, block, mem, tmp)
                        cpp["push"].append(r["push"])
                        cpp["pull"].append(r["pull"])
                    else:
                        for op in ("push", "pull"):
                            py[op].append(python_run(agent, buf, block, batch, iterations, op, True))
                            py_each[op].append(python_run(agent, buf, block, batch, iterations, op, False))
            for op in ("push", "pull"):
                c, p, e = (statistics.median(x[op]) for x in (cpp, py, py_each))
                rows.append({"block_bytes": block, "batch": batch, "op": op, "cpp_gbps": c, "python_gbps": p,
                             "ratio": p / c, "python_buffers_gbps": e, "buffers_ratio": e / c,
                             "cpp_runs": cpp[op], "python_runs": py[op], "python_buffers_runs": py_each[op]})
    print(f"\n{'block (B)':>10} {'batch':>6} {'op':>5} {'C++ GB/s':>9} {'Py DescList':>12} {'ratio':>6}"
          f" {'Py buffers':>11} {'ratio':>6}")
    for r in rows:
        print(f"{r['block_bytes']:>10} {r['batch']:>6} {r['op']:>5} {r['cpp_gbps']:>9.2f} {r['python_gbps']:>12.2f} "
              f"{r['ratio']:>6.3f} {r['python_buffers_gbps']:>11.2f} {r['buffers_ratio']:>6.3f}")
    json.dump({"mem": mem, "runs": args.runs, "total_bytes": args.total_bytes, "batch_bytes": args.batch_bytes,
               "rows": rows}, open(args.json_out, "w"), indent=2)
    print(f"wrote {args.json_out}")
    agent.close()


if __name__ == "__main__":
    sys.exit(main())
