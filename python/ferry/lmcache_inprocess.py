"""A remote storage plugin for LMCache's in-process (non-multiprocess) mode, loaded by configuration alone:

    chunk_size: 256
    local_cpu: true
    max_local_cpu_size: 5            # the remote backend stages every chunk in the local CPU pool
    remote_serde: naive
    remote_storage_plugins: ["ferry"]
    extra_config:
      remote_storage_plugin.ferry.module_path: ferry.lmcache_inprocess
      remote_storage_plugin.ferry.class_name: FerryRemoteConnector
      remote_storage_plugin.ferry.endpoint: unix:ferry.agent     # or tcp:HOST:PORT
      remote_storage_plugin.ferry.key_prefix: ""                 # optional, put before every key
      remote_storage_plugin.ferry.connect_timeout: 1             # optional, seconds
      remote_storage_plugin.ferry.retry_interval: 1              # optional, seconds
      remote_storage_plugin.ferry.stripes: 2                     # optional, objects per chunk

LMCache 0.5.6 makes one RemoteBackend per name in remote_storage_plugins
(storage_backend/__init__.py:259-271); its plugin launcher imports module_path,
finds class_name is a RemoteConnector and builds it as
cls(loop=, local_cpu_backend=, config=) (connector/__init__.py:276-322, 201-211).
FerryRemoteConnector reads its parameters from extra_config under its own
instance name (any name; one instance per engine, since LMCache tells a
RemoteConnector no instance name) and drives ferry.lmcache.FerryL2Connector through
LMCache's own eventfd client (ConnectorClientBase), so chunks move between
LMCache's pinned CPU pool and the agent without a copy in this process. Keys
are CacheEngineKey.to_string() behind key_prefix. A chunk that is missing,
fails its checksum, is shorter than a full chunk, or cannot be read because the
agent is gone is a miss (get returns None, its buffer goes back to the pool),
never data; so keep save_unfull_chunk false and remote_serde naive (both
LMCache's defaults), or partial and compressed chunks are stored but always
miss. list() returns the chunks under key_prefix whose stripes are all there
(every chunk the agent holds when the prefix is empty). An unreachable agent at start-up makes
LMCache log the reason and run without this backend (remote_backend.py:156-161).
"""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

from lmcache.logging import init_logger
from lmcache.v1.storage_backend.connector.base_connector import RemoteConnector
from lmcache.v1.storage_backend.native_clients.connector_client_base import ConnectorClientBase

import ferry
from ferry.lmcache import FerryL2Connector

if TYPE_CHECKING:
    from lmcache.utils import CacheEngineKey
    from lmcache.v1.memory_management import MemoryObj
    from lmcache.v1.storage_backend.local_cpu_backend import LocalCPUBackend

__all__ = ["FerryRemoteConnector", "FerryClient"]

logger = init_logger(__name__)

DEFAULT_PLUGIN_NAME = "ferry"
DEFAULT_ENDPOINT = "unix:ferry.agent"


class _GetsKeepPerKey:
    """FerryL2Connector as ConnectorClientBase sees it, except that a get
    completes with ok=True and its per-key bools wait here for FerryClient.
    ConnectorClientBase keeps only `ok` of a get and raises when it is False
    (connector_client_base.py:50-64), so one missing key would cost a whole
    batch; with the bools, every key that was filled is a hit."""

    def __init__(self, native: FerryL2Connector):
        self.native = native
        self._lock = threading.Lock()
        self._gets: Dict[int, int] = {}           # a get in flight: future id -> number of keys
        self._filled: Dict[int, List[bool]] = {}  # a finished get: future id -> which keys were filled

    def event_fd(self) -> int:
        return self.native.event_fd()

    def submit_batch_get(self, keys: List[str], views: List[memoryview]) -> int:
        with self._lock:  # its completion must not be drained before it is known to be a get
            fid = self.native.submit_batch_get(keys, views)
            self._gets[fid] = len(keys)
        return fid

    def submit_batch_set(self, keys: List[str], views: List[memoryview]) -> int:
        return self.native.submit_batch_set(keys, views)

    def submit_batch_exists(self, keys: List[str]) -> int:
        return self.native.submit_batch_exists(keys)

    def submit_batch_delete(self, keys: List[str]) -> int:
        return self.native.submit_batch_delete(keys)

    def drain_completions(self):
        out = []
        with self._lock:
            for fid, ok, error, per_key in self.native.drain_completions():
                n = self._gets.pop(fid, None)
                if n is None:
                    out.append((fid, ok, error, per_key))
                    continue
                if per_key is not None and len(per_key) == n:
                    self._filled[fid] = [bool(b) for b in per_key]
                else:
                    self._filled[fid] = [bool(ok)] * n
                if not ok:
                    logger.debug("Ferry get missed: %s", error)
                out.append((fid, True, "", None))
        return out

    def take(self, fid: int, n: int) -> List[bool]:
        """Which keys of get `fid` were filled (none, if it has not finished);
        forgets the get either way."""
        with self._lock:
            self._gets.pop(fid, None)
            return self._filled.pop(fid, None) or [False] * n

    def close(self) -> None:
        self.native.close()


class FerryClient(ConnectorClientBase):
    """LMCache's client for a native connector (connector_client_base.py:10-165)
    over FerryL2Connector, as RESPClient is over LMCacheRedisClient
    (resp_client.py:19-35), with four changes:

    - batch_get_filled: which keys a get filled; batch_get still raises unless all were.
    - batch_delete: the base class has none.
    - the *_sync methods run the async ones on the loop. The base class submits
      from the calling thread and registers the future afterwards
      (connector_client_base.py:139-156); Ferry answers exists and delete inside
      the submit call, so the loop thread could drain the answer before the
      future exists, and the caller would wait forever.
    - once closed, an operation fails at once instead of waiting on an eventfd
      nobody reads.
    """

    def __init__(self, native: FerryL2Connector, loop: asyncio.AbstractEventLoop):
        super().__init__(_GetsKeepPerKey(native), loop)

    def _register_future_async(self, op: str, future_id: int, keepalive=()) -> asyncio.Future:
        fut = super()._register_future_async(op, future_id, keepalive)
        if self._closed:
            self._pending.pop(int(future_id), None)
            fut.set_exception(RuntimeError("the Ferry connector is closed"))
        return fut

    async def batch_get_filled(self, keys: List[str], bufs: List[memoryview],
                               keepalive: Sequence[Any] = ()) -> List[bool]:
        """Reads keys into bufs; per key, whether its buffer was filled with
        verified bytes. `keepalive` (the MemoryObjs) is held until the agent is
        done with the buffers, even when the caller is cancelled."""
        fid = int(self._client.submit_batch_get(keys, bufs))
        fut = self._register_future_async("batch_get", fid, (keys, tuple(bufs), tuple(keepalive)))
        try:
            await fut
        finally:
            filled = self._client.take(fid, len(keys))
        return filled

    async def batch_get(self, keys: List[str], bufs: List[memoryview]) -> None:
        filled = await self.batch_get_filled(keys, bufs)
        if not all(filled):
            raise RuntimeError(f"{filled.count(False)} of {len(keys)} keys missed")

    async def batch_delete(self, keys: List[str]) -> List[bool]:
        """Removes keys; per key, whether it existed."""
        fid = int(self._client.submit_batch_delete(keys))
        # "batch_exists" is the op whose per-key bools _on_ready hands back
        # (connector_client_base.py:56-60); a delete answers the same way.
        return await self._register_future_async("batch_exists", fid)

    def _on_loop(self, coro):
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            coro.close()
            raise RuntimeError("a synchronous Ferry call on the event loop's own thread would never return")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def batch_get_sync(self, keys: List[str], bufs: List[memoryview]) -> None:
        return self._on_loop(self.batch_get(keys, bufs))

    def batch_set_sync(self, keys: List[str], bufs: List[memoryview]) -> None:
        return self._on_loop(self.batch_set(keys, bufs))

    def batch_exists_sync(self, keys: List[str]) -> List[bool]:
        return self._on_loop(self.batch_exists(keys))

    def batch_delete_sync(self, keys: List[str]) -> List[bool]:
        return self._on_loop(self.batch_delete(keys))


def _view(memory_obj: "MemoryObj") -> memoryview:
    # As RESPConnector (redis_connector.py:85-87, 98-100): byte_array is the chunk's logical bytes.
    buf = memory_obj.byte_array
    return buf if isinstance(buf, memoryview) else memoryview(buf)


def _prefix_hits(found: Sequence[bool]) -> int:
    n = 0
    for hit in found:
        if not hit:
            break
        n += 1
    return n


class FerryRemoteConnector(RemoteConnector):
    """LMCache's RemoteConnector over `ferry agent` (see the module docstring).

    It subclasses RemoteConnector rather than RESPConnector, which wraps a
    native client the same way, because of what RESPConnector would bring along
    in LMCache 0.5.6: its __init__ builds a Redis client; its get and
    batched_get return the buffer even when the read failed, or raise and leak
    it (redis_connector.py:76-89, 136-155); its close awaits the synchronous
    AsyncPQExecutor.shutdown, which blocks the event loop on a coroutine it
    queues onto that same loop (redis_connector.py:232-234,
    pq_executor.py:125-130); and its executor loses a worker each time
    RemoteBackend cancels a get that timed out (pq_executor.py:78-87). Every
    method here is a call or two on FerryClient.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, local_cpu_backend: "LocalCPUBackend",
                 config: Optional[Any] = None, plugin_name: Optional[str] = None):
        # The keywords are DynamicConnectorAdapter's (connector/__init__.py:207-211).
        # Like RESPConnector (redis_connector.py:54), the chunk geometry (meta_shapes,
        # meta_dtypes, meta_fmt) comes from the local CPU backend's config and metadata.
        super().__init__(local_cpu_backend.config, local_cpu_backend.metadata)
        config = config if config is not None else local_cpu_backend.config
        self.plugin_name = plugin_name or self._find_plugin_name(config)
        extra = config.extra_config or {}

        def param(name: str, default):
            return extra.get(f"remote_storage_plugin.{self.plugin_name}.{name}", default)

        self.endpoint = str(param("endpoint", DEFAULT_ENDPOINT))
        self.key_prefix = str(param("key_prefix", "") or "")
        self.connect_timeout = float(param("connect_timeout", 1.0))
        self.retry_interval = float(param("retry_interval", 1.0))
        self.stripes = param("stripes", 2)  # FerryL2Connector refuses anything but a whole number from 1 to 64
        self.loop = loop
        self.local_cpu_backend = local_cpu_backend
        # Connects now: an unreachable agent fails here, and RemoteBackend logs why (remote_backend.py:156-161).
        self._native = FerryL2Connector(endpoint=self.endpoint, key_prefix=self.key_prefix,
                                        connect_timeout=self.connect_timeout, retry_interval=self.retry_interval,
                                        name=f"lmcache-{self.plugin_name}", stripes=self.stripes)
        self.client = FerryClient(self._native, loop)
        if getattr(config, "save_unfull_chunk", False):
            logger.warning("Ferry plugin %s: save_unfull_chunk is on, but a chunk shorter than a full one "
                           "always reads as a miss here", self.plugin_name)
        if getattr(config, "remote_serde", "naive") not in (None, "naive"):
            logger.warning("Ferry plugin %s: remote_serde %s stores chunks of another size than a full chunk, "
                           "which always read as misses here: use naive", self.plugin_name, config.remote_serde)
        logger.info("Ferry plugin %s: agent at %s, key prefix %r", self.plugin_name, self.endpoint, self.key_prefix)

    @classmethod
    def _find_plugin_name(cls, config) -> str:
        """The name in remote_storage_plugins whose extra_config names this class."""
        extra = config.extra_config or {}

        def ours(name: str) -> bool:
            module_path = extra.get(f"remote_storage_plugin.{name}.module_path")
            class_name = extra.get(f"remote_storage_plugin.{name}.class_name")
            if class_name != cls.__name__ or not module_path:
                return False
            return module_path == cls.__module__ or getattr(sys.modules.get(module_path), class_name, None) is cls

        names = [n for n in (config.remote_storage_plugins or []) if ours(n)]
        if len(names) == 1:
            return names[0]
        if names:
            # DynamicConnectorAdapter passes a RemoteConnector no instance name
            # (connector/__init__.py:207-211), so several instances cannot be told apart.
            raise ferry.Error(f"remote_storage_plugins names FerryRemoteConnector {len(names)} times ({names}): "
                              "use one instance; key_prefix keeps several caches apart in one agent")
        return DEFAULT_PLUGIN_NAME

    # -- RemoteConnector (base_connector.py:148-376) ---------------------------
    async def exists(self, key: "CacheEngineKey") -> bool:
        return (await self.client.batch_exists([key.to_string()]))[0]

    def exists_sync(self, key: "CacheEngineKey") -> bool:
        return self.client.batch_exists_sync([key.to_string()])[0]

    async def get(self, key: "CacheEngineKey") -> Optional["MemoryObj"]:
        return (await self._get_many([key]))[0]

    async def put(self, key: "CacheEngineKey", memory_obj: "MemoryObj") -> None:
        # The caller drops its reference afterwards (instrumented_connector.py:27-34).
        await self.client.batch_set([key.to_string()], [_view(memory_obj)])

    async def list(self) -> List[str]:
        """The agent's keys under key_prefix, without it ([] when the agent cannot be reached)."""
        def scan() -> List[str]:
            with ferry.Agent(self.endpoint, name=f"lmcache-{self.plugin_name}-list",
                             connect_timeout=self.connect_timeout) as agent:
                return self._native.chunk_keys([o.key for o in agent.list(self.key_prefix)])
        try:
            return await self.loop.run_in_executor(None, scan)
        except ferry.Error as e:
            logger.warning("Ferry plugin %s: list failed: %s", self.plugin_name, e)
            return []

    async def close(self) -> None:
        # connector_client_base.py:161-165: stops reading the eventfd, fails what is
        # pending, then FerryL2Connector.close waits for the agent to finish with
        # every buffer it was given. Both are idempotent; the second also closes
        # the connector when the client had already shut itself down.
        self.client.close()
        self._native.close()

    def support_batched_get(self) -> bool:
        return True

    async def batched_get(self, keys: List["CacheEngineKey"]) -> List[Optional["MemoryObj"]]:
        return await self._get_many(keys)

    def support_batched_put(self) -> bool:
        return True

    async def batched_put(self, keys: List["CacheEngineKey"], memory_objs: List["MemoryObj"]) -> None:
        if not keys:
            return
        await self.client.batch_set([k.to_string() for k in keys], [_view(m) for m in memory_objs])

    def support_batched_async_contains(self) -> bool:
        return True

    async def batched_async_contains(self, lookup_id: str, keys: List["CacheEngineKey"], pin: bool = False) -> int:
        if not keys:
            return 0
        return _prefix_hits(await self.client.batch_exists([k.to_string() for k in keys]))

    def support_batched_contains(self) -> bool:
        return True

    def batched_contains(self, keys: List["CacheEngineKey"]) -> int:
        if not keys:
            return 0
        return _prefix_hits(self.client.batch_exists_sync([k.to_string() for k in keys]))

    def support_batched_get_non_blocking(self) -> bool:
        return True

    async def batched_get_non_blocking(self, lookup_id: str, keys: List["CacheEngineKey"]) -> List["MemoryObj"]:
        # The hits before the first miss; the rest go back to the pool (base_connector.py:313-328).
        objs = await self._get_many(keys)
        hits = _prefix_hits([o is not None for o in objs])
        for obj in objs[hits:]:
            if obj is not None:
                obj.ref_count_down()
        return objs[:hits]  # type: ignore[return-value]

    def remove_sync(self, key: "CacheEngineKey") -> bool:
        """Whether the key existed (it is gone either way)."""
        return self.client.batch_delete_sync([key.to_string()])[0]

    # -- reads --------------------------------------------------------------------
    async def _get_many(self, keys: Sequence["CacheEngineKey"]) -> List[Optional["MemoryObj"]]:
        """One full-chunk buffer per key, as RESPConnector._get allocates it
        (redis_connector.py:78-82), filled in one batch. A key whose buffer was
        not filled in full with verified bytes gets None and its buffer back
        to the pool; any failure of the batch makes every key a miss."""
        # busy_loop=False: allocate() would otherwise sleep on this event-loop
        # thread until memory frees up (local_cpu_backend.py:714-732), and the
        # puts that would free it finish on this same loop. No room is a miss.
        objs = [self.local_cpu_backend.allocate(self.meta_shapes, self.meta_dtypes, self.meta_fmt, busy_loop=False)
                for _ in keys]
        wanted = [i for i, obj in enumerate(objs) if obj is not None]
        filled = [False] * len(keys)
        if wanted:
            try:
                got = await self.client.batch_get_filled([keys[i].to_string() for i in wanted],
                                                         [_view(objs[i]) for i in wanted],
                                                         keepalive=[objs[i] for i in wanted])
                for i, hit in zip(wanted, got):
                    filled[i] = hit
            except Exception as e:  # the agent lost, the client closed: a miss, never data
                logger.warning("Ferry plugin %s: get failed: %s", self.plugin_name, e)
        # A cancelled read leaves here by CancelledError and keeps its buffers:
        # the agent may still be writing them, so they are held (keepalive)
        # until it is done rather than handed out again.
        out: List[Optional["MemoryObj"]] = []
        for obj, hit in zip(objs, filled):
            if obj is not None and not hit:
                obj.ref_count_down()
                obj = None
            out.append(obj)
        return out

    def __repr__(self) -> str:
        return f"<FerryRemoteConnector {self.plugin_name} at {self.endpoint}>"
