"""ferry.lmcache_inprocess under the real LMCache 0.5.6, in its in-process mode:
FerryRemoteConnector is built by LMCache's own plugin loader from the
remote_storage_plugins config, over a real LocalCPUBackend (its pinned CPU
pool) and an asyncio loop running in a thread, as LMCache runs it, and then
driven both directly and through LMCache's RemoteBackend. Runs where lmcache
and torch are installed (the GPU machine: scripts/device/lmcache-check.sh).

What each step relies on, in lmcache/ (0.5.6):
- v1/storage_backend/connector/__init__.py:358-423: CreateConnector (ConnectorManager,
  :260-346 the plugin launcher, :201-211 cls(loop=, local_cpu_backend=, config=)),
  wrapped in InstrumentedRemoteConnector (instrumented_connector.py:16-85).
- v1/storage_backend/remote_backend.py:28-67, 145-152: RemoteBackend(config, metadata, loop,
  local_cpu_backend, plugin_name=) calls CreateConnector with url plugin://<name>, as
  v1/storage_backend/__init__.py:259-271 does for each name in remote_storage_plugins.
- v1/config_base.py:350-366: LMCacheEngineConfig.from_defaults(**fields); fields in v1/config.py
  (chunk_size :90, local_cpu :91, max_local_cpu_size :96, remote_serde :119, extra_config :378,
  remote_storage_plugins :451).
- v1/metadata.py:19-73: LMCacheMetadata(model_name, world_size, local_world_size, worker_id,
  local_worker_id, kv_dtype, kv_shape=(num_layers, 2, chunk_size, num_kv_heads, head_size)).
- v1/storage_backend/local_cpu_backend.py:49-55: LocalCPUBackend(config, metadata) allocates its
  own pinned pool; :644-651 allocate(shapes, dtypes, fmt); :981 close().
- utils.py:418-475: CacheEngineKey(model_name, world_size, worker_id, chunk_hash, dtype).
"""

import asyncio
import threading

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("lmcache")

from lmcache.utils import CacheEngineKey  # noqa: E402
from lmcache.v1.config import LMCacheEngineConfig  # noqa: E402
from lmcache.v1.memory_management import MemoryFormat  # noqa: E402
from lmcache.v1.metadata import LMCacheMetadata  # noqa: E402
from lmcache.v1.storage_backend.connector import CreateConnector  # noqa: E402
from lmcache.v1.storage_backend.local_cpu_backend import LocalCPUBackend  # noqa: E402
from lmcache.v1.storage_backend.remote_backend import RemoteBackend  # noqa: E402

from ferry.lmcache_inprocess import FerryRemoteConnector  # noqa: E402

PLUGIN = "ferry"
PREFIX = "pytest-inprocess/"
MODEL = "ferry/inprocess-pytest"
KV_SHAPE = (2, 2, 256, 8, 128)  # (num_layers, 2, chunk_size, num_kv_heads, head_size): a 2 MiB bf16 chunk
TIMEOUT = 30


class LMCacheSide:
    """What LMCache's storage manager holds when it creates its remote backends."""

    def __init__(self, endpoint):
        self.endpoint = endpoint
        self.config = LMCacheEngineConfig.from_defaults(
            chunk_size=256,
            local_cpu=True,
            max_local_cpu_size=0.25,  # GB
            remote_serde="naive",
            remote_storage_plugins=[PLUGIN],
            extra_config={
                f"remote_storage_plugin.{PLUGIN}.module_path": "ferry.lmcache_inprocess",
                f"remote_storage_plugin.{PLUGIN}.class_name": "FerryRemoteConnector",
                f"remote_storage_plugin.{PLUGIN}.endpoint": endpoint,
                f"remote_storage_plugin.{PLUGIN}.key_prefix": PREFIX,
            },
        )
        self.metadata = LMCacheMetadata(model_name=MODEL, world_size=1, local_world_size=1, worker_id=0,
                                        local_worker_id=0, kv_dtype=torch.bfloat16, kv_shape=KV_SHAPE)
        self.backend = LocalCPUBackend(config=self.config, metadata=self.metadata)
        # LMCache's own tests run the loop so (tests/v1/utils.py:180-184 in the sdist).
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro):
        """As RemoteBackend does: the coroutine runs on LMCache's loop, the caller waits."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=TIMEOUT)

    def chunk(self, seed):
        """A full chunk from the pool, in the geometry RemoteConnector gives every remote chunk
        (base_connector.py:60-64, metadata.py:87-115: [2, layers, tokens, heads*head_size], KV_2LTD),
        filled with random bytes. raw_data is a uint8 slice of the pool
        (tensor_memory_allocator.py:105-124, memory_management.py:617-619)."""
        obj = self.backend.allocate(self.metadata.get_shapes(), self.metadata.get_dtypes(), MemoryFormat.KV_2LTD)
        assert obj is not None
        n = obj.get_size()
        payload = torch.randint(0, 256, (n,), dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))
        obj.raw_data.view(torch.uint8)[:n].copy_(payload)
        return obj, payload

    def live_chunks(self):
        """Buffers handed out by the pool and not yet returned
        (mixed_memory_allocator.py:82-84, tensor_memory_allocator.py:96, 212)."""
        return self.backend.memory_allocator.pin_allocator.num_active_allocations

    def close(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        if not self.thread.is_alive():
            self.loop.close()
        self.backend.close()


@pytest.fixture
def lmcache_side(agent_process):
    side = LMCacheSide(agent_process.endpoint)
    yield side
    side.close()


def key(i):
    return CacheEngineKey(model_name=MODEL, world_size=1, worker_id=0, chunk_hash=0xF0E00 + i, dtype=torch.bfloat16)


def holds(obj, payload):
    return torch.equal(obj.raw_data.view(torch.uint8)[:payload.numel()], payload)


def test_connector_from_lmcache_plugin_loader(lmcache_side, agent):
    s = lmcache_side
    keys = [key(i) for i in range(4)]
    missing = key(999)
    chunks = [s.chunk(seed=i) for i in range(4)]
    for obj, _ in chunks:
        obj.ref_count_up()  # put drops one reference (instrumented_connector.py:27-34); this test keeps the chunks
    # As RemoteBackend.init_connection does (remote_backend.py:145-152).
    connector = CreateConnector(f"plugin://{PLUGIN}", s.loop, s.backend, s.config, s.metadata, plugin_name=PLUGIN)
    try:
        inner = connector.getWrappedConnector()
        assert isinstance(inner, FerryRemoteConnector)
        assert (inner.plugin_name, inner.endpoint, inner.key_prefix) == (PLUGIN, s.endpoint, PREFIX)

        s.run(connector.put(keys[0], chunks[0][0]))
        s.run(connector.batched_put(keys[1:], [obj for obj, _ in chunks[1:]]))
        assert [obj.get_ref_count() for obj, _ in chunks] == [1] * 4
        stripes = [f"{PREFIX}{k.to_string()}#{i}/{inner.stripes}" for k in keys for i in range(inner.stripes)]
        assert inner.stripes == 2 and agent.exists(stripes) == [True] * len(stripes)  # each chunk as its stripes

        for k in keys:
            assert s.run(connector.exists(k))
            assert connector.exists_sync(k)
        assert not s.run(connector.exists(missing))
        assert not connector.exists_sync(missing)
        assert connector.batched_contains(keys[:2] + [missing] + keys[2:]) == 2
        assert s.run(connector.batched_async_contains("lookup-1", keys + [missing])) == 4

        live = s.live_chunks()
        for k, (obj, payload) in zip(keys, chunks):
            got = s.run(connector.get(k))
            assert got is not None
            assert got.data_ptr != obj.data_ptr  # read into a buffer of its own, not the one put
            assert holds(got, payload)
            got.ref_count_down()
        assert s.run(connector.get(missing)) is None
        assert s.live_chunks() == live  # the miss gave its buffer back

        got = s.run(connector.batched_get([keys[0], missing, keys[3]]))
        assert got[1] is None
        assert holds(got[0], chunks[0][1]) and holds(got[2], chunks[3][1])
        got[0].ref_count_down()
        got[2].ref_count_down()

        got = s.run(connector.batched_get_non_blocking("lookup-2", [keys[1], keys[2], missing, keys[3]]))
        assert len(got) == 2  # the hits before the first miss
        assert holds(got[0], chunks[1][1]) and holds(got[1], chunks[2][1])
        for obj in got:
            obj.ref_count_down()
        assert s.live_chunks() == live

        assert {k.to_string() for k in keys} <= set(s.run(connector.list()))

        assert connector.remove_sync(keys[0])
        assert not connector.exists_sync(keys[0])
        assert s.run(connector.get(keys[0])) is None
        assert not connector.remove_sync(keys[0])
        assert s.run(connector.exists(keys[1]))
    finally:
        s.run(connector.close())
        for obj, _ in chunks:
            obj.ref_count_down()


def test_remote_backend_over_ferry(lmcache_side):
    s = lmcache_side
    # As CreateStorageBackends makes one per plugin name (storage_backend/__init__.py:259-271).
    backend = RemoteBackend(s.config, s.metadata, s.loop, s.backend, plugin_name=PLUGIN)
    assert backend.connection is not None, "LMCache could not create the Ferry connector (see its log)"
    assert isinstance(backend.connection.getWrappedConnector(), FerryRemoteConnector)
    k, missing = key(10), key(998)
    obj, payload = s.chunk(seed=10)
    closer = threading.Thread(target=backend.close, daemon=True)
    try:
        backend.submit_put_task(k, obj).result(timeout=TIMEOUT)
        assert obj.get_ref_count() == 1
        assert backend.contains(k)
        assert not backend.contains(missing)

        got = backend.get_blocking(k)
        assert got is not None and holds(got, payload)
        got.ref_count_down()
        assert backend.get_blocking(missing) is None

        got = backend.batched_get_blocking([k, missing])
        assert got[1] is None and holds(got[0], payload)
        got[0].ref_count_down()

        assert backend.remove(k)
        assert not backend.contains(k)
    finally:
        # RemoteBackend.close waits on connection.close() with no time limit (remote_backend.py:616-624).
        closer.start()
        closer.join(timeout=TIMEOUT)
        obj.ref_count_down()
    assert not closer.is_alive(), "RemoteBackend.close did not return"
