#!/usr/bin/env python3
"""DOCA_DMA_PROXY (Ferry's NIXL plugin) against NIXL's own POSIX backend, and
against Ferry's own Python API, in the same run, through the same nixl Python
API and the same descriptors (docs/bench/nixl.md).

  plugin       NIXL agent -> libplugin_DOCA_DMA_PROXY.so -> `ferry agent --tier file:DIR[,direct]`
               DRAM_SEG buffers to and from OBJ_SEG objects, one object per descriptor
  posix        NIXL agent -> NIXL's POSIX backend (its default I/O queue, and io_uring)
               DRAM_SEG buffers to and from FILE_SEG files in DIR, one file per descriptor,
               opened with O_DIRECT in the direct mode
  ferry-api    the `ferry` Python package on the same agent: push / pull over a DescList,
               the plugin's overhead measured against the API it wraps
  paired       the plugin and the API in one process, their runs taking turns, so that
               the drift between processes stays out of their ratio
  paired-posix the plugin and POSIX (both queues) in one process, their runs taking
               turns, for the same reason: the disk's own drift from one minute to
               the next is larger than the differences measured under O_DIRECT

Each backend runs in a process of its own (NIXL_PLUGIN_DIR replaces NIXL's plugin
folder for a whole process; the paired-posix process gets a folder of links to
both plugins), over the same folder on the same disk. For each
mode (buffered, direct), size and operation, a transfer of --total-mib MiB in
descriptors of that size is made, posted and released --warmup + --runs times
(NIXL's initialize_xfer to release_xfer_handle; Ferry's push or pull to its
wait): GB/s is bytes / that time, 1e9 bytes, the median of the --runs runs after
the warm-up ones. The warm-up runs are timed too and kept apart: the first write
of an object allocates its file (or, for POSIX, fills the file the application
created and sized before the clock), and Ferry's file tier keeps the file a
second write replaces for the third to overwrite in place (spare_files.h), as
POSIX overwrites its files; so with the default two warm-up runs every timed
write is an overwrite for every backend, and the first run's GB/s is reported
beside the medians as the first write. Every READ run starts
from a zeroed buffer and is checked. WRITE runs first,
then READ of what it wrote (buffered reads then come from the page cache, for
every backend alike). Every byte read back is checked once per backend.

    nixl_bench.py --ferry build/apps/ferry/ferry --plugin-dir build/nixl-plugins \\
        --dir /var/tmp/nixl-bench --json out.json
"""

import argparse
import json
import mmap
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import numpy as np

BACKEND = "DOCA_DMA_PROXY"


def aligned(nbytes):
    """Page-aligned host memory (O_DIRECT wants 4 KiB alignment), as a uint8 array."""
    return np.frombuffer(mmap.mmap(-1, nbytes), dtype=np.uint8)


def fill(buf, seed):
    rng = np.random.default_rng(seed)
    buf[:] = rng.integers(0, 256, size=buf.size, dtype=np.uint8)


def timed(post, runs):
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        post()
        out.append(time.perf_counter() - t0)
    return out


def nixl_post(agent, handle, poll_us):
    """Posts and polls until DONE, sleeping poll_us between polls (0: spin): a
    spinning poller takes a core that a backend's own threads may need."""
    pause = poll_us / 1e6

    def run():
        state = agent.transfer(handle)
        while state != "DONE":
            if pause:
                time.sleep(pause)
            state = agent.check_xfer_state(handle)
    return run


def import_nixl():
    try:
        import nixl_cu12._api as nixl
    except ModuleNotFoundError:  # NIXL's CUDA 13 build, the one beside torch cu130
        import nixl_cu13._api as nixl
    return nixl


def plugin_objects(agent, buf, size, count, prefix):
    """The buffer as DRAM and one OBJ object per descriptor on the plugin: the
    registrations and the two descriptor lists."""
    mem = agent.register_memory([(buf.ctypes.data, buf.nbytes, 0, "")], "DRAM", backends=[BACKEND])
    local = agent.get_xfer_descs([(buf.ctypes.data + i * size, size, 0) for i in range(count)], "DRAM")
    keys = [f"{prefix}/{size}/{i}" for i in range(count)]
    objs = agent.register_memory([(0, size, i, k) for i, k in enumerate(keys)], "OBJ", backends=[BACKEND])
    remote = agent.get_xfer_descs([(0, size, i) for i in range(count)], "OBJ")
    return mem, objs, local, remote


def nixl_transfer(agent, name, backend, op, local, remote, poll_us):
    """One transfer made, posted and released inside the clock, as Ferry's
    push/pull make their request every time: the same work on both sides.
    Returns its seconds."""
    t0 = time.perf_counter()
    h = agent.initialize_xfer(op, local, remote, name, backends=[backend])
    nixl_post(agent, h, poll_us)()
    agent.release_xfer_handle(h)
    return time.perf_counter() - t0


def worker_nixl(args, kind, params):
    """One NIXL backend (plugin or posix) over every size; returns its rows."""
    nixl = import_nixl()
    name = f"bench-{kind}-{uuid.uuid4().hex[:6]}"
    agent = nixl.nixl_agent(name, nixl.nixl_agent_config(backends=[]))
    backend = BACKEND if kind == "plugin" else "POSIX"
    agent.create_backend(backend, params)
    rows = []
    for size in args.sizes:
        count = max(1, (args.total_mib << 20) // size)
        buf = aligned(count * size)
        fds = []
        if kind == "plugin":
            mem, remote_reg, local, remote = plugin_objects(agent, buf, size, count, "nixl-bench")
        else:
            mem = agent.register_memory([(buf.ctypes.data, buf.nbytes, 0, "")], "DRAM", backends=[backend])
            local = agent.get_xfer_descs([(buf.ctypes.data + i * size, size, 0) for i in range(count)], "DRAM")
            folder = os.path.join(args.dir, "posix", str(size))
            os.makedirs(folder, exist_ok=True)
            flags = os.O_RDWR | os.O_CREAT | (os.O_DIRECT if args.mode == "direct" else 0)
            fds = [os.open(os.path.join(folder, str(i)), flags, 0o600) for i in range(count)]
            for fd in fds:
                os.ftruncate(fd, size)
            remote_reg = agent.register_memory([(0, size, fd, "") for fd in fds], "FILE", backends=[backend])
            remote = agent.get_xfer_descs([(0, size, fd) for fd in fds], "FILE")
        fill(buf, size)
        expect = buf.copy()
        for op in ("WRITE", "READ"):
            secs = []
            for _ in range(args.warmup + args.runs):
                if op == "READ":
                    buf[:] = 0
                secs.append(nixl_transfer(agent, name, backend, op, local, remote, args.poll_us))
                if op == "READ" and not np.array_equal(buf, expect):
                    sys.exit(f"nixl_bench: {kind} read back different bytes at {size} bytes")
            rows.append(row(kind, params, args.mode, op, size, count, secs, args.warmup))
        agent.deregister_memory(remote_reg, backends=[backend])
        agent.deregister_memory(mem, backends=[backend])
        for fd in fds:
            os.close(fd)
    return rows


def worker_ferry_api(args):
    import ferry
    rows = []
    with ferry.Agent(args.endpoint, name="nixl-bench-api") as agent:
        for size in args.sizes:
            count = max(1, (args.total_mib << 20) // size)
            buf = aligned(count * size)
            region = agent.register(buf)
            keys = [f"nixl-bench-api/{size}/{i}" for i in range(count)]
            push_list = ferry.DescList([buf[i * size:(i + 1) * size] for i in range(count)])
            pull_list = ferry.DescList([buf[i * size:(i + 1) * size] for i in range(count)], writable=True)
            fill(buf, size)
            expect = buf.copy()
            secs = timed(lambda: agent.push(keys, push_list).wait(), args.warmup + args.runs)
            rows.append(row("ferry-api", {}, args.mode, "WRITE", size, count, secs, args.warmup))
            secs = []
            for _ in range(args.warmup + args.runs):
                buf[:] = 0
                secs += timed(lambda: agent.pull(keys, pull_list).wait(), 1)
                if not np.array_equal(buf, expect):
                    sys.exit(f"nixl_bench: ferry-api read back different bytes at {size} bytes")
            rows.append(row("ferry-api", {}, args.mode, "READ", size, count, secs, args.warmup))
            region.close()
    return rows


def worker_paired(args, params):
    """The plugin and Ferry's Python API in one process, on one agent, their runs
    taking turns (plugin first on even runs, the API first on odd ones), so that
    the machine's drift between processes does not enter their ratio."""
    nixl = import_nixl()
    import ferry
    name = f"bench-paired-{uuid.uuid4().hex[:6]}"
    agent = nixl.nixl_agent(name, nixl.nixl_agent_config(backends=[]))
    agent.create_backend(BACKEND, params)
    rows = []
    with ferry.Agent(args.endpoint, name="nixl-bench-paired-api") as api:
        for size in args.sizes:
            count = max(1, (args.total_mib << 20) // size)
            buf = aligned(count * size)
            mem, remote_reg, local, remote = plugin_objects(agent, buf, size, count, "nixl-bench-paired")
            api_buf = aligned(count * size)
            region = api.register(api_buf)
            api_keys = [f"nixl-bench-paired-api/{size}/{i}" for i in range(count)]
            lists = {"WRITE": ferry.DescList([api_buf[i * size:(i + 1) * size] for i in range(count)]),
                     "READ": ferry.DescList([api_buf[i * size:(i + 1) * size] for i in range(count)], writable=True)}
            fill(buf, size)
            fill(api_buf, size)
            expect = buf.copy()

            def plugin_run(op):
                return nixl_transfer(agent, name, BACKEND, op, local, remote, args.poll_us)

            def api_run(op):
                t0 = time.perf_counter()
                (api.push(api_keys, lists[op]) if op == "WRITE" else api.pull(api_keys, lists[op])).wait()
                return time.perf_counter() - t0

            for op in ("WRITE", "READ"):
                secs = {"plugin": [], "ferry-api": []}
                for run in range(args.warmup + args.runs):
                    if op == "READ":
                        buf[:] = 0
                        api_buf[:] = 0
                    order = (("plugin", plugin_run), ("ferry-api", api_run))
                    for kind, fn in (order if run % 2 == 0 else order[::-1]):
                        secs[kind].append(fn(op))
                    if op == "READ" and not (np.array_equal(buf, expect) and np.array_equal(api_buf, expect)):
                        sys.exit(f"nixl_bench: paired run read back different bytes at {size} bytes")
                for kind in secs:
                    rows.append(row(kind + "-paired", {}, args.mode, op, size, count, secs[kind], args.warmup))
            region.close()
            agent.deregister_memory(remote_reg, backends=[BACKEND])
            agent.deregister_memory(mem, backends=[BACKEND])
    return rows


def posix_files(agent, backend, folder, size, count, direct):
    """count files of size bytes in folder, created and sized before the clock,
    registered as FILE on backend: the registration, the descriptors and the fds."""
    os.makedirs(folder, exist_ok=True)
    flags = os.O_RDWR | os.O_CREAT | (os.O_DIRECT if direct else 0)
    fds = [os.open(os.path.join(folder, str(i)), flags, 0o600) for i in range(count)]
    for fd in fds:
        os.ftruncate(fd, size)
    reg = agent.register_memory([(0, size, fd, "") for fd in fds], "FILE", backends=[backend])
    return reg, agent.get_xfer_descs([(0, size, fd) for fd in fds], "FILE"), fds


def worker_paired_posix(args, params):
    """The plugin, POSIX with its default queue and POSIX with io_uring in one
    process, each on buffers and objects or files of its own, their runs taking
    turns (the first of them rotating from run to run), so that the disk's drift
    between processes does not enter their ratio."""
    nixl = import_nixl()
    name = f"bench-paired-posix-{uuid.uuid4().hex[:6]}"
    agents = {"plugin": nixl.nixl_agent(name + "-plugin", nixl.nixl_agent_config(backends=[])),
              "posix": nixl.nixl_agent(name + "-posix", nixl.nixl_agent_config(backends=[])),
              "posix-uring": nixl.nixl_agent(name + "-uring", nixl.nixl_agent_config(backends=[]))}
    agents["plugin"].create_backend(BACKEND, params)
    agents["posix"].create_backend("POSIX", {})
    agents["posix-uring"].create_backend("POSIX", {"use_uring": "true"})
    backend = {"plugin": BACKEND, "posix": "POSIX", "posix-uring": "POSIX"}
    rows = []
    for size in args.sizes:
        count = max(1, (args.total_mib << 20) // size)
        side = {}
        for kind, agent in agents.items():
            buf = aligned(count * size)
            if kind == "plugin":
                mem, reg, local, remote = plugin_objects(agent, buf, size, count, "nixl-bench-paired-posix")
                fds = []
            else:
                mem = agent.register_memory([(buf.ctypes.data, buf.nbytes, 0, "")], "DRAM", backends=["POSIX"])
                local = agent.get_xfer_descs([(buf.ctypes.data + i * size, size, 0) for i in range(count)], "DRAM")
                reg, remote, fds = posix_files(agent, "POSIX", os.path.join(args.dir, kind + "-paired", str(size)),
                                               size, count, args.mode == "direct")
            fill(buf, size)
            side[kind] = {"buf": buf, "expect": buf.copy(), "mem": mem, "reg": reg, "local": local,
                          "remote": remote, "fds": fds}
        kinds = list(agents)
        for op in ("WRITE", "READ"):
            secs = {k: [] for k in kinds}
            for run in range(args.warmup + args.runs):
                for k in kinds[run % 3:] + kinds[:run % 3]:
                    s = side[k]
                    if op == "READ":
                        s["buf"][:] = 0
                    secs[k].append(nixl_transfer(agents[k], agents[k].name, backend[k], op, s["local"], s["remote"],
                                                 args.poll_us))
                    if op == "READ" and not np.array_equal(s["buf"], s["expect"]):
                        sys.exit(f"nixl_bench: {k} (paired) read back different bytes at {size} bytes")
            for k in kinds:
                rows.append(row(k + "-with-posix", {}, args.mode, op, size, count, secs[k], args.warmup))
        for kind, s in side.items():
            agents[kind].deregister_memory(s["reg"], backends=[backend[kind]])
            agents[kind].deregister_memory(s["mem"], backends=[backend[kind]])
            for fd in s["fds"]:
                os.close(fd)
    return rows


def both_plugins_folder(args):
    """A folder of links to NIXL's own POSIX plugin and to DOCA_DMA_PROXY, for a
    process that loads both (NIXL_PLUGIN_DIR names one folder), and the wheel's
    library folders, which the POSIX plugin's $ORIGIN-relative RPATH no longer
    reaches from the link."""
    import importlib.util
    for pkg in ("nixl_cu12", "nixl_cu13"):
        spec = importlib.util.find_spec(pkg)
        if spec is not None:
            break
    else:
        sys.exit("nixl_bench: neither nixl_cu12 nor nixl_cu13 is installed")
    site = os.path.dirname(os.path.dirname(spec.origin))
    posix = os.path.join(site, f".{pkg}.mesonpy.libs", "plugins", "libplugin_POSIX.so")
    folder = os.path.join(args.dir, "both-plugins")
    os.makedirs(folder, exist_ok=True)
    for target in (posix, os.path.join(args.plugin_dir, f"libplugin_{BACKEND}.so")):
        link = os.path.join(folder, os.path.basename(target))
        if not os.path.lexists(link):
            os.symlink(target, link)
    return folder, [os.path.dirname(os.path.dirname(posix)), os.path.join(site, f"{pkg}.libs")]


def row(kind, params, mode, op, size, count, secs, warmup):
    """secs: every run's seconds, the warm-up runs first."""
    gbps = [size * count / s / 1e9 for s in secs]
    return {"backend": kind, "params": params, "mode": mode, "op": op, "size": size, "descriptors": count,
            "warmup": warmup, "seconds": secs[warmup:], "gbps": gbps[warmup:],
            "gbps_median": statistics.median(gbps[warmup:]), "warmup_gbps": gbps[:warmup],
            "first_gbps": gbps[0]}


def start_agent(args, mode, folder):
    endpoint = f"unix:ferry-nixl-bench-{uuid.uuid4().hex[:8]}"
    ready = os.path.join(folder, "ready")
    tier = f"file:{os.path.join(folder, 'ferry')}" + (",direct" if mode == "direct" else "") + args.file_tier_options
    log = open(os.path.join(folder, "agent.log"), "w")
    proc = subprocess.Popen([args.ferry, "agent", "--endpoint", endpoint, "--gpu", "none", "--tier", tier,
                             "--ready-file", ready, "--staging-mib", str(args.staging_mib)] + args.agent_args.split(),
                            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 30
    while not os.path.exists(ready):
        if proc.poll() is not None or time.time() > deadline:
            sys.exit("nixl_bench: ferry agent did not start: " + open(log.name).read())
        time.sleep(0.05)
    return proc, endpoint


def run_worker(args, kind, mode, endpoint, params):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", kind, "--mode", mode, "--dir", args.dir,
           "--sizes", ",".join(str(s) for s in args.sizes), "--total-mib", str(args.total_mib),
           "--runs", str(args.runs), "--warmup", str(args.warmup), "--poll-us", str(args.poll_us), "--endpoint", endpoint or "", "--params", json.dumps(params)]
    env = dict(os.environ)
    if kind in ("plugin", "paired"):
        env["NIXL_PLUGIN_DIR"] = args.plugin_dir
    elif kind == "paired-posix":
        env["NIXL_PLUGIN_DIR"], libs = both_plugins_folder(args)
        env["LD_LIBRARY_PATH"] = ":".join(libs + [env.get("LD_LIBRARY_PATH", "")])
    else:
        env.pop("NIXL_PLUGIN_DIR", None)  # NIXL's own plugins, POSIX among them
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"nixl_bench: the {kind} worker ({mode}) failed, exit {out.returncode}:\n" + out.stderr[-4000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ferry", default="build/apps/ferry/ferry")
    p.add_argument("--plugin-dir", default="build/nixl-plugins")
    p.add_argument("--dir", help="the folder both backends write to (default: a fresh one under /var/tmp)")
    p.add_argument("--sizes", default="1048576,4194304,16777216", help="descriptor sizes in bytes")
    p.add_argument("--total-mib", type=int, default=128, help="MiB one transfer moves")
    p.add_argument("--runs", type=int, default=3, help="timed runs a point, after the warm-up ones")
    p.add_argument("--warmup", type=int, default=2,
                   help="runs before the timed ones, reported apart (the first is each object's first write)")
    p.add_argument("--poll-us", type=int, default=50,
                   help="microseconds between check_xfer_state calls, the same for every NIXL backend (0: spin)")
    p.add_argument("--modes", default="buffered,direct")
    p.add_argument("--staging-mib", type=int, default=256)
    p.add_argument("--file-tier-options", default="",
                   help="appended to the agent's file tier, e.g. ',piece=4MiB' (docs/xfer-tiers.md)")
    p.add_argument("--agent-args", default="",
                   help="more flags for `ferry agent`, space-separated, e.g. '--queue-depth 16'")
    p.add_argument("--json", dest="json_path")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--mode", help=argparse.SUPPRESS)
    p.add_argument("--endpoint", help=argparse.SUPPRESS)
    p.add_argument("--params", default="{}", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.sizes = [int(s) for s in str(args.sizes).split(",")]
    if args.worker:
        params = json.loads(args.params)
        if args.worker == "ferry-api":
            rows = worker_ferry_api(args)
        elif args.worker == "paired":
            rows = worker_paired(args, params)
        elif args.worker == "paired-posix":
            rows = worker_paired_posix(args, params)
        else:
            rows = worker_nixl(args, args.worker, params)
        print(json.dumps(rows))
        return

    args.plugin_dir = os.path.abspath(args.plugin_dir)
    if not os.path.exists(os.path.join(args.plugin_dir, f"libplugin_{BACKEND}.so")):
        sys.exit(f"nixl_bench: no libplugin_{BACKEND}.so in {args.plugin_dir}")
    own_dir = args.dir is None
    args.dir = args.dir or tempfile.mkdtemp(prefix="nixl-bench-", dir="/var/tmp")
    rows = []
    agent_phases = {}
    try:
        for mode in args.modes.split(","):
            folder = os.path.join(args.dir, mode)
            os.makedirs(folder, exist_ok=True)
            proc, endpoint = start_agent(args, mode, folder)
            try:
                args.dir, base = folder, args.dir
                for kind, params in (("plugin", {"endpoint": endpoint}), ("ferry-api", {}),
                                     ("paired", {"endpoint": endpoint}), ("paired-posix", {"endpoint": endpoint}),
                                     ("posix", {}), ("posix", {"use_uring": "true"})):
                    got = run_worker(args, kind, mode, endpoint, params)
                    rows += got
                    for r in got:
                        kind = r["backend"]
                        print(f"{mode:>8} {kind:>16} {json.dumps(params) if kind == 'posix' else '':>20} {r['op']:>5} "
                              f"{r['size'] >> 10:>7} KiB x {r['descriptors']:>4}  {r['gbps_median']:7.3f} GB/s",
                              flush=True)
                args.dir = base
            finally:
                proc.terminate()
                proc.wait(10)
                # The agent's time per phase, logged on exit: where its share of each run went.
                with open(os.path.join(folder, "agent.log")) as log:
                    phases = [line.strip() for line in log if "agent time per phase" in line]
                agent_phases[mode] = phases[-1] if phases else ""
                print(f"{mode:>8} {agent_phases[mode]}", flush=True)
    finally:
        if own_dir:
            shutil.rmtree(args.dir, ignore_errors=True)

    print("\nGB/s, medians of the timed runs; plugin / POSIX's best queue, from separate processes and from"
          " runs taking turns in one process (paired); plugin / Ferry's Python API, the same two ways; and each"
          " object's first write (the first warm-up run): plugin, POSIX's best, their ratio")
    print(f"{'mode':>8} {'op':>5} {'size':>9} {'plugin':>8} {'posix':>8} {'uring':>8} {'api':>8} "
          f"{'/posix':>7} {'paired':>7} {'/api':>6} {'paired':>8} {'first':>7} {'posix':>7} {'ratio':>6}")
    summary = []
    for mode in args.modes.split(","):
        for op in ("WRITE", "READ"):
            for size in args.sizes:
                pick = [r for r in rows if r["mode"] == mode and r["op"] == op and r["size"] == size]
                plugin = next(r["gbps_median"] for r in pick if r["backend"] == "plugin")
                api = next(r["gbps_median"] for r in pick if r["backend"] == "ferry-api")
                posix = [r["gbps_median"] for r in pick if r["backend"] == "posix"]
                first = next(r["first_gbps"] for r in pick if r["backend"] == "plugin")
                posix_first = max(r["first_gbps"] for r in pick if r["backend"] == "posix")
                paired = {r["backend"]: r["seconds"] for r in pick if r["backend"].endswith("-paired")}
                # Each run's plugin against the API's run beside it: their GB/s ratio, the median of the runs.
                pair_ratio = statistics.median(a / p for p, a in zip(paired["plugin-paired"], paired["ferry-api-paired"]))
                # Each run's plugin against the faster POSIX queue of the runs beside it.
                with_posix = {r["backend"]: r["seconds"] for r in pick if r["backend"].endswith("-with-posix")}
                posix_pair = statistics.median(
                    min(p, u) / x for x, p, u in zip(with_posix["plugin-with-posix"], with_posix["posix-with-posix"],
                                                     with_posix["posix-uring-with-posix"]))
                s = {"mode": mode, "op": op, "size": size, "plugin_gbps": plugin, "api_gbps": api,
                     "posix_gbps": posix[0], "posix_uring_gbps": posix[1], "plugin_over_posix": plugin / max(posix),
                     "plugin_over_posix_paired": posix_pair,
                     "plugin_over_api": plugin / api, "plugin_over_api_paired": pair_ratio,
                     "first_plugin_gbps": first, "first_posix_gbps": posix_first,
                     "first_plugin_over_posix": first / posix_first}
                summary.append(s)
                print(f"{mode:>8} {op:>5} {size >> 10:>5} KiB {plugin:8.3f} {posix[0]:8.3f} {posix[1]:8.3f} "
                      f"{api:8.3f} {s['plugin_over_posix']:6.2f}x {posix_pair:6.3f}x {s['plugin_over_api']:5.2f}x {pair_ratio:7.3f}x "
                      f"{first:7.3f} {posix_first:7.3f} {first / posix_first:5.2f}x")
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump({"bench": "nixl", "rows": rows, "summary": summary, "total_mib": args.total_mib,
                       "runs": args.runs, "warmup": args.warmup,
                       "file_tier_options": args.file_tier_options, "agent_args": args.agent_args,
                       "agent_phases": agent_phases}, f, indent=1)


if __name__ == "__main__":
    main()
