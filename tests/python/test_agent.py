"""The Python package against a real agent, with NumPy buffers."""

import asyncio
import select
import threading
import time

import numpy as np
import pytest

import ferry


def random_rows(rows, cols, seed):
    return np.random.default_rng(seed).integers(0, 256, size=(rows, cols), dtype=np.uint8)


@pytest.mark.parametrize("size", [1, 4096, 65536 + 7, 3 << 20])
def test_push_then_pull_returns_every_byte(agent, size):
    src = random_rows(4, size, seed=size)
    dst = np.zeros_like(src)
    agent.register(src)
    agent.register(dst)
    keys = [f"rt/{size}/{i}" for i in range(4)]
    pushed = agent.push(keys, list(src)).wait().results()
    assert [r.status for r in pushed] == [ferry.Status.OK] * 4
    assert all(r.size == size for r in pushed)
    pulled = agent.pull(keys, [dst[3 - i] for i in range(4)]).wait().results()
    assert [r.key for r in pulled] == keys
    for i in range(4):
        np.testing.assert_array_equal(dst[3 - i], src[i])


def test_exists_and_delete_answer_per_key_in_order(agent):
    buf = random_rows(3, 1000, seed=1)
    agent.register(buf)
    agent.push(["a", "b", "c"], list(buf)).wait()
    assert agent.exists(["c", "missing", "a", "b"]) == [True, False, True, True]
    assert agent.delete(["b", "missing", "b"]) == [True, False, False]
    assert agent.exists(["a", "b", "c"]) == [True, False, True]
    assert [o.key for o in agent.list("")] == ["a", "c"]
    assert agent.exists([]) == []


def test_a_miss_fails_only_its_key_and_names_it(agent):
    buf = random_rows(3, 512, seed=2)
    agent.register(buf)
    agent.push(["here"], [buf[0]]).wait()
    transfer = agent.pull(["here", "gone"], [buf[1], buf[2]])
    with pytest.raises(ferry.XferError) as e:
        transfer.wait()
    assert e.value.status == ferry.Status.NOT_FOUND
    assert e.value.key == "gone"
    assert "gone" in str(e.value)
    assert [r.status for r in e.value.results] == [ferry.Status.OK, ferry.Status.NOT_FOUND]
    np.testing.assert_array_equal(buf[1], buf[0])


def test_bad_buffers_are_refused_before_anything_is_sent(agent):
    buf = random_rows(2, 4096, seed=3)
    agent.register(buf)
    with pytest.raises(ferry.Error, match="outside every registered region"):
        agent.push(["k"], [np.ones(16, dtype=np.uint8)])
    with pytest.raises(ValueError, match="not C-contiguous"):
        agent.push(["k"], [buf[:, ::2]])
    readonly = buf[0].copy()
    agent.register(readonly)
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        agent.pull(["k"], [readonly])
    with pytest.raises(TypeError, match="offers no memory"):
        agent.push(["k"], [object()])
    with pytest.raises(ValueError, match="2 keys but 1 buffers"):
        agent.push(["k", "l"], [buf[0]])
    with pytest.raises(ferry.Error, match="key 0"):
        agent.push([""], [buf[0]])
    # Nothing above reached storage, and the session still serves.
    assert agent.exists(["k", "l"]) == [False, False]
    agent.push(["k"], [buf[0]]).wait()
    assert agent.exists(["k"]) == [True]


def test_an_object_larger_than_the_buffer_is_too_large(agent):
    big = random_rows(1, 8192, seed=4)
    small = np.zeros(100, dtype=np.uint8)
    agent.register(big)
    agent.register(small)
    agent.push(["big"], [big[0]]).wait()
    with pytest.raises(ferry.XferError) as e:
        agent.pull(["big"], [small]).wait()
    assert e.value.status == ferry.Status.TOO_LARGE


class DLPackOnly:
    """An object that offers its memory only through DLPack (as torch's CPU tensors do)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, *args, **kwargs):
        return self.array.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


class CudaArrayInterfaceOnly:
    """__cuda_array_interface__ over host memory: where there is no GPU, the
    agent treats "GPU" memory as host memory, so the CAI path runs in CI."""

    def __init__(self, array):
        self.array = array
        self.__cuda_array_interface__ = {"data": (array.ctypes.data, False), "shape": array.shape,
                                         "typestr": array.dtype.str, "strides": None, "version": 3}


def test_dlpack_and_cuda_array_interface_objects_are_taken_in_place(agent):
    if ferry._ferry.Memory(CudaArrayInterfaceOnly(np.zeros(4, np.uint8))).on_gpu and _gpu_present():
        pytest.skip("this machine has a GPU: CAI over host memory would be registered as device memory")
    src = np.arange(4096, dtype=np.float32)
    dst = np.zeros_like(src)
    agent.register(DLPackOnly(src))
    agent.register(CudaArrayInterfaceOnly(dst))
    agent.push(["dl"], [DLPackOnly(src)]).wait()
    agent.pull(["dl"], [CudaArrayInterfaceOnly(dst)]).wait()
    np.testing.assert_array_equal(dst, src)
    strided = {"data": (src.ctypes.data, False), "shape": (2048,), "typestr": "<f4", "strides": (8,), "version": 3}
    odd = type("Odd", (), {"__cuda_array_interface__": strided})()
    with pytest.raises(ValueError, match="not C-contiguous"):
        agent.push(["x"], [odd])


def _gpu_present():
    import shutil
    return shutil.which("nvidia-smi") is not None


def test_a_wrong_endpoint_fails_fast_with_the_reason():
    start = time.monotonic()
    with pytest.raises(ferry.Error, match="nobody-listens-here"):
        ferry.Agent("unix:nobody-listens-here", connect_timeout=0.5)
    with pytest.raises(ferry.Error):
        ferry.Agent("tcp:127.0.0.1:1", connect_timeout=0.5)
    with pytest.raises(ferry.Error, match="endpoint"):
        ferry.Agent("carrier-pigeon:home", connect_timeout=0.5)
    assert time.monotonic() - start < 5


def test_an_agent_that_dies_mid_call_fails_the_call_and_the_next(agent_process):
    a = ferry.Agent(agent_process.endpoint)
    buf = random_rows(32, 1 << 20, seed=5)
    a.register(buf)
    transfer = a.push([f"d{i}" for i in range(32)], list(buf))
    agent_process.kill()
    start = time.monotonic()
    try:
        transfer.wait(timeout=10)  # it may have finished before the kill
    except ferry.XferError as e:
        assert e.status in (ferry.Status.CANCELLED, ferry.Status.UNAVAILABLE, ferry.Status.PROTOCOL_ERROR, ferry.Status.IO_ERROR)
    assert time.monotonic() - start < 10
    with pytest.raises(ferry.Error):
        a.exists(["d0"])
    with pytest.raises(ferry.Error):
        a.push(["d0"], [buf[0]]).wait(timeout=10)
    a.close()


def test_the_eventfd_wakes_select_and_names_each_finished_transfer(agent):
    buf = random_rows(2, 65536, seed=6)
    agent.register(buf)
    transfer = agent.push(["n0", "n1"], list(buf), notify="pushed!")
    readable, _, _ = select.select([agent.fileno()], [], [], 10)
    assert readable == [agent.fileno()]
    notes = agent.notifications()
    assert [(n.request, n.message, n.status) for n in notes] == [(transfer.request, "pushed!", ferry.Status.OK)]
    assert agent.notifications() == []


def test_asyncio_waits_on_the_eventfd(agent):
    buf = random_rows(8, 1 << 16, seed=7)
    agent.register(buf)

    async def main():
        pushes = [agent.push([f"as{i}"], [buf[i]]) for i in range(8)]
        done = await asyncio.gather(*(agent.wait_async(t) for t in pushes))
        assert all(t.results()[0].status == ferry.Status.OK for t in done)
        assert (await agent.pull(["as3"], [buf[0]])).results()[0].size == 1 << 16

    asyncio.run(main())
    np.testing.assert_array_equal(buf[0], buf[3])


def test_blocking_calls_release_the_gil(agent):
    buf = random_rows(16, 1 << 20, seed=8)
    agent.register(buf)
    ticks = 0
    stop = threading.Event()

    def count():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1

    counter = threading.Thread(target=count)
    counter.start()
    before = ticks
    for _ in range(5):
        agent.push([f"g{i}" for i in range(16)], list(buf)).wait()
    stop.set()
    counter.join()
    assert ticks > before


def test_stats_report_each_tier_capacity_and_use(agent):
    buf = random_rows(1, 100000, seed=9)
    agent.register(buf)
    agent.push(["s"], [buf[0]]).wait()
    tiers = agent.stats()["tiers"]
    assert [t["tier"].split(":")[0] for t in tiers] == ["dram", "file"]
    for t in tiers:
        assert t["capacity_bytes"] > 0, t
        assert 0 <= t["used_bytes"] <= t["capacity_bytes"], t
    assert tiers[0]["used_bytes"] >= 100000


def test_a_closed_agent_says_so(agent_process):
    a = ferry.Agent(agent_process.endpoint)
    a.close()
    with pytest.raises(ferry.Error, match="closed"):
        a.exists(["x"])


def test_a_desc_list_is_resolved_once_and_reused(agent):
    src = random_rows(8, 4096, seed=10)
    dst = np.zeros_like(src)
    agent.register(src)
    agent.register(dst)
    keys = [f"dl/{i}" for i in range(8)]
    out = ferry.DescList(list(src))
    back = ferry.DescList(list(dst), writable=True)
    assert len(out) == 8 and out.sizes == [4096] * 8 and back.writable
    for _ in range(3):
        agent.push(keys, out).wait()
        agent.pull(keys, back).wait()
    np.testing.assert_array_equal(dst, src)
    with pytest.raises(ValueError, match="writable=True"):
        agent.pull(keys, out)
    with pytest.raises(ValueError, match="8 buffers"):
        agent.push(keys[:2], out)


def test_results_of_a_success_say_where_each_key_went(agent):
    buf = random_rows(2, 2048, seed=11)
    agent.register(buf)
    t = agent.push(["r0", "r1"], list(buf)).wait()
    assert t.status == ferry.Status.OK and t.done()
    assert [(r.key, r.size, r.tier.split(":")[0]) for r in t.results()] == [("r0", 2048, "dram"), ("r1", 2048, "dram")]
