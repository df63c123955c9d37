#!/usr/bin/env python3
"""Ferry's LMCache connector against LMCache's own local-disk and Redis
backends, through LMCache's L2 adapter layer, in the same run.

Every backend is built by LMCache itself from an --l2-adapter JSON
(parse_args_to_l2_adapters_config, create_l2_adapter), and driven through the
adapter API that LMCache's storage manager uses: submit_store_task, then the
store eventfd and pop_completed_store_tasks; submit_load_task, then the load
eventfd and query_load_result. Chunks are 32 MiB (256 tokens of a
Llama-3.1-8B KV cache: 32 layers x 2 x 8 heads x 128 x bf16) in one L1 buffer
that LMCache itself allocates as its multiprocess server does (POSIX shm,
pinned; --l1 pinned: torch's pinned memory instead); batches of 1, 8 and 32 chunks; every loaded byte is checked.

Backends (the same disk for both file backends, the same redis-server for both
Redis ones):
  ferry-file-direct   ferry agent --tier file:DIR,direct   vs  lmcache-fs-direct  (fs_native, use_odirect)
  ferry-file          ferry agent --tier file:DIR          vs  lmcache-fs         (fs_native, buffered)
                                                           and lmcache-fs-aio[-direct]  (the "fs" adapter: Python, aiofiles)
  ferry-redis         ferry agent --tier redis://...       vs  lmcache-resp       (LMCache's C++ RESP client)
Both sides get the same number of threads (--workers): LMCache's backends as
num_workers (fs_native's default is 4), Ferry's agent as its lanes (-q).
--lmcache-workers sets LMCache's alone.
Rounds rotate the backends, so none always runs first; each round measures
--repeats batches per size and backend. Prints a table, writes JSON.
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

CHUNK = 32 << 20


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ferry", required=True, help="the ferry binary")
    p.add_argument("--dir", default="/var/tmp/ferry-l2-bench", help="where both file backends write (one disk)")
    p.add_argument("--redis-server", default="redis-server")
    p.add_argument("--batches", default="1,8,32", help="chunks per batch")
    p.add_argument("--rounds", type=int, default=4, help="rounds per batch size and backend")
    p.add_argument("--repeats", type=int, default=3,
                   help="batches per batch size, backend and round (each its own keys): one batch of 8 chunks "
                        "lasts about 20 ms, so a point needs several to hold still")
    p.add_argument("--chunk-bytes", type=int, default=CHUNK)
    p.add_argument("--backends", default="ferry-file-direct,lmcache-fs-direct,ferry-file,lmcache-fs,ferry-redis,lmcache-resp")
    p.add_argument("--ferry-file-opts", default=f",threads={os.cpu_count() or 8}",
                   help="appended to the Ferry file tier's spec. Default: threads= the machine's cores, so that the "
                        "tier's helper threads (which hash beside a lane's copy, or read part of an object, only "
                        "while cores are idle) may use every core; ,threads=8 gives it as many as fs_native's workers")
    p.add_argument("--workers", type=int, default=8,
                   help="threads on each side: LMCache's num_workers, and the agent's lanes (-q, with a staging "
                        "slot of one chunk each)")
    p.add_argument("--lmcache-workers", type=int, default=0,
                   help="LMCache's num_workers alone (0: --workers), e.g. 4, fs_native's default, to compare "
                        "each side at its defaults")
    p.add_argument("--ferry-stripes", type=int, default=0,
                   help="objects per chunk in Ferry's connector (its adapter_params' stripes; 0: its default)")
    p.add_argument("--agent-args", default="", help="more flags for ferry agent, comma-separated: -c,auto")
    p.add_argument("--agent-log", default="", help="append the agents' output (their phase times) here")
    p.add_argument("--l1", choices=["shm", "pinned"], default="shm",
                   help="the L1 buffer: POSIX shm pinned, as LMCache's multiprocess server allocates it by default "
                        "(--shm-name), or torch's pinned memory (anonymous)")
    p.add_argument("--pretouch-gib", type=int, default=0,
                   help="first write this much anonymous memory once and free it again: a fresh virtual machine's "
                        "first use of a page costs more than the copy into it, and the page cache's first pages "
                        "would otherwise pay that inside the measured batches")
    p.add_argument("--torch-threads", type=int, default=1,
                   help="threads for the benchmark's own torch work (filling chunks before a store, checking them "
                        "after a load; 0: torch's default, one per core). After a parallel fill, OpenMP's threads "
                        "spin on the cores for a while, which the store that starts next pays for")
    p.add_argument("--json-out", default="l2_bench.json")
    return p.parse_args()


class Agent:
    def __init__(self, ferry, tier, workdir, extra=(), log=None):
        self.endpoint = f"unix:ferry-l2-bench-{uuid.uuid4().hex[:8]}"
        ready = os.path.join(workdir, "agent.ready")
        if os.path.exists(ready):
            os.unlink(ready)
        self.proc = subprocess.Popen([ferry, "agent", "--endpoint", self.endpoint, "--tier", tier, "--gpu", "none",
                                      "--ready-file", ready, "-l", "50" if log else "40", *extra],
                                     stdout=log, stderr=subprocess.STDOUT if log else None)
        while not os.path.exists(ready):
            if self.proc.poll() is not None:
                raise SystemExit(f"ferry agent --tier {tier} failed to start")
            time.sleep(0.05)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)


def adapter_json(backend, ctx):
    if backend.startswith("ferry-"):
        params = {"endpoint": ctx["agent"].endpoint}
        if ctx["stripes"]:
            params["stripes"] = ctx["stripes"]
        return {"type": "native_plugin", "module_path": "ferry.lmcache", "class_name": "FerryL2Connector",
                "adapter_params": params}
    if backend.startswith("lmcache-fs-aio"):  # LMCache's "fs" adapter (Python, aiofiles), no worker count
        return {"type": "fs", "base_path": ctx["path"], "use_odirect": backend.endswith("direct")}
    if backend.startswith("lmcache-fs"):
        return {"type": "native_plugin", "module_path": "lmcache.lmcache_fs", "class_name": "LMCacheFSClient",
                "adapter_params": {"base_path": ctx["path"], "num_workers": ctx["workers"],
                                   "use_odirect": backend.endswith("direct")}}
    return {"type": "native_plugin", "module_path": "lmcache.lmcache_redis", "class_name": "LMCacheRedisClient",
            "adapter_params": {"host": "127.0.0.1", "port": ctx["redis_port"], "num_workers": ctx["workers"]}}


def flushall(port):
    """Empties the benchmark's redis-server between backends (no redis-cli needed)."""
    import socket
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"*1\r\n$8\r\nFLUSHALL\r\n")
        if not s.recv(64).startswith(b"+OK"):
            raise SystemExit("redis-server refused FLUSHALL")


def wait_fd(fd, timeout=300):
    from lmcache.cli.commands.bench.l2_adapter_bench.data import wait_eventfd
    if not wait_eventfd(fd, timeout=timeout):
        raise SystemExit("an L2 task did not complete in time")


def make_adapter(backend, ctx):
    from lmcache.v1.distributed.l2_adapters import create_l2_adapter
    from lmcache.v1.distributed.l2_adapters.config import parse_args_to_l2_adapters_config
    cfg = parse_args_to_l2_adapters_config(argparse.Namespace(l2_adapter=[json.dumps(adapter_json(backend, ctx))]))
    return create_l2_adapter(cfg.adapters[0])


def store_and_load(adapter, backend, batch, buf, args, key_base, fill):
    """One batch stored, then loaded into the buffer's other half and checked:
    (store seconds, load seconds), each from submit to completion."""
    import torch
    from lmcache.cli.commands.bench.l2_adapter_bench.data import make_memory_objects, make_object_keys

    keys = make_object_keys(batch, model_name="meta-llama/Llama-3.1-8B", key_offset=key_base)
    src = make_memory_objects(buf, batch, args.chunk_bytes, 0, fill_offset=fill)
    dst = make_memory_objects(buf, batch, args.chunk_bytes, batch * args.chunk_bytes, fill_offset=255)
    t0 = time.perf_counter()
    task = adapter.submit_store_task(keys, src)
    done = {}
    while task not in done:
        wait_fd(adapter.get_store_event_fd())
        done.update(adapter.pop_completed_store_tasks())
    store_s = time.perf_counter() - t0
    if not done[task].is_successful():
        raise SystemExit(f"{backend}: store of {batch} chunks failed")
    t0 = time.perf_counter()
    task = adapter.submit_load_task(keys, dst)
    bitmap = None
    while bitmap is None:
        wait_fd(adapter.get_load_event_fd())
        bitmap = adapter.query_load_result(task)
    load_s = time.perf_counter() - t0
    if bitmap.popcount() != batch:
        raise SystemExit(f"{backend}: loaded {bitmap.popcount()} of {batch} chunks")
    n = batch * args.chunk_bytes
    if not torch.equal(buf[:n], buf[n:2 * n]):
        raise SystemExit(f"{backend}: loaded bytes differ from the stored ones")
    return store_s, load_s


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q / 100 * (len(values) - 1))))]


def main():
    args = parse_args()
    import torch
    import lmcache
    if args.torch_threads > 0:
        torch.set_num_threads(args.torch_threads)
    backends = args.backends.split(",")
    batches = [int(b) for b in args.batches.split(",")]
    nbytes = 2 * max(batches) * args.chunk_bytes
    pinned = torch.cuda.is_available()
    if args.l1 == "shm":
        # LMCache's own allocation for its multiprocess server's L1 pool.
        import ctypes
        from lmcache.v1.memory_management import _resolve_pinned_alloc_free
        alloc = _resolve_pinned_alloc_free(shm_name=f"ferry_l2_bench_{os.getpid()}", size=nbytes)
        ptr = alloc.alloc()
        buf = torch.frombuffer((ctypes.c_uint8 * nbytes).from_address(ptr), dtype=torch.uint8)
    else:
        buf = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned)

    if args.pretouch_gib > 0:
        t0 = time.perf_counter()
        touched = torch.ones(args.pretouch_gib << 30, dtype=torch.uint8)
        del touched
        print(f"touched {args.pretouch_gib} GiB in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    work = tempfile.mkdtemp(prefix="ferry-l2-bench-")
    os.makedirs(args.dir, exist_ok=True)
    redis_port = 6390
    redis = subprocess.Popen([args.redis_server, "--port", str(redis_port), "--save", "", "--appendonly", "no",
                              "--protected-mode", "no"], stdout=subprocess.DEVNULL)
    time.sleep(0.5)
    samples = {(b, n): ([], []) for b in backends for n in batches}
    agent_log = open(args.agent_log, "a") if args.agent_log else None
    try:
        for r in range(args.rounds):
            order = backends if r % 2 == 0 else list(reversed(backends))
            for backend in order:
                path = os.path.join(args.dir, backend)
                shutil.rmtree(path, ignore_errors=True)
                os.makedirs(path)
                ctx = {"path": path, "redis_port": redis_port, "workers": args.lmcache_workers or args.workers,
                       "stripes": args.ferry_stripes}
                if backend.startswith("ferry-"):
                    tier = {"ferry-file-direct": f"file:{path},direct{args.ferry_file_opts}",
                            "ferry-file": f"file:{path}{args.ferry_file_opts}",
                            "ferry-redis": f"redis://127.0.0.1:{redis_port}"}[backend]
                    lanes = ["-q", str(args.workers), "-m", str(max(256, args.workers * args.chunk_bytes >> 20))]
                    ctx["agent"] = Agent(args.ferry, tier, work, lanes + [a for a in args.agent_args.split(",") if a],
                                         agent_log)
                adapter = make_adapter(backend, ctx)
                try:
                    # Warm-up, unmeasured: connections, registration, first touch of files.
                    store_and_load(adapter, backend, max(batches), buf, args, 10**6 + r * 1000, 1)
                    for n in batches:
                        for k in range(args.repeats):
                            st, ld = store_and_load(adapter, backend, n, buf, args, r * 10000 + n * 100 + k * n,
                                                    r + n + k)
                            samples[(backend, n)][0].append(st)
                            samples[(backend, n)][1].append(ld)
                finally:
                    adapter.close()
                    if "agent" in ctx:
                        ctx["agent"].stop()
                    flushall(redis_port)
                    shutil.rmtree(path, ignore_errors=True)
                print(f"round {r + 1}/{args.rounds}: {backend} done", file=sys.stderr, flush=True)
    finally:
        redis.terminate()
        redis.wait()
        shutil.rmtree(work, ignore_errors=True)

    rows = []
    for backend in backends:
        for n in batches:
            st, ld = samples[(backend, n)]
            gb = n * args.chunk_bytes / 1e9
            rows.append({"backend": backend, "chunks_per_batch": n, "chunk_bytes": args.chunk_bytes,
                         "store_gbps": gb / statistics.median(st), "load_gbps": gb / statistics.median(ld),
                         "store_batch_ms_p50": pct(st, 50) * 1e3, "store_batch_ms_p99": pct(st, 99) * 1e3,
                         "load_batch_ms_p50": pct(ld, 50) * 1e3, "load_batch_ms_p99": pct(ld, 99) * 1e3,
                         "store_ms_per_chunk_p50": pct(st, 50) * 1e3 / n, "store_ms_per_chunk_p99": pct(st, 99) * 1e3 / n,
                         "load_ms_per_chunk_p50": pct(ld, 50) * 1e3 / n, "load_ms_per_chunk_p99": pct(ld, 99) * 1e3 / n,
                         "store_s": st, "load_s": ld})
    print(f"\n{'backend':<20} {'chunks':>6} {'store GB/s':>10} {'load GB/s':>10} {'store ms/chunk p50/p99':>23} "
          f"{'load ms/chunk p50/p99':>22}")
    for r in rows:
        print(f"{r['backend']:<20} {r['chunks_per_batch']:>6} {r['store_gbps']:>10.2f} {r['load_gbps']:>10.2f} "
              f"{r['store_ms_per_chunk_p50']:>11.2f}/{r['store_ms_per_chunk_p99']:<11.2f}"
              f"{r['load_ms_per_chunk_p50']:>10.2f}/{r['load_ms_per_chunk_p99']:<11.2f}")
    ratios = []
    for ferry_b, base in (("ferry-file-direct", "lmcache-fs-direct"), ("ferry-file", "lmcache-fs"),
                          ("ferry-file-direct", "lmcache-fs-aio-direct"), ("ferry-file", "lmcache-fs-aio"),
                          ("ferry-redis", "lmcache-resp"), ("ferry-file-direct", "lmcache-resp"),
                          ("ferry-file", "lmcache-resp")):
        if ferry_b not in backends or base not in backends:
            continue
        for n in batches:
            f = next(r for r in rows if r["backend"] == ferry_b and r["chunks_per_batch"] == n)
            b = next(r for r in rows if r["backend"] == base and r["chunks_per_batch"] == n)
            ratios.append({"ferry": ferry_b, "baseline": base, "chunks_per_batch": n,
                           "store_ratio": f["store_gbps"] / b["store_gbps"], "load_ratio": f["load_gbps"] / b["load_gbps"]})
    print(f"\n{'ferry':<20} {'against':<20} {'chunks':>6} {'store x':>8} {'load x':>8}")
    for q in ratios:
        print(f"{q['ferry']:<20} {q['baseline']:<20} {q['chunks_per_batch']:>6} {q['store_ratio']:>8.2f} {q['load_ratio']:>8.2f}")
    json.dump({"lmcache_version": lmcache.__version__ if hasattr(lmcache, "__version__") else "?",
               "torch": torch.__version__, "l1": args.l1, "pinned_l1": pinned, "rounds": args.rounds, "repeats": args.repeats, "torch_threads": args.torch_threads, "ferry_stripes": args.ferry_stripes, "ferry_file_opts": args.ferry_file_opts, "pretouch_gib": args.pretouch_gib, "dir": args.dir,
               "workers": args.workers, "lmcache_workers": args.lmcache_workers or args.workers,
               "rows": rows, "ratios": ratios}, open(args.json_out, "w"), indent=2)
    print(f"wrote {args.json_out}")


if __name__ == "__main__":
    main()
