#!/usr/bin/env python3
"""Plots l2fwd_bench.py JSON in the style of the DPDK gpudev article's Figure 14:
forwarding rate against burst, one line per mode, one panel per packet size,
with dpdk-testpmd's macswap dashed. Usage: plot_l2fwd.py bench.json out.png
[--gbps] (needs matplotlib)."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    src, dst = sys.argv[1], sys.argv[2]
    gbps = "--gbps" in sys.argv[3:]
    key = "gbps" if gbps else "mpps"
    data = json.load(open(src))
    points = {}  # (mode, size) -> {burst: value}
    for name, r in data["ferry"].items():
        mode, size, burst = name.split("/")
        if key in r:
            points.setdefault((mode, int(size)), {})[int(burst)] = r[key]
    for name, r in data.get("testpmd", {}).items():
        size, burst = name.split("/")
        if key in r:
            points.setdefault(("testpmd macswap", int(size)), {})[int(burst)] = r[key]
    sizes = sorted({s for _, s in points})
    fig, axes = plt.subplots(1, len(sizes), figsize=(6 * len(sizes), 4.5), squeeze=False)
    for ax, size in zip(axes[0], sizes):
        for (mode, s), by_burst in sorted(points.items()):
            if s != size:
                continue
            bursts = sorted(by_burst)
            style = "--" if mode.startswith("testpmd") else "-"
            ax.plot(bursts, [by_burst[b] for b in bursts], style, marker="o", label=mode)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("burst (packets per list item)")
        ax.set_ylabel("Gbps" if gbps else "Mpps")
        ax.set_title(f"{size}-byte packets, net_null, one pipeline")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
