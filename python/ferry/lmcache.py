"""An L2 adapter for LMCache's multiprocess mode, loaded by configuration alone:

    lmcache server ... --l2-adapter '{"type": "native_plugin",
        "module_path": "ferry.lmcache", "class_name": "FerryL2Connector",
        "adapter_params": {"endpoint": "unix:ferry.agent"}}'

LMCache 0.5.6 builds the object with adapter_params as keywords
(native_plugin_l2_adapter.py:148) and then calls only the methods below
(native_connector_l2_adapter.py): submit_* from its store and prefetch threads,
drain_completions() from its demux thread once poll() finds event_fd()
readable. docs/lmcache.md has the whole contract.

Chunks move between LMCache's L1 buffer and the agent without a copy in this
process: the first chunk seen in a mapping registers the whole mapping, and
every later chunk in it is only a descriptor. The agent reaches an L1 pool in
POSIX shm (LMCache's default) through the file, other host memory by
cross-memory attach, GPU memory by CUDA IPC. A chunk that is missing,
fails its checksum, or is shorter than its buffer is a miss, never data.

Each chunk is stored as `stripes` objects (KEY#i/n), so that the agent's
lanes write and read one chunk at once: a file tier's buffered writes to one
file take its lock in turn. A chunk counts only when every stripe does.
"""

from __future__ import annotations

import itertools
import os
import re
import threading
import time
from typing import List, NamedTuple, Optional, Tuple

import ferry
from ferry import _ferry

__all__ = ["FerryL2Connector"]

Completion = Tuple[int, bool, str, Optional[List[bool]]]

# The end of a stripe's key, "#i/n", as a connector with stripes=n (2 or more) names it.
_STRIPE = re.compile(r"(0|[1-9][0-9]*)/([2-9]|[1-9][0-9]+)")

# A transfer that ends with one of these lost its agent: reconnect next time.
_SESSION_LOST = (ferry.Status.UNAVAILABLE, ferry.Status.CANCELLED, ferry.Status.PROTOCOL_ERROR)


class Mapping(NamedTuple):
    start: int
    length: int
    path: str         # the file it maps ("" for anonymous memory)
    file_offset: int  # of its first byte in that file


def mapping_of(addr: int, length: int) -> Mapping:
    """The mapping in /proc/self/maps that holds [addr, addr + length), joined
    with the mappings that continue it (the same file at following offsets)."""
    spans = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(None, 5)
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            path = fields[5].strip() if len(fields) > 5 else ""
            spans.append((lo, hi, path, int(fields[2], 16)))
    for i, (lo, hi, path, offset) in enumerate(spans):
        if lo <= addr < hi:
            end, j = hi, i + 1
            while end < addr + length and j < len(spans) and spans[j][0] == end and spans[j][2] == path and \
                    (not path or spans[j][3] == offset + (end - lo)):
                end, j = spans[j][1], j + 1
            if end >= addr + length:
                return Mapping(lo, end - lo, path, offset)
            break
    raise ferry.Error(f"{length} bytes at {addr:#x} are not mapped in this process")


class FerryL2Connector:
    """LMCache's native connector contract over ``ferry agent``.

    adapter_params:
      endpoint         the agent: "unix:NAME" or "tcp:HOST:PORT" (default unix:ferry.agent)
      key_prefix       put before every LMCache key, to keep caches apart (default "")
      connect_timeout  seconds for one connection attempt (default 1)
      retry_interval   once the agent is lost, seconds between reconnection attempts;
                       calls in between fail at once rather than stall LMCache (default 1)
      stripes          objects per chunk, written and read at once by the agent's lanes;
                       1 stores each chunk whole, under LMCache's key (default 2).
                       Chunks stored with another count are misses.
    """

    def __init__(self, endpoint: str = "unix:ferry.agent", key_prefix: str = "", connect_timeout: float = 1.0,
                 retry_interval: float = 1.0, name: str = "lmcache", stripes: int = 2):
        if isinstance(stripes, bool) or not isinstance(stripes, int) or not 1 <= stripes <= 64:
            raise ValueError(f"stripes must be a whole number from 1 to 64, not {stripes!r}")
        self._stripes = stripes
        self._endpoint = endpoint
        self._prefix = key_prefix
        self._connect_timeout = float(connect_timeout)
        self._retry_interval = float(retry_interval)
        self._name = name
        self._ids = itertools.count(1)  # future ids: one sequence for every kind of operation
        self._lock = threading.Lock()   # submits come from two LMCache threads, drains from a third
        self._done: List[Completion] = []
        self._pending = {}  # agent request id -> (future id, Transfer)
        self._regions: List[Tuple[int, int, bool]] = []  # (start, end, on_gpu), this session's
        self._agent: Optional[ferry.Agent] = None
        self._lost_at = 0.0
        self._lost_reason = ""
        self._efd = -1
        self._closed = False
        self._session()  # a bad endpoint fails LMCache's start-up, with the reason

    # -- the contract -------------------------------------------------------
    def event_fd(self) -> int:
        """The agent's eventfd, raised when a transfer finishes. It keeps its
        number across reconnections (dup2), since LMCache polls one fd for life."""
        return self._efd

    def submit_batch_set(self, keys: List[str], memoryviews: List[memoryview]) -> int:
        return self._transfer(ferry.Op.WRITE, keys, memoryviews)

    def submit_batch_get(self, keys: List[str], memoryviews: List[memoryview]) -> int:
        return self._transfer(ferry.Op.READ, keys, memoryviews)

    def submit_batch_exists(self, keys: List[str]) -> int:
        return self._per_key(keys, ferry.Agent.exists)

    def submit_batch_delete(self, keys: List[str]) -> int:
        return self._per_key(keys, ferry.Agent.delete)

    def drain_completions(self) -> List[Completion]:
        try:
            os.eventfd_read(self._efd)  # LMCache never reads it: reset it before collecting
        except (BlockingIOError, OSError):
            pass
        with self._lock:
            self._collect()
            out, self._done = self._done, []
        return out

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            agent, self._agent = self._agent, None
        if agent is not None:
            agent.close()  # waits for posted transfers: LMCache's buffers are not written after close
        if self._efd >= 0:
            os.close(self._efd)
            self._efd = -1

    # -- the session ----------------------------------------------------------
    def _session(self) -> ferry.Agent:
        """The live agent; reconnects if it was lost, at most once a retry_interval."""
        if self._agent is not None:
            return self._agent
        if self._closed:
            raise ferry.Error("the Ferry connector is closed")
        if self._lost_at and time.monotonic() - self._lost_at < self._retry_interval:
            raise ferry.Error(f"ferry agent at {self._endpoint} unavailable: {self._lost_reason}")
        try:
            agent = ferry.Agent(self._endpoint, name=self._name, connect_timeout=self._connect_timeout)
        except ferry.Error as e:
            self._lost_at, self._lost_reason = time.monotonic(), str(e)
            raise
        if self._efd < 0:
            self._efd = os.dup(agent.fileno())
        else:
            os.dup2(agent.fileno(), self._efd)
            self._raise()  # whatever completed while the old fd was in place gets drained
        self._agent = agent
        self._regions = []
        return agent

    def _lose(self, reason: str) -> None:
        """Forgets a session whose agent went away; its posted transfers are
        answered (the client fails them when the socket closes)."""
        agent, self._agent = self._agent, None
        self._lost_at, self._lost_reason = time.monotonic(), reason
        if agent is None:
            return
        for _, (fid, transfer) in list(self._pending.items()):
            agent._live().wait(transfer.request, 2000)
            self._done.append(self._completion(fid, transfer))
        self._pending.clear()
        agent.close()
        self._raise()

    def _raise(self) -> None:
        try:
            os.eventfd_write(self._efd, 1)
        except OSError:
            pass  # closed under us

    # -- operations -------------------------------------------------------------
    def _transfer(self, op: ferry.Op, keys: List[str], views: List[memoryview]) -> int:
        fid = next(self._ids)
        with self._lock:
            try:
                agent = self._session()
                if len(keys) != len(views):
                    raise ValueError(f"{len(keys)} keys but {len(views)} buffers")
                pieces = [piece for v in views for piece in self._stripes_of(v)]
                memories = [_ferry.Memory(v, op == ferry.Op.READ) for v in pieces]
                for m in memories:
                    self._ensure_registered(agent, m)
                transfer = agent._post_memories(op, self._agent_keys(keys), memories, "")
            except (ferry.Error, ValueError, TypeError, OSError) as e:
                self._done.append((fid, False, str(e), [False] * len(keys)))
                self._raise()
                return fid
            self._pending[transfer.request] = (fid, transfer)
            if transfer._final is not None:  # failed at post: the agent is gone
                self._collect()
        return fid

    def _per_key(self, keys: List[str], call) -> int:
        fid = next(self._ids)
        with self._lock:
            try:
                answers = call(self._session(), self._agent_keys(keys))
                self._done.append((fid, True, "", self._per_chunk(list(answers))))
            except ferry.Error as e:
                if self._agent is not None:
                    self._lose(str(e))
                self._done.append((fid, False, str(e), None))
            self._raise()
        return fid

    # -- stripes ------------------------------------------------------------------
    def _agent_keys(self, keys: List[str]) -> List[str]:
        """The agent's keys for LMCache's, every chunk's stripes in order."""
        n = self._stripes
        if n == 1:
            return [self._prefix + k for k in keys]
        return [f"{self._prefix}{k}#{i}/{n}" for k in keys for i in range(n)]

    def chunk_keys(self, agent_keys: List[str]) -> List[str]:
        """LMCache's keys for the chunks among the agent's keys (as list()
        returns them) whose stripes are all there, in the order first seen."""
        n, found = self._stripes, {}
        names = {f"{i}/{n}": i for i in range(n)}
        for key in agent_keys:
            if not key.startswith(self._prefix):
                continue
            key = key[len(self._prefix):]
            chunk, _, stripe = key.rpartition("#")
            if n == 1:
                if not (chunk and _STRIPE.fullmatch(stripe)):  # a stripe stored with another count: no chunk
                    found[key] = {0}
                continue
            if chunk and stripe in names:
                found.setdefault(chunk, set()).add(names[stripe])
        return [chunk for chunk, stripes in found.items() if len(stripes) == n]

    def _per_chunk(self, per_object: List[bool]) -> List[bool]:
        """A chunk's answer from its stripes': true only when all of theirs are."""
        n = self._stripes
        return [all(per_object[i:i + n]) for i in range(0, len(per_object), n)]

    def _stripes_of(self, view: memoryview) -> List[memoryview]:
        """The chunk's buffer cut into its stripes, without a copy: equal parts,
        of whole pages where every part still gets some of the chunk."""
        n, size = self._stripes, view.nbytes
        if n == 1:
            return [view]
        if size < n:
            raise ValueError(f"a chunk of {size} bytes cannot be cut into {n} stripes")
        flat = view.cast("B") if view.format != "B" or view.ndim != 1 else view
        part = -(-size // (n * 4096)) * 4096
        if (n - 1) * part < size:
            return [flat[i * part:min(size, (i + 1) * part)] for i in range(n)]
        q, r = divmod(size, n)
        bounds = [i * q + min(i, r) for i in range(n + 1)]
        return [flat[bounds[i]:bounds[i + 1]] for i in range(n)]

    def _ensure_registered(self, agent: ferry.Agent, memory: _ferry.Memory) -> None:
        lo, hi = memory.addr, memory.addr + memory.nbytes
        for start, end, on_gpu in self._regions:
            if start <= lo and hi <= end and on_gpu == memory.on_gpu:
                return
        if memory.on_gpu:  # the agent opens the whole cudaMalloc allocation anyway
            agent._live().register_range(lo, memory.nbytes, True)
            self._regions.append((lo, hi, True))
            return
        m = mapping_of(lo, memory.nbytes)
        native = agent._live()
        # LMCache's multiprocess mode keeps its L1 pool in POSIX shm: the agent
        # then reads and writes the file itself (pread/pwrite), faster than
        # cross-memory attach. Anonymous memory, or a file it cannot open, goes
        # by cross-memory attach.
        if m.path.startswith("/dev/shm/") and not m.path.endswith(" (deleted)"):
            try:
                fd = os.open(m.path, os.O_RDWR | os.O_CLOEXEC)
            except OSError:
                fd = -1
            if fd >= 0:
                try:
                    native.register_shared_file(m.start, m.length, fd, m.file_offset)
                finally:
                    os.close(fd)
                self._regions.append((m.start, m.start + m.length, False))
                return
        native.register_range(m.start, m.length, False)
        self._regions.append((m.start, m.start + m.length, False))

    def _collect(self) -> None:
        """Moves finished transfers to the completion list (under the lock)."""
        agent = self._agent
        if agent is None:
            return
        # Clear the agent's notifications (and its eventfd) before reading the
        # transfers' states: a transfer that finishes after its state was read
        # raises the eventfd again, so LMCache's poll wakes for it. The other
        # order loses that wake-up and leaves the future pending for ever.
        agent._live().get_notifs()
        lost = None
        for request, (fid, transfer) in list(self._pending.items()):
            if transfer.done():
                del self._pending[request]
                self._done.append(self._completion(fid, transfer))
                if transfer.status in _SESSION_LOST:
                    lost = transfer.results()[0].error or transfer.status.name
                else:
                    self._drop_stray_stripes(agent, transfer)
        if lost is not None:
            self._lose(lost)

    def _drop_stray_stripes(self, agent: ferry.Agent, transfer: ferry.Transfer) -> None:
        """Removes the stored stripes of chunks whose store failed in part (a
        full tier took some of their stripes, not all). They are no chunk, and
        LMCache, told that the store failed, would never delete them."""
        n = self._stripes
        if n == 1 or transfer.op != ferry.Op.WRITE or transfer.status == ferry.Status.OK:
            return
        stored = [r.status == ferry.Status.OK for r in transfer.results()]
        stray = []
        for i in range(0, len(stored), n):
            if any(stored[i:i + n]) and not all(stored[i:i + n]):
                stray += [key for key, ok in zip(transfer.keys[i:i + n], stored[i:i + n]) if ok]
        if stray:
            try:
                agent.delete(stray)
            except ferry.Error:
                pass  # the agent went away; the next call finds out and reconnects

    def _completion(self, fid: int, transfer: ferry.Transfer) -> Completion:
        """(future id, ok, error, per-chunk success). A get's chunk counts only
        when its whole buffer was filled with verified bytes, every stripe's."""
        if not transfer.done():
            return fid, False, "the agent did not answer", [False] * (len(transfer.keys) // self._stripes)
        results = transfer.results()
        reading = transfer.op == ferry.Op.READ
        per_object = [r.status == ferry.Status.OK and (not reading or r.size == n)
                      for r, n in zip(results, transfer.sizes)]
        failed = next((r for r in results if r.status != ferry.Status.OK), None)
        if failed is not None:
            error = failed.error or f"'{failed.key}': {failed.status.name}"
        elif not all(per_object):
            short = next(r for r, ok in zip(results, per_object) if not ok)
            error = f"'{short.key}' holds {short.size} bytes, fewer than its buffer"
        else:
            error = ""
        return fid, all(per_object), error, self._per_chunk(per_object)
