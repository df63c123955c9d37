#!/usr/bin/env python3
"""Plots `ferry-launch-bench` JSON: throughput against burst, one line per launch
method, one panel per message size (the DPDK gpudev article's Figure 14, for
Ferry's methods). Usage: plot_launch.py launch.json launch.png (needs matplotlib)."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main() -> int:
    src, dst = sys.argv[1], sys.argv[2]
    data = json.load(open(src))
    methods = data.get("methods", {})
    sizes = sorted({int(s) for m in methods.values() for s in m.get("throughput", {})})
    fig, axes = plt.subplots(1, len(sizes), figsize=(5 * len(sizes), 4), squeeze=False)
    for ax, size in zip(axes[0], sizes):
        for name, m in methods.items():
            points = m.get("throughput", {}).get(str(size), {})
            bursts = sorted(int(b) for b in points)
            ax.plot(bursts, [points[str(b)]["msgs_per_s"] / 1e6 for b in bursts], marker="o", label=name)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("burst (messages posted at once)")
        ax.set_ylabel("M messages/s")
        ax.set_title(f"{size}-byte messages")
        ax.grid(True, alpha=0.3)
        ax.legend()
    floor = data.get("floor", {}).get("p50_us")
    fig.suptitle(f"ferry-launch-bench on {data.get('gpu')} ({data.get('channels')} channels)"
                 + (f", floor p50 {floor:.2f} us" if floor else ""))
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    print(f"wrote {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
