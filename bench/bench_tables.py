#!/usr/bin/env python3
"""Prints the Markdown tables of docs/bench/ from the benchmarks' JSON, so the
documents carry exactly the measured numbers.
Usage: bench_tables.py tcp FILE.json | launch FILE.json | scaling FILE.json... | kv FILE.json"""
import json
import sys


def tcp(path):
    d = json.load(open(path))
    print("| size | conns | echo kop/s | ferry kop/s | ratio | echo p50/p99 µs | ferry p50/p99 µs "
          "| w1 p50 echo | w1 p50 ferry | Δ p50 µs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in d["results"]:
        e, f = r["echo"], r["ferry"]
        el, fl = e["load"], f["load"]
        d50 = f["w1"]["latency_us"]["p50"] - e["w1"]["latency_us"]["p50"]
        print(f"| {r['size']} | {r['connections']} | {el['ops_per_s'] / 1e3:.1f} | {fl['ops_per_s'] / 1e3:.1f} "
              f"| **{fl['ops_per_s'] / el['ops_per_s']:.3f}** "
              f"| {el['latency_us']['p50']:.1f}/{el['latency_us']['p99']:.1f} "
              f"| {fl['latency_us']['p50']:.1f}/{fl['latency_us']['p99']:.1f} "
              f"| {e['w1']['latency_us']['p50']:.2f} | {f['w1']['latency_us']['p50']:.2f} | **{d50:+.2f}** |")


def launch(path):
    d = json.load(open(path))
    f = d["floor"]["p50_us"]
    print("| method | rtt p50 | rtt p99 | p50 / floor |")
    print("|---|---|---|---|")
    for name, m in d["methods"].items():
        ratio = "(no PCIe)" if name == "cpu" else f"{m['rtt_p50_us'] / f:.2f}"
        print(f"| {name} | {m['rtt_p50_us']:.2f} µs | {m['rtt_p99_us']:.2f} µs | {ratio} |")
    print()
    bursts = None
    for name, m in d["methods"].items():
        for size, points in m["throughput"].items():
            if bursts is None:
                bursts = sorted(points, key=int)
                print("| method / size | " + " | ".join("b" + b for b in bursts) + " |")
                print("|---|" + "---|" * len(bursts))
            print(f"| {name}/{size} | " + " | ".join(f"{points[b]['msgs_per_s'] / 1e6:.2f}" for b in bursts) + " |")


def scaling(paths):
    print("| channels (blocks) | rtt p50 | p50 / floor | Mmsg/s (64 B, b1024) |")
    print("|---|---|---|---|")
    for p in paths:
        d = json.load(open(p))
        m = d["methods"]["persistent"]
        rate = list(m["throughput"]["64"].values())[0]["msgs_per_s"]
        print(f"| {d['channels']} | {m['rtt_p50_us']:.2f} µs | {m['rtt_p50_us'] / d['floor']['p50_us']:.2f} | {rate / 1e6:.2f} |")


def kv(path):
    """ferry kv bench: push/pull through the agent against the application's own
    copies of the same blocks in the same run (batch API where there is a GPU)."""
    d = json.load(open(path))
    rows = {(r["what"], r["block_bytes"]): r for r in d["rows"]}
    base = "cudaMemcpyBatchAsync" if d["on_gpu"] else "memcpy loop"
    loop = "cudaMemcpyAsync loop" if d["on_gpu"] else None
    print(f"| block | batch | push GB/s | {base} D2H | push / batch API | pull GB/s | {base} H2D "
          f"| pull / batch API |" + (" loop D2H / H2D |" if loop else ""))
    print("|---|---|---|---|---|---|---|---|" + ("---|" if loop else ""))
    for block in sorted({b for _, b in rows}):
        push, pull = rows[("ferry push", block)], rows[("ferry pull", block)]
        d2h, h2d = rows.get((base + " D2H", block)), rows.get((base + " H2D", block))
        line = (f"| {block >> 10} KiB | {push['batch']} | **{push['gbps']:.1f}** | {d2h['gbps']:.1f} "
                f"| {push['gbps'] / d2h['gbps']:.2f} | **{pull['gbps']:.1f}** | {h2d['gbps']:.1f} "
                f"| {pull['gbps'] / h2d['gbps']:.2f} |") if d2h else (
                f"| {block >> 10} KiB | {push['batch']} | **{push['gbps']:.1f}** | | | **{pull['gbps']:.1f}** | | |")
        if loop:
            ld, lh = rows.get((loop + " D2H", block)), rows.get((loop + " H2D", block))
            line += f" {ld['gbps']:.1f} / {lh['gbps']:.1f} |" if ld else " |"
        print(line)


if __name__ == "__main__":
    kind, files = sys.argv[1], sys.argv[2:]
    {"tcp": lambda: tcp(files[0]), "launch": lambda: launch(files[0]), "scaling": lambda: scaling(files),
     "kv": lambda: kv(files[0])}[kind]()
