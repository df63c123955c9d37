"""ferry.lmcache driven exactly as LMCache 0.5.6 drives a native_plugin L2
adapter, without LMCache itself (it needs torch; tests/python/device/ runs the
connector under the real LMCache on the GPU machine). What each step mirrors,
in lmcache/v1/distributed/l2_adapters/:

- native_plugin_l2_adapter.py:148: the class is built as cls(**adapter_params).
- native_plugin_l2_adapter.py:152-185: the six methods, and submit_batch_delete, must be callable.
- native_connector_l2_adapter.py:74-91: keys are f"{model}@{kv_rank:08x}@{group:x}@{hash.hex()}[@salt]".
- native_connector_l2_adapter.py:94-132 and memory_management.py:884-912: buffers are
  memoryview((ctypes.c_ubyte * size).from_address(ptr)) into the L1 arena, format '<B', writable.
- native_connector_l2_adapter.py:185, :476-480: event_fd() is poll()ed for POLLIN, never read;
  :485 then calls drain_completions(), which must reset it.
- :509-514: each completion is (future_id, ok, error, result); :531-599: a store uses ok, a
  lookup needs ok and the per-key result, a load uses the per-key result even when ok is
  False, a delete uses the per-key result.
- :280, :312, :352, :389: future ids come back from submit_* and are matched across every
  kind of operation, so they must be unique across kinds.
"""

import ctypes
import mmap
import os
import pathlib
import select
import threading
import time

import numpy as np
import pytest

from conftest import AgentProcess
from ferry.lmcache import FerryL2Connector

CHUNK = 2 << 20  # an object file of its own in the file tier (larger than a pack's limit)
REQUIRED = ["event_fd", "submit_batch_get", "submit_batch_set", "submit_batch_exists", "drain_completions", "close",
            "submit_batch_delete"]


def lmcache_key(model, kv_rank, group, chunk_hash: bytes, salt=""):
    key = f"{model}@{kv_rank:08x}@{group:x}@{chunk_hash.hex()}"
    return f"{key}@{salt}" if salt else key


class L1Arena:
    """LMCache's L1 buffer, chunks handed out as ctypes memoryviews: POSIX shm
    as its multiprocess mode allocates it by default (alloc_shm_pinned_ptr:
    shm_open, then mmap), or anonymous memory (shm=False)."""

    def __init__(self, chunks, size=CHUNK, shm=False):
        self.size = size
        self.shm = None
        if shm:
            self.shm = f"/dev/shm/ferry-test-l1-{os.getpid()}-{id(self)}"
            fd = os.open(self.shm, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
            os.ftruncate(fd, chunks * size)
            self.map = mmap.mmap(fd, chunks * size)
            os.close(fd)
        else:
            self.map = mmap.mmap(-1, chunks * size)
        self.base = ctypes.addressof(ctypes.c_ubyte.from_buffer(self.map))
        self.array = np.frombuffer(self.map, dtype=np.uint8).reshape(chunks, size)

    def view(self, i, size=None):
        return memoryview((ctypes.c_ubyte * (size or self.size)).from_address(self.base + i * self.size))


class Demux:
    """LMCache's demux loop: poll the fd, drain, match future ids."""

    def __init__(self, connector):
        self.connector = connector
        self.poller = select.poll()
        self.poller.register(connector.event_fd(), select.POLLIN)
        self.seen = {}

    def wait(self, fid, timeout=20.0):
        deadline = time.monotonic() + timeout
        while fid not in self.seen:
            assert time.monotonic() < deadline, f"future {fid} never completed"
            if self.poller.poll(500):
                for done in self.connector.drain_completions() or []:
                    future_id, ok, error, result = done
                    assert future_id not in self.seen, "a future completed twice"
                    self.seen[future_id] = (ok, error, result)
        return self.seen.pop(fid)

    def fd_is_quiet(self):
        self.connector.drain_completions()
        return self.poller.poll(0) == []


@pytest.fixture
def connector(agent_process):
    c = FerryL2Connector(**{"endpoint": agent_process.endpoint, "key_prefix": "lmc/"})
    yield c
    c.close()


def keys_for(n, salt=""):
    return [lmcache_key("meta-llama/Llama-3.1-8B", (1 << 24) | 0, 0, os.urandom(32), salt) for _ in range(n)]


def test_the_class_offers_every_method_lmcache_checks(connector):
    for name in REQUIRED:
        assert callable(getattr(connector, name)), name
    assert isinstance(connector.event_fd(), int)


@pytest.mark.parametrize("shm", [True, False], ids=["shm-pool", "anonymous-pool"])
def test_store_lookup_load_delete_verify_every_byte(connector, shm):
    arena = L1Arena(8, shm=shm)
    if shm:
        from ferry.lmcache import mapping_of
        assert mapping_of(arena.base, CHUNK).path.startswith("/dev/shm/")
    arena.array[:4] = np.random.default_rng(1).integers(0, 256, size=(4, CHUNK), dtype=np.uint8)
    demux = Demux(connector)
    keys = keys_for(4) + keys_for(0)
    ok, error, _ = demux.wait(connector.submit_batch_set(keys, [arena.view(i) for i in range(4)]))
    assert ok and error == ""
    absent = keys_for(1, salt="tenant-a")
    ok, _, found = demux.wait(connector.submit_batch_exists(keys[:2] + absent + keys[2:]))
    assert ok and found == [True, True, False, True, True]
    fid = connector.submit_batch_get(keys, [arena.view(4 + i) for i in range(4)])
    ok, _, loaded = demux.wait(fid)
    assert ok and loaded == [True] * 4
    np.testing.assert_array_equal(arena.array[4:8], arena.array[0:4])
    _, _, deleted = demux.wait(connector.submit_batch_delete([keys[1]] + absent))
    assert deleted == [True, False]
    ok, _, loaded = demux.wait(connector.submit_batch_get(keys[:2], [arena.view(6), arena.view(7)]))
    assert not ok and loaded == [True, False]
    assert demux.fd_is_quiet()
    if shm:
        os.unlink(arena.shm)


def test_future_ids_are_unique_across_kinds_and_threads(connector):
    arena = L1Arena(16, size=64 << 10)
    demux = Demux(connector)
    fids, lock = [], threading.Lock()

    def submitter(first):
        for i in range(first, first + 8):
            key = [f"m@00000000@0@{i:064x}"]
            for fid in (connector.submit_batch_set(key, [arena.view(i, 64 << 10)]),
                        connector.submit_batch_exists(key)):
                with lock:
                    fids.append(fid)

    threads = [threading.Thread(target=submitter, args=(f,)) for f in (0, 8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(fids)) == len(fids) == 32
    for fid in fids:
        ok, error, _ = demux.wait(fid)
        assert ok, error


@pytest.mark.parametrize("stripes", [1, 2])
def test_a_corrupt_chunk_is_a_miss_never_data(tmp_path, stripes):
    store = tmp_path / "store"
    store.mkdir()
    agent = AgentProcess(tmp_path, [f"file:{store}"])
    size = 2 * CHUNK  # every stripe an object file of its own
    try:
        c = FerryL2Connector(endpoint=agent.endpoint, stripes=stripes)
        arena = L1Arena(2, size=size)
        arena.array[0] = 7
        demux = Demux(c)
        key = keys_for(1)
        assert demux.wait(c.submit_batch_set(key, [arena.view(0)]))[0]
        files = sorted(p for p in pathlib.Path(store).rglob("*") if p.is_file() and p.stat().st_size >= size // stripes)
        assert len(files) == stripes, files
        with open(files[-1], "r+b") as f:  # one stripe's byte
            f.seek(size // stripes // 2)
            f.write(b"\x08")
        ok, error, loaded = demux.wait(c.submit_batch_get(key, [arena.view(1)]))
        assert not ok and loaded == [False]
        assert "checksum" in error.lower(), error
        c.close()
    finally:
        agent.stop()


def stored_objects(endpoint, prefix=""):
    import ferry
    with ferry.Agent(endpoint, name="pytest-list") as a:
        return {o.key: o.size for o in a.list(prefix)}


@pytest.mark.parametrize("stripes, size", [(2, CHUNK), (3, CHUNK), (3, CHUNK + 5), (4, 4097), (2, 3)])
def test_a_chunk_is_stored_as_its_stripes_and_read_back_whole(agent_process, stripes, size):
    c = FerryL2Connector(endpoint=agent_process.endpoint, key_prefix="lmc/", stripes=stripes)
    try:
        arena = L1Arena(2, size=size)
        arena.array[0] = np.random.default_rng(stripes).integers(0, 256, size=size, dtype=np.uint8)
        demux = Demux(c)
        key = keys_for(1)
        assert demux.wait(c.submit_batch_set(key, [arena.view(0)]))[0]
        objects = stored_objects(agent_process.endpoint, "lmc/")
        names = [f"lmc/{key[0]}#{i}/{stripes}" for i in range(stripes)]
        assert sorted(objects) == sorted(names)
        sizes = [objects[n] for n in names]
        assert sum(sizes) == size and min(sizes) > 0
        if size >= stripes * 4096:  # whole pages, so that O_DIRECT tiers take them as they are
            assert all(s % 4096 == 0 for s in sizes[:-1]), sizes
        strays = ["lmc/other#0/9", "elsewhere", f"lmc/partial#0/{stripes}", f"lmc/partial#{stripes}/{stripes}"]
        assert c.chunk_keys(list(objects) + strays) == key
        ok, error, loaded = demux.wait(c.submit_batch_get(key, [arena.view(1)]))
        assert ok and loaded == [True], error
        np.testing.assert_array_equal(arena.array[1], arena.array[0])
    finally:
        c.close()


def test_a_missing_stripe_makes_the_chunk_a_miss(agent_process):
    import ferry
    c = FerryL2Connector(endpoint=agent_process.endpoint, stripes=2)
    try:
        arena = L1Arena(2)
        arena.array[0] = 5
        demux = Demux(c)
        keys = keys_for(2)
        assert demux.wait(c.submit_batch_set(keys, [arena.view(0), arena.view(0)]))[0]
        with ferry.Agent(agent_process.endpoint, name="pytest") as a:
            assert a.delete([f"{keys[0]}#1/2"]) == [True]
        ok, _, found = demux.wait(c.submit_batch_exists(keys))
        assert ok and found == [False, True]
        ok, error, loaded = demux.wait(c.submit_batch_get(keys, [arena.view(1), arena.view(1)]))
        assert not ok and loaded == [False, True] and f"{keys[0]}#1/2" in error
        assert c.chunk_keys(list(stored_objects(agent_process.endpoint))) == keys[1:]
        _, _, deleted = demux.wait(c.submit_batch_delete(keys))
        assert deleted == [False, True] and stored_objects(agent_process.endpoint) == {}
    finally:
        c.close()


def test_a_store_that_fails_in_part_leaves_no_stripes(tmp_path):
    # Room for three stripes of 1 MiB: the second chunk's second stripe finds the tier full.
    agent = AgentProcess(tmp_path, ["dram:3MiB"])
    c = FerryL2Connector(endpoint=agent.endpoint, stripes=2)
    try:
        arena = L1Arena(2)
        demux = Demux(c)
        keys = keys_for(2)
        ok, error, _ = demux.wait(c.submit_batch_set(keys, [arena.view(0), arena.view(1)]))
        assert not ok and "full" in error
        # Whichever stripe found the tier full, one chunk is whole and the other left nothing.
        objects = sorted(stored_objects(agent.endpoint))
        whole = [k for k in keys if objects == [f"{k}#0/2", f"{k}#1/2"]]
        assert len(whole) == 1, objects
        ok, _, found = demux.wait(c.submit_batch_exists(keys))
        assert ok and found == [k in whole for k in keys]
    finally:
        c.close()
        agent.stop()


def test_one_stripe_keeps_lmcaches_keys(agent_process):
    c = FerryL2Connector(endpoint=agent_process.endpoint, stripes=1)
    try:
        arena = L1Arena(1)
        key = keys_for(1)
        assert Demux(c).wait(c.submit_batch_set(key, [arena.view(0)]))[0]
        assert stored_objects(agent_process.endpoint) == {key[0]: CHUNK}
        # Stripes stored by a connector with another count are no chunk of this one.
        leftovers = [f"{key[0]}#0/2", f"{key[0]}#1/2", "other#3/10"]
        assert c.chunk_keys([key[0]] + leftovers + ["with#hash", "x#1/1"]) == [key[0], "with#hash", "x#1/1"]
    finally:
        c.close()


@pytest.mark.parametrize("stripes", [0, 65, "2", True, 1.5])
def test_stripes_must_be_a_whole_number_from_1_to_64(agent_process, stripes):
    with pytest.raises(ValueError, match="stripes"):
        FerryL2Connector(endpoint=agent_process.endpoint, stripes=stripes)


def test_a_chunk_too_small_for_its_stripes_fails_its_store(connector):
    arena = L1Arena(1, size=4096)
    demux = Demux(connector)
    ok, error, result = demux.wait(connector.submit_batch_set(keys_for(1), [arena.view(0, 1)]))
    assert not ok and result == [False] and "stripes" in error


def test_a_shorter_object_is_a_miss(connector):
    arena = L1Arena(2)
    demux = Demux(connector)
    key = keys_for(1)
    assert demux.wait(connector.submit_batch_set(key, [arena.view(0, 1000)]))[0]
    ok, error, loaded = demux.wait(connector.submit_batch_get(key, [arena.view(1)]))
    assert not ok and loaded == [False] and "fewer than its buffer" in error


def test_a_wrong_endpoint_fails_construction_with_the_reason():
    with pytest.raises(Exception, match="no-agent-here"):
        FerryL2Connector(endpoint="unix:no-agent-here", connect_timeout=0.2)


def test_the_agent_dies_and_comes_back_on_the_same_fd(tmp_path):
    agent = AgentProcess(tmp_path, ["dram:64MiB"])
    c = FerryL2Connector(endpoint=agent.endpoint, retry_interval=0.2)
    fd = c.event_fd()
    demux = Demux(c)
    arena = L1Arena(4)
    arena.array[0] = 3
    key = keys_for(1)
    assert demux.wait(c.submit_batch_set(key, [arena.view(0)]))[0]
    agent.kill()
    ok, error, found = demux.wait(c.submit_batch_exists(key))
    assert not ok and found is None and error
    ok, error, loaded = demux.wait(c.submit_batch_get(key, [arena.view(1)]))
    assert not ok and loaded == [False]
    # The agent restarts at the same endpoint, empty: the connector reconnects
    # (after retry_interval) and LMCache's poller still watches the same fd.
    agent2 = AgentProcess(tmp_path, ["dram:64MiB"], endpoint=agent.endpoint)
    try:
        time.sleep(0.3)
        assert demux.wait(c.submit_batch_set(key, [arena.view(0)]))[0]
        ok, _, loaded = demux.wait(c.submit_batch_get(key, [arena.view(2)]))
        assert ok and loaded == [True] and (arena.array[2] == 3).all()
        assert c.event_fd() == fd
    finally:
        c.close()
        agent2.stop()
