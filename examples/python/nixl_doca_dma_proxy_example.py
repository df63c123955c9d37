#!/usr/bin/env python3
"""Moves one object between GPU (or host) memory and `ferry agent` through NIXL,
with the DOCA_DMA_PROXY backend (docs/nixl.md): the DOCA reference's example,
with its flags.

    ferry agent --staging-mib 1024 --tier dram:4GiB --tier file:/var/tmp/ferry-kv &
    export NIXL_PLUGIN_DIR=build/nixl-plugins          # where libplugin_DOCA_DMA_PROXY.so is
    python3 examples/python/nixl_doca_dma_proxy_example.py -o push -g 0 -f kv/block/0 -s 64
    python3 examples/python/nixl_doca_dma_proxy_example.py -o pull -g 0 -f kv/block/0 -s 64

push fills the buffer with bytes derived from the key and stores them under it;
pull reads the object back into a zeroed buffer and checks every byte, so a
pull in another process proves the round trip. Without a GPU (or with --cpu)
the buffer is host memory (DRAM_SEG) instead of VRAM_SEG. An object moves
through one of the agent's staging slots (--staging-mib / --queue-depth, 32 MiB
by default), so -s 64 needs the agent's --staging-mib 1024 above.
"""

import argparse
import hashlib
import os
import sys
import time

import numpy as np

BACKEND = "DOCA_DMA_PROXY"


def pattern(key, nbytes):
    """The bytes push writes under key: SHA-256 in counter mode, so that no two keys match."""
    seed = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")
    return np.random.default_rng(seed).integers(0, 256, size=nbytes, dtype=np.uint8)


def gpu_index(args):
    """-g, or the GPU whose PCI address -p names; None for host memory."""
    if args.cpu:
        return None
    try:
        import torch
    except ImportError:
        if args.pci or args.gpu is not None:
            sys.exit("-p/-g need torch with CUDA to reach the GPU; drop them (host memory), or pass --cpu")
        return None
    if not torch.cuda.is_available():
        if args.pci or args.gpu is not None:
            sys.exit("no CUDA device here: drop -p/-g, or pass --cpu")
        return None
    if args.pci:
        # "0000:17:00.0", "00000000:17:00.0" and "17:00.0" all name bus 0x17, device 0.
        parts = args.pci.lower().split(":")
        if len(parts) < 2:
            sys.exit(f"-p {args.pci}: expected a PCI address such as 0000:17:00.0")
        want = (int(parts[-2], 16), int(parts[-1].split(".")[0], 16))
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            if (props.pci_bus_id, props.pci_device_id) == want:
                return i
        sys.exit(f"-p {args.pci}: no CUDA device at that PCI address")
    return args.gpu if args.gpu is not None else 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--op", choices=["push", "pull"], required=True, help="push: memory to the object; pull: back")
    p.add_argument("-p", "--pci", help="the GPU by PCI address (as nvidia-smi shows it, e.g. 0000:17:00.0)")
    p.add_argument("-g", "--gpu", type=int, help="the GPU by index (default 0 where there is one)")
    p.add_argument("-f", "--key", default="nixl-example/object", help="the object's key")
    p.add_argument("-s", "--size-mb", type=int, default=64, help="the object's size in MiB")
    p.add_argument("-d", "--agent", default="unix:ferry.agent", help="the agent's endpoint (ferry agent --endpoint)")
    p.add_argument("--cpu", action="store_true", help="host memory even where there is a GPU")
    args = p.parse_args()
    if args.size_mb <= 0:
        sys.exit("-s must be at least 1 (MiB)")
    nbytes = args.size_mb << 20
    os.environ.setdefault("NIXL_PLUGIN_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build", "nixl-plugins"))
    try:
        from nixl_cu12._api import nixl_agent, nixl_agent_config
    except ModuleNotFoundError:  # NIXL's CUDA 13 build, the one beside torch cu130
        from nixl_cu13._api import nixl_agent, nixl_agent_config

    gpu = gpu_index(args)
    if gpu is None:
        host = np.zeros(nbytes, dtype=np.uint8)
        addr, mem_type, dev, where = host.ctypes.data, "DRAM", 0, "host memory"
    else:
        import torch
        tensor = torch.zeros(nbytes, dtype=torch.uint8, device=f"cuda:{gpu}")
        addr, mem_type, dev, where = tensor.data_ptr(), "VRAM", gpu, f"GPU {gpu} ({torch.cuda.get_device_name(gpu)})"

    name = f"nixl-example-{os.getpid()}"
    agent = nixl_agent(name, nixl_agent_config(backends=[]))
    agent.create_backend(BACKEND, {"endpoint": args.agent})
    mem = agent.register_memory([(addr, nbytes, dev, "")], mem_type, backends=[BACKEND])
    obj = agent.register_memory([(0, nbytes, 1, args.key)], "OBJ", backends=[BACKEND])
    local = agent.get_xfer_descs([(addr, nbytes, dev)], mem_type)
    remote = agent.get_xfer_descs([(0, nbytes, 1)], "OBJ")

    expect = pattern(args.key, nbytes)
    if args.op == "push":
        if gpu is None:
            host[:] = expect
        else:
            tensor.copy_(torch.from_numpy(expect))
            torch.cuda.synchronize()  # the agent reads GPU memory from its own process
    handle = agent.initialize_xfer("WRITE" if args.op == "push" else "READ", local, remote, name, backends=[BACKEND])
    t0 = time.perf_counter()
    try:
        state = agent.transfer(handle)
        while state != "DONE":
            state = agent.check_xfer_state(handle)  # raises on an error: a missing key, a checksum that fails ...
    except Exception as e:  # NIXL's status, as an exception of its binding; the plugin logged why
        sys.exit(f"{args.op} {args.key}: {type(e).__name__} ({e}); the line above from {BACKEND} says why")
    seconds = time.perf_counter() - t0
    agent.release_xfer_handle(handle)

    if args.op == "pull":
        got = host if gpu is None else tensor.cpu().numpy()
        if not np.array_equal(got, expect):
            sys.exit(f"pull: {args.key} came back different from what push wrote ({int((got != expect).sum())} bytes)")
    agent.deregister_memory(obj, backends=[BACKEND])
    agent.deregister_memory(mem, backends=[BACKEND])
    print(f"{args.op} {args.key}: {args.size_mb} MiB {'from' if args.op == 'push' else 'into'} {where} in "
          f"{seconds * 1e3:.2f} ms ({nbytes / seconds / 1e9:.2f} GB/s)" + (", every byte checked" if args.op == "pull" else ""))


if __name__ == "__main__":
    main()
