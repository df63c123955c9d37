#!/usr/bin/env python3
"""Offloads a KV cache to `ferry agent` and restores it, with torch tensors.

    ferry agent --tier dram:4GiB --tier file:/var/tmp/ferry-kv &
    python3 examples/python/kv_offload.py                  # GPU tensors if CUDA is there
    python3 examples/python/kv_offload.py --device cpu --chunks 4

The cache is Llama-3.1-8B-shaped: per chunk of 256 tokens, 32 layers x (K, V)
x 8 heads x 128 x bf16 = 32 MiB. Each chunk is pushed under its own key,
the tensors are wiped, and the chunks are pulled back and compared.
"""

import argparse
import sys
import time

import torch

import ferry


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--endpoint", default="unix:ferry.agent")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--chunks", type=int, default=8, help="chunks of 256 tokens")
    args = p.parse_args()

    layers, heads, head_dim, tokens = 32, 8, 128, 256
    # One tensor holds every chunk: (chunks, layers, K/V, tokens, heads, head_dim).
    kv = torch.randn(args.chunks, layers, 2, tokens, heads, head_dim, dtype=torch.bfloat16, device=args.device)
    original = kv.clone()
    if kv.is_cuda:
        torch.cuda.synchronize()  # the agent reads GPU memory from another process
    keys = [f"llama-3.1-8b/chunk/{i}" for i in range(args.chunks)]

    with ferry.Agent(args.endpoint, name="kv_offload") as agent:
        agent.register(kv)  # once: the agent reaches it in place (CUDA IPC or host memory)
        t0 = time.perf_counter()
        agent.push(keys, list(kv)).wait()
        t1 = time.perf_counter()
        kv.zero_()
        if kv.is_cuda:
            torch.cuda.synchronize()
        t2 = time.perf_counter()
        agent.pull(keys, list(kv)).wait()
        t3 = time.perf_counter()
        where = {r.tier for r in agent.pull(keys[:1], [kv[0]]).wait().results()}
        print(f"agent tiers: {agent.tiers}; chunk 0 found in {where.pop()}")
        gib = kv.numel() * kv.element_size() / 2**30
        print(f"offloaded {args.chunks} chunks ({gib:.2f} GiB) from {args.device} in {1e3 * (t1 - t0):.1f} ms, "
              f"restored in {1e3 * (t3 - t2):.1f} ms")
        print("existing:", sum(agent.exists(keys)), "of", len(keys))
        agent.delete(keys)

    if not torch.equal(kv, original):
        print("restored cache differs from the original", file=sys.stderr)
        return 1
    print("restored cache matches the original, every byte")
    return 0


if __name__ == "__main__":
    sys.exit(main())
