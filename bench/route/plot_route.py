#!/usr/bin/env python3
"""Plots route_bench.py results: the speedup of thread and process mode over
inline against the memory-to-communication ratio (bytes of the application's
own memory traffic per byte of message payload), one panel per swept app, at
the largest swept rank count. Usage: plot_route.py route-results.json out.png
(needs matplotlib)."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main() -> int:
    src, dst = sys.argv[1], sys.argv[2]
    rows = json.load(open(src))["rows"]
    swept = {}
    for r in rows:
        swept.setdefault((r["app"], r["ranks"]), set()).add(r["work_per_message"])
    panels = sorted({app for (app, ranks), works in swept.items() if len(works) > 1})
    if not panels:
        print("no sweep in the results: nothing to plot")
        return 1
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
    for ax, app in zip(axes[0], panels):
        ranks = max(rk for (a, rk), works in swept.items() if a == app and len(works) > 1)
        modes = sorted({r["mode_label"] for r in rows if r["app"] == app and r["ranks"] == ranks} - {"inline"})
        for mode, marker in zip(modes, "so^vD<>p*"):
            pts = sorted((r["mem_comm_ratio"], r["speedup"]) for r in rows
                         if r["app"] == app and r["ranks"] == ranks and r["mode_label"] == mode)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, label=f"{mode} / inline")
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.axhline(1.3, color="grey", linewidth=0.8, linestyle=":", label="target 1.3x")
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_xlim(left=0)
        ax.set_xlabel("memory-to-communication ratio (app DRAM bytes per message byte)")
        ax.set_ylabel("speedup over inline")
        pinned = all(r.get("pinned", True) for r in rows if r["app"] == app and r["ranks"] == ranks)
        ax.set_title(f"{app}, {ranks} ranks" + ("" if pinned else " (OVERSUBSCRIBED: not a measurement)"))
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    print(f"wrote {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
