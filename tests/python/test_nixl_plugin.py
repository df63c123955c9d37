"""DOCA_DMA_PROXY, Ferry's NIXL backend plugin, loaded by the real NIXL 1.5.1
(nixl-cu12 from PyPI, or nixl-cu13 beside torch cu130) and driven through
NIXL's own Python API against a real `ferry agent`, as LMCache or vLLM would
drive it (docs/nixl.md).

NIXL reads NIXL_PLUGIN_DIR once per process, when its first agent is made, so
it is set here before nixl is imported. The plugin is
$FERRY_NIXL_PLUGIN_DIR/libplugin_DOCA_DMA_PROXY.so, else build/nixl-plugins/."""

import os
import threading
import time

import numpy as np
import pytest

from conftest import ROOT, AgentProcess, import_nixl, nixl_plugin_dir

PLUGIN_DIR = nixl_plugin_dir()
os.environ["NIXL_PLUGIN_DIR"] = PLUGIN_DIR

try:
    nixl, nixl_errors = import_nixl()
except ImportError as e:  # a failure, not a skip: CI must not pass without the real NIXL
    pytest.fail(f"NIXL is not installed ({e}): `make python` installs nixl-cu12==1.5.1", pytrace=False)

BACKEND = "DOCA_DMA_PROXY"
# Every error NIXL's binding raises derives from nothing common but Exception.
NIXL_ERRORS = tuple(getattr(nixl_errors, n) for n in dir(nixl_errors) if n.startswith("nixl") and n.endswith("Error"))
_names = iter(range(1 << 30))


def test_plugin_file_is_there():
    path = os.path.join(PLUGIN_DIR, f"lib{'plugin_' + BACKEND}.so")
    assert os.path.exists(path), f"no plugin at {path}: build it (make build) or set FERRY_NIXL_PLUGIN_DIR"


def new_agent(sync_mode=None):
    """A NIXL agent; sync_mode as NIXL's config takes it (NIXL's own calls are not thread-safe without one)."""
    config = nixl.nixl_agent_config(backends=[], sync_mode=sync_mode)
    return nixl.nixl_agent(f"nixl-test-{next(_names)}", config)


def backend(agent, endpoint, **options):
    agent.create_backend(BACKEND, {"endpoint": endpoint, **{k: str(v) for k, v in options.items()}})
    return agent


def wait_done(agent, handle, timeout=60.0):
    """Polls NIXL's state until DONE; an error raises from check_xfer_state. Never hangs."""
    deadline = time.monotonic() + timeout
    state = agent.check_xfer_state(handle)
    while state != "DONE":
        assert state == "PROC", state
        assert time.monotonic() < deadline, "the transfer did not finish"
        time.sleep(0.0005)
        state = agent.check_xfer_state(handle)


class Objects:
    """Host buffers registered as DRAM_SEG and the objects they move to, registered as OBJ_SEG."""

    def __init__(self, agent, sizes, prefix, dev_base=0):
        self.agent = agent
        rng = np.random.default_rng(len(sizes) * 7919 + dev_base)
        self.data = [rng.integers(0, 256, size=n, dtype=np.uint8) for n in sizes]
        self.buffers = [np.zeros(n, dtype=np.uint8) for n in sizes]
        self.keys = [f"{prefix}/{i}" for i in range(len(sizes))]
        self.dev_ids = [dev_base + i for i in range(len(sizes))]
        self.mem_reg = agent.register_memory([(b.ctypes.data, b.nbytes, 0, "") for b in self.buffers], "DRAM",
                                             backends=[BACKEND])
        self.obj_reg = agent.register_memory([(0, b.nbytes, d, k) for b, d, k in
                                              zip(self.buffers, self.dev_ids, self.keys)], "OBJ", backends=[BACKEND])

    def descs(self):
        local = self.agent.get_xfer_descs([(b.ctypes.data, b.nbytes, 0) for b in self.buffers], "DRAM")
        remote = self.agent.get_xfer_descs([(0, b.nbytes, d) for b, d in zip(self.buffers, self.dev_ids)], "OBJ")
        return local, remote

    def prepare_write(self):
        """The data in the buffers, and a prepared WRITE of them (the caller posts and releases it)."""
        for b, d in zip(self.buffers, self.data):
            b[:] = d
        local, remote = self.descs()
        return self.agent.initialize_xfer("WRITE", local, remote, self.agent.name, backends=[BACKEND])

    def transfer(self, op):
        local, remote = self.descs()
        h = self.agent.initialize_xfer(op, local, remote, self.agent.name, backends=[BACKEND])
        try:
            assert self.agent.transfer(h) in ("DONE", "PROC")
            wait_done(self.agent, h)
        finally:
            self.agent.release_xfer_handle(h)

    def write(self):
        h = self.prepare_write()
        try:
            assert self.agent.transfer(h) in ("DONE", "PROC")
            wait_done(self.agent, h)
        finally:
            self.agent.release_xfer_handle(h)

    def read_and_check(self):
        for b in self.buffers:
            b[:] = 0
        self.transfer("READ")
        for i, (b, d) in enumerate(zip(self.buffers, self.data)):
            assert np.array_equal(b, d), f"object {self.keys[i]} ({d.nbytes} bytes) came back different"

    def close(self):
        self.agent.deregister_memory(self.obj_reg, backends=[BACKEND])
        self.agent.deregister_memory(self.mem_reg, backends=[BACKEND])


def test_nixl_lists_the_plugin_with_its_options_and_memory_types():
    agent = new_agent()
    assert BACKEND in agent.get_plugin_list()
    params = agent.get_plugin_params(BACKEND)
    assert params["endpoint"] == "unix:ferry.agent"
    assert int(params["queue_depth"]) > 0 and params["checksum"] == "xxh3"
    assert sorted(agent.get_plugin_mem_types(BACKEND)) == ["DRAM_SEG", "OBJ_SEG", "VRAM_SEG"]


def test_write_then_read_back_every_byte_from_4_kib_to_8_mib(agent_process):
    agent = backend(new_agent(), agent_process.endpoint)
    assert sorted(agent.get_backend_mem_types(BACKEND)) == ["DRAM_SEG", "OBJ_SEG", "VRAM_SEG"]
    sizes = [4 << 10, 4 << 10, 64 << 10, 100_000, 1 << 20, (1 << 20) + 1, 3 << 20, 8 << 20, 8 << 20, 4 << 10]
    objs = Objects(agent, sizes, "sizes")
    objs.write()
    objs.read_and_check()
    # Each key is in the agent's tiers now, and a never-written one is not.
    found = agent.query_memory([(0, 1, 0, k) for k in objs.keys + ["sizes/never-written"]], BACKEND, "OBJ")
    assert [f is not None for f in found] == [True] * len(sizes) + [False]
    objs.close()


def test_a_prepared_transfer_can_be_posted_again_once_done(agent_process):
    agent = backend(new_agent(), agent_process.endpoint)
    objs = Objects(agent, [64 << 10] * 4, "repost")
    h = objs.prepare_write()
    for _ in range(3):
        agent.transfer(h)
        wait_done(agent, h)
    agent.release_xfer_handle(h)
    objs.read_and_check()
    objs.close()


def test_posts_beyond_the_queue_depth_wait_and_all_finish(agent_process):
    agent = backend(new_agent(), agent_process.endpoint, queue_depth=2)
    groups = [Objects(agent, [16 << 10] * 2, f"depth/{g}", dev_base=100 * g) for g in range(12)]
    handles = []
    for g in groups:
        h = g.prepare_write()
        assert agent.transfer(h) in ("DONE", "PROC")
        handles.append(h)
    # Only the last is polled: the queue must drain without the others being checked.
    wait_done(agent, handles[-1])
    for h in handles:
        wait_done(agent, h)
        agent.release_xfer_handle(h)
    for g in groups:
        g.read_and_check()
        g.close()


def test_several_threads_post_at_once(agent_process):
    # RW: NIXL lets transfers of several threads into the backend at once and
    # serialises registrations, the mode for an agent shared by threads.
    agent = backend(new_agent(nixl.nixl_thread_sync_t.NIXL_THREAD_SYNC_RW), agent_process.endpoint)
    failures = []

    def worker(t):
        try:
            objs = Objects(agent, [4 << 10, 256 << 10, 1 << 20], f"thread/{t}", dev_base=1000 * (t + 1))
            for _ in range(5):
                objs.write()
                objs.read_and_check()
            objs.close()
        except Exception as e:  # noqa: BLE001 - reported below with its thread
            failures.append(f"thread {t}: {e!r}")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert not failures, failures


def test_reading_a_missing_key_fails_as_nixls_obj_backend_does(agent_process, capfd):
    # NIXL_ERR_BACKEND, what NIXL's OBJ backend answers for a missing object and
    # what LMCache counts as a miss; the plugin's log names the key.
    agent = backend(new_agent(), agent_process.endpoint)
    objs = Objects(agent, [4 << 10], "missing")
    with pytest.raises(nixl_errors.nixlBackendError):
        objs.transfer("READ")
    assert "missing/0" in capfd.readouterr().err
    objs.close()


def test_a_buffer_smaller_than_the_object_is_a_mismatch(agent_process):
    agent = backend(new_agent(), agent_process.endpoint)
    big = Objects(agent, [8 << 10], "small-buffer")
    big.write()
    # The same key, registered and read through a 4 KiB buffer.
    small = np.zeros(4 << 10, dtype=np.uint8)
    mem = agent.register_memory([(small.ctypes.data, small.nbytes, 0, "")], "DRAM", backends=[BACKEND])
    obj = agent.register_memory([(0, small.nbytes, 77, big.keys[0])], "OBJ", backends=[BACKEND])
    local = agent.get_xfer_descs([(small.ctypes.data, small.nbytes, 0)], "DRAM")
    remote = agent.get_xfer_descs([(0, small.nbytes, 77)], "OBJ")
    h = agent.initialize_xfer("READ", local, remote, agent.name, backends=[BACKEND])
    with pytest.raises(nixl_errors.nixlMismatchError):
        agent.transfer(h)
        wait_done(agent, h)
    agent.release_xfer_handle(h)
    agent.deregister_memory(obj, backends=[BACKEND])
    agent.deregister_memory(mem, backends=[BACKEND])
    big.close()


def test_an_offset_into_an_object_is_refused(agent_process):
    agent = backend(new_agent(), agent_process.endpoint)
    objs = Objects(agent, [8 << 10], "offset")
    local = agent.get_xfer_descs([(objs.buffers[0].ctypes.data, 4096, 0)], "DRAM")
    remote = agent.get_xfer_descs([(4096, 4096, objs.dev_ids[0])], "OBJ")
    with pytest.raises(nixl_errors.nixlNotSupportedError):
        agent.initialize_xfer("WRITE", local, remote, agent.name, backends=[BACKEND])
    objs.close()


def test_deregistering_memory_in_flight_waits_for_the_transfer(agent_process):
    agent = backend(new_agent(), agent_process.endpoint)
    objs = Objects(agent, [8 << 20] * 4, "dereg")
    h = objs.prepare_write()
    agent.transfer(h)
    agent.deregister_memory(objs.mem_reg, backends=[BACKEND])
    # It returned once the agent was done with the memory: the transfer is over.
    assert agent.check_xfer_state(h) == "DONE"
    agent.release_xfer_handle(h)
    # What was written is whole: read it through a fresh registration.
    objs.mem_reg = agent.register_memory([(b.ctypes.data, b.nbytes, 0, "") for b in objs.buffers], "DRAM",
                                         backends=[BACKEND])
    objs.read_and_check()
    objs.close()


def test_no_agent_fails_create_backend_with_the_reason_logged():
    agent = new_agent()
    with pytest.raises(nixl_errors.nixlBackendError):
        agent.create_backend(BACKEND, {"endpoint": "unix:ferry-nixl-test-nobody-listens", "connect_timeout_ms": "200"})


@pytest.mark.parametrize("params", [{"queue_depth": "0"}, {"queue_depth": "lots"}, {"checksum": "none"},
                                    {"endpoint": "ferry.agent"}, {"colour": "blue"}])
def test_bad_options_fail_create_backend(agent_process, params):
    agent = new_agent()
    with pytest.raises(nixl_errors.nixlBackendError):
        agent.create_backend(BACKEND, {"endpoint": agent_process.endpoint, **params})


def test_an_agent_that_dies_fails_transfers_with_an_error_not_a_hang(tmp_path):
    (tmp_path / "store").mkdir()
    proc = AgentProcess(tmp_path, ["dram:64MiB"])
    try:
        agent = backend(new_agent(), proc.endpoint)
        objs = Objects(agent, [64 << 10] * 4, "dies")
        objs.write()
        proc.kill()
        with pytest.raises(NIXL_ERRORS):
            objs.transfer("READ")
        with pytest.raises(NIXL_ERRORS):
            objs.transfer("WRITE")
    finally:
        proc.stop()


def test_the_example_pushes_in_one_process_and_pulls_in_another(agent_process):
    import subprocess
    import sys
    example = ROOT / "examples" / "python" / "nixl_doca_dma_proxy_example.py"
    base = [sys.executable, str(example), "--cpu", "-d", agent_process.endpoint, "-f", "example/1", "-s", "3"]
    env = dict(os.environ, NIXL_PLUGIN_DIR=PLUGIN_DIR)
    push = subprocess.run(base + ["-o", "push"], env=env, capture_output=True, text=True, timeout=60)
    assert push.returncode == 0, push.stderr
    pull = subprocess.run(base + ["-o", "pull"], env=env, capture_output=True, text=True, timeout=60)
    assert pull.returncode == 0 and "every byte checked" in pull.stdout, pull.stdout + pull.stderr
    missing = subprocess.run([*base[:-4], "-f", "example/missing", "-s", "3", "-o", "pull"], env=env,
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode != 0 and "nixlBackendError" in missing.stderr, missing.stderr
