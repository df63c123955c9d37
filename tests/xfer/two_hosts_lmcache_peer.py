"""One step of two_hosts_test's LMCache part, run on one host against its agent:
ferry.lmcache.FerryL2Connector driven as LMCache's native_plugin L2 adapter
drives it (tests/python/test_lmcache_contract.py says where each call comes
from), without LMCache itself, which needs torch.

    python two_hosts_lmcache_peer.py ENDPOINT STEP

STEP: store / store-other (set a chunk), hit / hit-other (exists, then get it
byte-exact), delete (both chunks), miss (neither exists nor loads).
Exit status 0 when the step saw what it should; else 1, with the reason."""

import ctypes
import hashlib
import mmap
import select
import sys
import time

from ferry.lmcache import FerryL2Connector

CHUNK = 1 << 20  # two stripes of 512 KiB (the connector's default stripes=2)


def key(name: str) -> str:
    # LMCache's key: f"{model}@{kv_rank:08x}@{group:x}@{hash.hex()}"
    return f"meta-llama/Llama-3.1-8B@{1 << 24:08x}@0@{hashlib.sha256(name.encode()).hexdigest()}"


def chunk(name: str) -> bytes:
    out, block = bytearray(), hashlib.sha256(name.encode()).digest()
    while len(out) < CHUNK:
        block = hashlib.sha256(block).digest()
        out += block
    return bytes(out[:CHUNK])


class Arena:
    """Chunks of an L1 buffer as LMCache hands them out: ctypes memoryviews."""

    def __init__(self, chunks):
        self.map = mmap.mmap(-1, chunks * CHUNK)
        self.base = ctypes.addressof(ctypes.c_ubyte.from_buffer(self.map))

    def view(self, i):
        return memoryview((ctypes.c_ubyte * CHUNK).from_address(self.base + i * CHUNK))


def wait(connector, poller, fid, seen, timeout=20.0):
    deadline = time.monotonic() + timeout
    while fid not in seen:
        if time.monotonic() > deadline:
            sys.exit(f"future {fid} never completed")
        if poller.poll(500):
            for future_id, ok, error, result in connector.drain_completions() or []:
                seen[future_id] = (ok, error, result)
    return seen.pop(fid)


def main(endpoint: str, step: str) -> str:
    c = FerryL2Connector(endpoint=endpoint, key_prefix="lmc/")
    poller = select.poll()
    poller.register(c.event_fd(), select.POLLIN)
    seen = {}
    arena = Arena(2)
    names = {"store": "one", "hit": "one", "store-other": "other", "hit-other": "other"}
    try:
        if step in ("store", "store-other"):
            arena.map[:CHUNK] = chunk(names[step])
            ok, error, _ = wait(c, poller, c.submit_batch_set([key(names[step])], [arena.view(0)]), seen)
            return "" if ok else f"the set failed: {error}"
        if step in ("hit", "hit-other"):
            k = [key(names[step])]
            ok, error, found = wait(c, poller, c.submit_batch_exists(k), seen)
            if not ok or found != [True]:
                return f"exists: {found} ({error}), not a hit"
            ok, error, loaded = wait(c, poller, c.submit_batch_get(k, [arena.view(1)]), seen)
            if not ok or loaded != [True]:
                return f"the get failed: {loaded} ({error})"
            return "" if arena.map[CHUNK:] == chunk(names[step]) else "the chunk came back with other bytes"
        if step == "delete":
            _, error, deleted = wait(c, poller, c.submit_batch_delete([key("one"), key("other")]), seen)
            return "" if deleted == [True, True] else f"delete: {deleted} ({error})"
        if step == "miss":
            k = [key("one"), key("other")]
            ok, error, found = wait(c, poller, c.submit_batch_exists(k), seen)
            if found != [False, False]:
                return f"exists after the other host deleted: {found} ({error})"
            _, _, loaded = wait(c, poller, c.submit_batch_get(k[:1], [arena.view(1)]), seen)
            return "" if loaded == [False] else f"a deleted chunk loaded: {loaded}"
        return f"unknown step {step}"
    finally:
        c.close()


if __name__ == "__main__":
    reason = main(sys.argv[1], sys.argv[2])
    if reason:
        sys.exit(f"{sys.argv[2]} on {sys.argv[1]}: {reason}")
