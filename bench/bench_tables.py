#!/usr/bin/env python3
"""Prints the Markdown tables of docs/bench/ from the benchmarks' JSON, so the
documents carry exactly the measured numbers.
Usage: bench_tables.py tcp FILE.json | launch FILE.json | scaling FILE.json... | kv FILE.json
       | route FILE.json (route_bench.py's route-results.json)"""
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
    """ferry-kv-bench: push/pull through the agent against the application's own
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


def route(path):
    """route_bench.py: one row per setting with each mode's speedup over inline (same
    driver run), then every run with its time, rate and per-message costs. "engine
    ns/msg" is the applications' time in the engine (comm_s, summed over ranks) per
    message; "host cpu ns/msg" counts every application process and router."""
    d = json.load(open(path))
    rows = d["rows"]
    modes = list(dict.fromkeys(r["mode_label"] for r in rows if r["mode_label"] != "inline"))
    points = list(dict.fromkeys((r["app"], r["ranks"], r["work_per_message"]) for r in rows))
    by = {(r["app"], r["ranks"], r["work_per_message"], r["mode_label"]): r for r in rows}

    def per_msg(r, key):
        return r[key] / r["messages"] * 1e9

    def engine(r):
        return per_msg(r, "comm_s")

    def rank_ns(r):  # rank time (ranks x the phase) per message
        return r["ranks"] * r["seconds"] / r["messages"] * 1e9

    # (app, work, inline row, process row) where both ran.
    pairs = [(app, work, by[(app, ranks, work, "inline")], by[(app, ranks, work, "process")])
             for app, ranks, work in points if (app, ranks, work, "process") in by]

    print("| setting | work | mem/comm | segments / hop | busiest / mean | inline s | "
          + " | ".join(modes) + " | inline engine ns/msg | process engine ns/msg |")
    print("|---|---|---|---|---|---|" + "---|" * len(modes) + "---|---|")
    for app, ranks, work in points:
        base = by[(app, ranks, work, "inline")]
        params = base.get("params", {})
        cells = []
        for m in modes:
            r = by.get((app, ranks, work, m))
            cells.append(f"{r['speedup']:.2f}" if r else "")
        proc = by.get((app, ranks, work, "process"))
        print(f"| {app} | {work} | {base['mem_comm_ratio']:.1f} | {params.get('segments_per_hop', float('nan')):.1f} "
              f"| {params.get('imbalance', float('nan')):.2f} | {base['seconds']:.3f} | " + " | ".join(cells)
              + f" | {engine(base):.0f} | " + (f"{engine(proc):.0f} |" if proc else " |"))
    print()
    # Where the ranks' time went, per message: rank time is ranks x the phase; "rest" is
    # rank time outside the engine (the application's own work and its handlers); the
    # ceiling is inline's time over inline's time less all of its engine time.
    print("| setting | work | inline rank ns/msg | inline engine ns/msg | ceiling | removed by process ns/msg "
          "| rest inline / process ns/msg | rest / removed | process |")
    print("|---|---|---|---|---|---|---|---|---|")
    for app, work, base, proc in pairs:
        rank_i = rank_ns(base)
        rest_i = rank_i - engine(base)
        rest_p = rank_ns(proc) - engine(proc)
        removed = engine(base) - engine(proc)
        print(f"| {app} | {work} | {rank_i:.0f} | {engine(base):.0f} ({engine(base) / rank_i:.0%}) "
              f"| {rank_i / rest_i:.2f} | {removed:.0f} | {rest_i:.0f} / {rest_p:.0f} "
              f"| {rest_i / removed if removed > 0 else float('inf'):.1f} | {proc['speedup']:.2f} |")
    print()
    if all("barrier_s" in r for r in rows):
        # Since c08b6c1 the engine time splits into the barrier (waiting at the
        # end of a phase for the slowest rank: load imbalance, and in inline mode
        # the last buffers' delivery) and the rest of it ("calls": the MPI share
        # in inline mode, the ring polling in process mode). The first ceiling
        # removes only inline's calls, the second its whole engine time.
        print("| setting | work | inline rank ns/msg | inline calls / barrier ns/msg | process calls / barrier "
              "ns/msg | handlers + own work inline / process ns/msg | ceiling: calls gone | ceiling: engine gone "
              "| process |")
        print("|---|---|---|---|---|---|---|---|---|")
        for app, work, base, proc in pairs:
            rank_i, rank_p = rank_ns(base), rank_ns(proc)
            calls_i = engine(base) - per_msg(base, "barrier_s")
            calls_p = engine(proc) - per_msg(proc, "barrier_s")
            print(f"| {app} | {work} | {rank_i:.0f} | {calls_i:.0f} / {per_msg(base, 'barrier_s'):.0f} "
                  f"| {calls_p:.0f} / {per_msg(proc, 'barrier_s'):.0f} "
                  f"| {rank_i - engine(base):.0f} / {rank_p - engine(proc):.0f} "
                  f"| {rank_i / (rank_i - calls_i):.2f} | {rank_i / (rank_i - engine(base)):.2f} "
                  f"| {proc['speedup']:.2f} |")
        print()
    print("| setting | work | mode | s | runs' s (min-max) | M msg/s | speedup | host cpu ns/msg | engine ns/msg |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        rep = r.get("repeat_seconds", [r["seconds"]])
        print(f"| {r['app']} | {r['work_per_message']} | {r['mode_label']} | {r['seconds']:.3f} "
              f"| {min(rep):.3f}-{max(rep):.3f} | {r['msgs_per_s'] / 1e6:.2f} | **{r['speedup']:.2f}** "
              f"| {r['cpu_ns_per_msg']:.0f} | {engine(r):.0f} |")


if __name__ == "__main__":
    kind, files = sys.argv[1], sys.argv[2:]
    {"tcp": lambda: tcp(files[0]), "launch": lambda: launch(files[0]), "scaling": lambda: scaling(files),
     "kv": lambda: kv(files[0]), "route": lambda: route(files[0])}[kind]()
