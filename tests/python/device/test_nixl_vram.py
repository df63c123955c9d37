"""DOCA_DMA_PROXY with GPU memory: torch CUDA tensors registered as VRAM_SEG
through NIXL's own Python API, written to OBJ_SEG objects and read back into
other CUDA tensors, every byte compared on the GPU. The agent runs with --gpu,
so it reaches the tensors by CUDA IPC (label gpu: the GPU machine runs it from
scripts/device/nixl-check.sh; skipped where torch, a GPU or NIXL is missing).
The helpers and the plugin's folder are test_nixl_plugin.py's."""

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

from conftest import AgentProcess, import_nixl  # noqa: E402

try:
    import_nixl()
except ImportError as e:
    pytest.skip(f"no NIXL here ({e})", allow_module_level=True)

# Sets NIXL_PLUGIN_DIR before this process's first NIXL agent.
from test_nixl_plugin import BACKEND, backend, new_agent, nixl_errors, wait_done  # noqa: E402

GPU = torch.cuda.current_device()


@pytest.fixture
def gpu_agent(tmp_path):
    """An agent that copies with the GPU (CUDA IPC), a dram tier over a file tier. An object
    moves through one staging slot, staging / --queue-depth (8): 1 GiB holds 64 MiB objects."""
    (tmp_path / "store").mkdir()
    p = AgentProcess(tmp_path, ["dram:1GiB", f"file:{tmp_path / 'store'}"], extra=["--staging-mib", "1024"],
                     gpu=str(GPU))
    yield p
    p.stop()


def random_bytes(n, seed, device="cuda"):
    g = torch.Generator(device=device).manual_seed(seed)
    return torch.randint(0, 256, (n,), dtype=torch.uint8, device=device, generator=g)


def objects(agent, sizes, prefix, dev_base=0):
    """OBJ_SEG registrations for keys prefix/0.., and the descriptors that name them."""
    keys = [f"{prefix}/{i}" for i in range(len(sizes))]
    reg = agent.register_memory([(0, n, dev_base + i, k) for i, (n, k) in enumerate(zip(sizes, keys))], "OBJ",
                                backends=[BACKEND])
    return reg, agent.get_xfer_descs([(0, n, dev_base + i) for i, n in enumerate(sizes)], "OBJ")


def post(agent, op, local, remote):
    """One transfer, made, posted, polled to DONE and released; NIXL's error raises."""
    h = agent.initialize_xfer(op, local, remote, agent.name, backends=[BACKEND])
    try:
        assert agent.transfer(h) in ("DONE", "PROC")
        wait_done(agent, h)
    finally:
        agent.release_xfer_handle(h)


def test_plugin_lists_vram(gpu_agent):
    agent = backend(new_agent(), gpu_agent.endpoint)
    assert "VRAM_SEG" in agent.get_backend_mem_types(BACKEND)


def test_cuda_tensors_from_4_kib_to_64_mib_round_trip(gpu_agent):
    # A tensor per object, registered as a list of tensors (NIXL makes them VRAM
    # on this GPU); the small ones share the caching allocator's segments, so the
    # agent opens one CUDA IPC handle several times.
    agent = backend(new_agent(), gpu_agent.endpoint)
    sizes = [4 << 10, 4 << 10, 64 << 10, 100_000, 1 << 20, (1 << 20) + 1, 3 << 20, 8 << 20, 16 << 20, 64 << 20,
             4 << 10]
    src = [random_bytes(n, seed=i) for i, n in enumerate(sizes)]
    dst = [torch.zeros(n, dtype=torch.uint8, device="cuda") for n in sizes]
    torch.cuda.synchronize()  # the agent reads the tensors from its own process
    regs = [agent.register_memory(t, backends=[BACKEND]) for t in (src, dst)]
    obj, remote = objects(agent, sizes, "vram/sizes")
    post(agent, "WRITE", agent.get_xfer_descs(src), remote)
    post(agent, "READ", agent.get_xfer_descs(dst), remote)
    for i, (a, b) in enumerate(zip(src, dst)):
        assert torch.equal(a, b), f"object {i} ({sizes[i]} bytes) came back different"
    agent.deregister_memory(obj, backends=[BACKEND])
    for r in regs:
        agent.deregister_memory(r, backends=[BACKEND])


@pytest.mark.parametrize("page,pages", [(16 << 10, 512), (1 << 20, 96)])
def test_many_pages_of_one_registered_tensor(gpu_agent, page, pages):
    # As LMCache's GPU pool does it: one allocation, registered once, and a
    # transfer of many page-sized descriptors; read back into another pool in
    # the reverse order, so no page lands at the offset it left from.
    agent = backend(new_agent(), gpu_agent.endpoint)
    src = random_bytes(page * pages, seed=page)
    dst = torch.zeros_like(src)
    torch.cuda.synchronize()
    regs = [agent.register_memory([(t.data_ptr(), t.nbytes, GPU, "")], "VRAM", backends=[BACKEND]) for t in (src, dst)]
    obj, remote = objects(agent, [page] * pages, f"vram/pages/{page}")
    post(agent, "WRITE", agent.get_xfer_descs([(src.data_ptr() + i * page, page, GPU) for i in range(pages)], "VRAM"),
         remote)
    post(agent, "READ", agent.get_xfer_descs([(dst.data_ptr() + (pages - 1 - i) * page, page, GPU)
                                              for i in range(pages)], "VRAM"), remote)
    assert torch.equal(dst.view(pages, page).flip(0), src.view(pages, page))
    agent.deregister_memory(obj, backends=[BACKEND])
    for r in regs:
        agent.deregister_memory(r, backends=[BACKEND])


def test_dram_and_vram_in_one_backend_cross_over(gpu_agent):
    # Host tensors (pinned and pageable) and CUDA tensors in one engine, two
    # transfers in flight at once each way: VRAM's objects come back into host
    # memory and DRAM's into the GPU.
    agent = backend(new_agent(), gpu_agent.endpoint)
    sizes = [4 << 10, 1 << 20, 5 << 20, 32 << 20]
    vram_src = [random_bytes(n, seed=100 + i) for i, n in enumerate(sizes)]
    host_src = [random_bytes(n, seed=200 + i, device="cpu") for i, n in enumerate(sizes)]
    host_src = [t.pin_memory() if i % 2 == 0 else t for i, t in enumerate(host_src)]
    vram_dst = [torch.zeros(n, dtype=torch.uint8, device="cuda") for n in sizes]
    host_dst = [torch.zeros(n, dtype=torch.uint8).pin_memory() if i % 2 else torch.zeros(n, dtype=torch.uint8)
                for i, n in enumerate(sizes)]
    torch.cuda.synchronize()
    regs = [agent.register_memory(ts, backends=[BACKEND]) for ts in (vram_src, host_src, vram_dst, host_dst)]
    obj_v, remote_v = objects(agent, sizes, "mixed/v")
    obj_d, remote_d = objects(agent, sizes, "mixed/d", dev_base=100)

    def both(op, v_side, d_side):
        hs = [agent.initialize_xfer(op, agent.get_xfer_descs(v_side), remote_v, agent.name, backends=[BACKEND]),
              agent.initialize_xfer(op, agent.get_xfer_descs(d_side), remote_d, agent.name, backends=[BACKEND])]
        for h in hs:
            assert agent.transfer(h) in ("DONE", "PROC")
        for h in hs:
            wait_done(agent, h)
            agent.release_xfer_handle(h)

    both("WRITE", vram_src, host_src)
    both("READ", host_dst, vram_dst)  # mixed/v into host memory, mixed/d into the GPU
    for i in range(len(sizes)):
        assert torch.equal(host_dst[i].cuda(), vram_src[i]), f"VRAM object {i} read into DRAM differs"
        assert torch.equal(vram_dst[i], host_src[i].cuda()), f"DRAM object {i} read into VRAM differs"
    for r in [obj_v, obj_d, *regs]:
        agent.deregister_memory(r, backends=[BACKEND])


def test_a_vram_buffer_smaller_than_the_object_is_a_mismatch(gpu_agent):
    agent = backend(new_agent(), gpu_agent.endpoint)
    src = random_bytes(8 << 10, seed=7)
    torch.cuda.synchronize()
    src_reg = agent.register_memory([src], backends=[BACKEND])
    obj, remote = objects(agent, [src.nbytes], "vram/small")
    post(agent, "WRITE", agent.get_xfer_descs([src]), remote)
    # The same key, read through a 4 KiB tensor: NIXL's error, not a crash.
    small = torch.zeros(4 << 10, dtype=torch.uint8, device="cuda")
    small_reg = agent.register_memory([small], backends=[BACKEND])
    small_obj, small_remote = objects(agent, [small.nbytes], "vram/small", dev_base=77)
    with pytest.raises(nixl_errors.nixlMismatchError):
        post(agent, "READ", agent.get_xfer_descs([small]), small_remote)
    assert gpu_agent.proc.poll() is None, "the agent died"
    # The engine and the agent carry on: the whole object still reads back.
    dst = torch.zeros_like(src)
    dst_reg = agent.register_memory([dst], backends=[BACKEND])
    post(agent, "READ", agent.get_xfer_descs([dst]), remote)
    assert torch.equal(dst, src)
    for r in (obj, small_obj, src_reg, small_reg, dst_reg):
        agent.deregister_memory(r, backends=[BACKEND])


def test_an_agent_without_a_gpu_refuses_vram_with_a_nixl_error(tmp_path):
    proc = AgentProcess(tmp_path, ["dram:64MiB"], gpu="none")
    try:
        agent = backend(new_agent(), proc.endpoint)
        t = torch.zeros(1 << 20, dtype=torch.uint8, device="cuda")
        with pytest.raises(nixl_errors.nixlBackendError):
            agent.register_memory([t], backends=[BACKEND])
        # DRAM still works in the same engine.
        host = torch.zeros(1 << 20, dtype=torch.uint8)
        agent.deregister_memory(agent.register_memory([host], backends=[BACKEND]), backends=[BACKEND])
        assert proc.proc.poll() is None
    finally:
        proc.stop()
