"""Ferry's KV-cache offload from Python: the transfer API of ``ferry agent``.

    import numpy as np, ferry

    with ferry.Agent("unix:ferry.agent") as agent:
        kv = np.zeros((8, 1 << 20), dtype=np.uint8)
        agent.register(kv)                       # once; the agent reaches it in place
        agent.push(["k0", "k1"], [kv[0], kv[1]]).wait()
        agent.pull(["k0"], [kv[2]]).wait()       # raises ferry.XferError on a miss
        agent.exists(["k0", "nope"])             # [True, False]
        agent.delete(["k1"])                     # [True]

Buffers are anything with the buffer protocol (NumPy, memoryview, bytearray),
``__cuda_array_interface__`` (torch or CuPy on a GPU) or DLPack (torch on a
CPU), C-contiguous, taken without a copy. A buffer must lie inside memory
registered with ``Agent.register`` before it is pushed or pulled.

Every call that waits on the agent releases the GIL. ``Agent.fileno()`` is an
eventfd that becomes readable when a transfer finishes, for ``select`` and
``asyncio`` (``Agent.wait_async``). docs/python.md has the whole API.
"""

from __future__ import annotations

import asyncio
import enum
import json
import weakref
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence

from . import _ferry
from ._ferry import DescList, Error, ObjectInfo

__all__ = ["Agent", "DescList", "Error", "XferError", "Status", "Op", "Region", "Transfer", "Result", "ObjectInfo",
           "Notification"]


class Status(enum.IntEnum):
    """A transfer's status, as the C++ API's XferStatus: 0 done, 1 in progress, errors below 0."""
    OK = 0
    IN_PROGRESS = 1
    NOT_FOUND = -1
    INVALID_DESC = -2
    CHECKSUM_MISMATCH = -3
    NO_SPACE = -4
    UNAVAILABLE = -5
    IO_ERROR = -6
    TOO_LARGE = -7
    CANCELLED = -8
    PROTOCOL_ERROR = -9
    INTERNAL = -10


class Op(enum.IntEnum):
    WRITE = 0  # push: memory to storage
    READ = 1   # pull: storage to memory


class Result(NamedTuple):
    """How one descriptor of a transfer went."""
    key: str
    status: Status
    size: int   # bytes stored or read (a pulled object may be shorter than its buffer)
    tier: str   # where it was stored or found
    error: str  # why it failed, naming the key ("" when it did not)


class Notification(NamedTuple):
    request: int
    message: str
    status: Status


class XferError(Error):
    """A transfer that failed: ``status`` and ``key`` are its first failed
    descriptor's, ``results`` says how every descriptor went."""

    def __init__(self, message: str, status: Status, key: str, results: List[Result]):
        super().__init__(message)
        self.status = status
        self.key = key
        self.results = results


def _status(code: int) -> Status:
    try:
        return Status(code)
    except ValueError:
        return Status.INTERNAL


class Region:
    """Memory registered with the agent; deregistered by close() or ``with``.
    It holds the object's memory (and so the object) until then."""

    def __init__(self, agent: "Agent", memory: _ferry.Memory, region: _ferry.Region, obj: Any):
        self._agent = agent
        self._memory = memory
        self._region = region
        self.obj = obj

    @property
    def addr(self) -> int:
        return self._region.addr

    @property
    def nbytes(self) -> int:
        return self._region.len

    @property
    def on_gpu(self) -> bool:
        return self._region.on_gpu

    def close(self) -> None:
        if self._region is not None and self._agent._native is not None:
            self._agent._native.deregister_memory(self._region)
            self._agent._regions.discard(self)
        self._region = None
        self._memory = None
        self.obj = None

    def __enter__(self) -> "Region":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        where = "gpu" if self.on_gpu else "host"
        return f"<ferry.Region {self.nbytes} bytes of {where} memory at {self.addr:#x}>"


class Transfer:
    """A posted push or pull. It holds its buffers until it finishes: a
    transfer dropped unfinished is waited for, never abandoned, so the agent
    never writes into memory that was given back."""

    def __init__(self, agent: "Agent", op: Op, keys: List[str], memories: Any, req: int):
        self._agent = agent
        self.op = op
        self.keys = keys
        self._memories = memories  # a list of Memory, or a DescList
        self.sizes = list(memories.sizes) if isinstance(memories, DescList) else [m.nbytes for m in memories]
        self._req = req
        self._final: Optional[int] = None
        self._results: Optional[List[Result]] = None
        self._released = False

    @property
    def request(self) -> int:
        return self._req

    @property
    def status(self) -> Status:
        """IN_PROGRESS until the agent answers; then OK or the first descriptor's error."""
        if self._final is None:
            code = self._agent._live().status(self._req)
            if code != Status.IN_PROGRESS:
                self._finish(code)
            return _status(code)
        return _status(self._final)

    def done(self) -> bool:
        return self.status != Status.IN_PROGRESS

    def wait(self, timeout: Optional[float] = None) -> "Transfer":
        """Waits for the transfer (timeout in seconds; None: forever) and returns
        it. Raises XferError if any descriptor failed, and TimeoutError if it is
        still running at the timeout."""
        if self._final is None:
            ms = -1 if timeout is None else max(0, int(timeout * 1000))
            code = self._agent._live().wait(self._req, ms)
            if code == Status.IN_PROGRESS:
                raise TimeoutError(f"transfer of {len(self.keys)} keys still running after {timeout} s")
            self._finish(code)
        if self._final != Status.OK:
            self.results(check=True)
        return self

    def results(self, check: bool = False) -> List[Result]:
        """Per-descriptor results once done (raises XferError on a failure when check)."""
        if self._final is None and not self.done():
            raise Error("the transfer is still in progress: wait() for it first")
        if self._results is None:
            native = self._agent._live()
            self._results = [Result(k, _status(r.status), r.size, r.tier, r.error)
                             for k, r in zip(self.keys, native.results(self._req))]
            self._release()
        if check and self._final != Status.OK:
            failed = next((r for r in self._results if r.status != Status.OK), None)
            key = failed.key if failed else ""
            message = (failed.error if failed and failed.error else
                       f"{'push' if self.op == Op.WRITE else 'pull'} failed: {_status(self._final).name}")
            raise XferError(message, _status(self._final), key, self._results)
        return self._results

    def _finish(self, code: int) -> None:
        # A success's per-descriptor results are read only if asked for:
        # building them costs more than moving a 1 MiB block.
        self._final = code
        self._memories = []
        self._agent._transfers.pop(self._req, None)

    def _release(self) -> None:
        if not self._released and self._agent._native is not None:
            self._agent._native.release(self._req)
        self._released = True

    def __await__(self):
        return self._agent.wait_async(self).__await__()

    def __del__(self) -> None:
        try:
            if self._final is None and self._agent._native is not None:
                self._agent._native.wait(self._req, -1)
            self._release()
        except Exception:  # an agent already gone: nothing is left to hold or release
            pass

    def __repr__(self) -> str:
        return f"<ferry.Transfer {self.op.name} of {len(self.keys)} keys: {self.status.name}>"


class Agent:
    """A connection to ``ferry agent``. ``endpoint`` is ``unix:NAME`` or
    ``tcp:HOST:PORT``. Raises ferry.Error when the agent cannot be reached."""

    def __init__(self, endpoint: str = "unix:ferry.agent", *, name: str = "python", connect_timeout: float = 5.0):
        self._native: Optional[_ferry.Agent] = _ferry.Agent(endpoint, name, int(connect_timeout * 1000))
        self.endpoint = endpoint
        self._regions: set = set()
        # Weak: a Transfer dropped unfinished waits in __del__ (its buffers stay held till then).
        self._transfers: "weakref.WeakValueDictionary[int, Transfer]" = weakref.WeakValueDictionary()
        self._waiters: Dict[int, asyncio.Future] = {}
        self._reader_loop: Optional[asyncio.AbstractEventLoop] = None

    # -- set-up ------------------------------------------------------------
    @property
    def tiers(self) -> List[str]:
        """The agent's storage chain, top first ("dram", "file", "redis")."""
        return list(self._live().tiers)

    @property
    def backends(self) -> List[str]:
        return list(self._live().backends)

    def register(self, obj: Any) -> Region:
        """Registers an object's memory (host or GPU) so that buffers inside it
        can be pushed and pulled. Register large, long-lived memory once."""
        memory = _ferry.Memory(obj, False)
        region = Region(self, memory, self._live().register_memory(memory), obj)
        self._regions.add(region)
        return region

    # -- transfers ---------------------------------------------------------
    def push(self, keys: Sequence[str], buffers: Sequence[Any], *, notify: str = "") -> Transfer:
        """Stores buffers[i] under keys[i]; returns the posted Transfer.
        buffers may be a DescList, resolved once for transfers that repeat."""
        return self._post(Op.WRITE, keys, buffers, notify)

    def pull(self, keys: Sequence[str], buffers: Sequence[Any], *, notify: str = "") -> Transfer:
        """Reads keys[i] into buffers[i] (writable); returns the posted Transfer.
        A key that no tier holds, or whose bytes fail their checksum, fails
        with NOT_FOUND or CHECKSUM_MISMATCH: never stale or corrupt data."""
        return self._post(Op.READ, keys, buffers, notify)

    def _post(self, op: Op, keys: Sequence[str], buffers: Sequence[Any], notify: str) -> Transfer:
        keys = [keys] if isinstance(keys, str) else list(keys)
        if isinstance(buffers, DescList):
            if op == Op.READ and not buffers.writable:
                raise ValueError("a pull needs a DescList made with writable=True")
            memories = buffers
        else:
            memories = [_ferry.Memory(b, op == Op.READ) for b in buffers]
        if len(keys) != len(memories):
            raise ValueError(f"{len(keys)} keys but {len(memories)} buffers")
        return self._post_memories(op, keys, memories, notify)

    def _post_memories(self, op: Op, keys: List[str], memories: Any, notify: str) -> Transfer:
        native = self._live()
        descs = memories if isinstance(memories, DescList) else [(m.addr, m.nbytes) for m in memories]
        req = native.create_xfer_req(int(op), descs, keys, notify)
        code = native.post(req)
        transfer = Transfer(self, op, keys, memories, req)
        self._transfers[req] = transfer
        if code != Status.IN_PROGRESS:
            transfer._finish(code)
        return transfer

    async def wait_async(self, transfer: Transfer) -> Transfer:
        """Waits for a transfer without blocking the event loop: the agent's
        eventfd wakes the loop (one reader for every transfer of this Agent)."""
        if transfer._final is not None or transfer.done():
            return transfer.wait()
        loop = asyncio.get_running_loop()
        if self._reader_loop is not loop:
            loop.add_reader(self.fileno(), self._on_notify)
            self._reader_loop = loop
        future = loop.create_future()
        self._waiters[transfer.request] = future
        if transfer.done():  # finished between the check above and add_reader
            self._waiters.pop(transfer.request, None)
        else:
            await future
        return transfer.wait()

    def _on_notify(self) -> None:
        for n in self._live().get_notifs():
            future = self._waiters.pop(n.request, None)
            transfer = self._transfers.get(n.request)
            if transfer is not None and transfer._final is None:
                transfer._finish(n.status)
            if future is not None and not future.done():
                future.set_result(None)

    # -- management ----------------------------------------------------------
    def exists(self, keys: Iterable[str]) -> List[bool]:
        """Whether some tier holds each key, in one round trip."""
        return self._live().exists(list(keys))

    def delete(self, keys: Iterable[str]) -> List[bool]:
        """Removes keys from every tier; per key, whether it existed."""
        return self._live().remove_each(list(keys))

    def list(self, prefix: str = "") -> List[ObjectInfo]:
        """Every object whose key starts with prefix, in key order."""
        return self._live().list(prefix)

    def stats(self) -> Dict[str, Any]:
        """The agent's counters and each tier's capacity and use (docs/xfer.md)."""
        return json.loads(self._live().stats_json())

    def fileno(self) -> int:
        """An eventfd, readable when a transfer finishes; notifications() drains it."""
        return self._live().notify_fd()

    def notifications(self) -> List[Notification]:
        """Every finished transfer since the last call (request id, notify message, status)."""
        out = []
        for n in self._live().get_notifs():
            out.append(Notification(n.request, n.message, _status(n.status)))
        return out

    # -- lifetime ------------------------------------------------------------
    def close(self) -> None:
        """Waits for posted transfers, deregisters memory and disconnects."""
        if self._native is None:
            return
        for transfer in list(self._transfers.values()):
            try:
                transfer.wait()
            except Error:
                pass
        for region in list(self._regions):
            region.close()
        if self._reader_loop is not None and not self._reader_loop.is_closed():
            self._reader_loop.remove_reader(self._native.notify_fd())
        self._native = None

    def __enter__(self) -> "Agent":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _live(self) -> _ferry.Agent:
        if self._native is None:
            raise Error("this ferry.Agent is closed")
        return self._native

    def __repr__(self) -> str:
        return f"<ferry.Agent {self.endpoint}{'' if self._native else ' (closed)'}>"
