"""The real LMCache 0.5.6 stores and retrieves KV chunks through its NIXL
storage backend, with Ferry's plugin as that backend (docs/nixl.md, "LMCache").

LMCache accepts only NIXL backend names from its own list, so the plugin is
loaded as "OBJ": NIXL_PLUGIN_DIR names a folder whose libplugin_OBJ.so is
Ferry's, and the YAML says `nixl_backend: OBJ` with Ferry's endpoint in
`nixl_backend_params`. NIXL reads NIXL_PLUGIN_DIR once per process, so every
configuration runs in processes of its own: this file, run as a script, is
that process. It drives the backend as LMCache's storage manager does
(tests/v1/test_nixl_storage.py in LMCache's sdist).

Runs where torch, lmcache and nixl (the meta package) import; the cuda case
also needs a GPU (the GPU machine: scripts/device/nixl-check.sh)."""

import importlib.util
import os
import subprocess
import sys

import pytest

# The chunks: (layers, 2, tokens, kv heads, head dim) in bf16, 4 MiB each.
KV_SHAPE = (4, 2, 256, 8, 128)
CHUNKS = 6
MODEL = "org/Ferry-Test-Model"


def worker(op):
    """op: put, get or both, on the backend that $LMCACHE_CONFIG_FILE describes; raises on any difference."""
    import asyncio
    import threading
    import time

    import torch
    from lmcache.utils import CacheEngineKey
    from lmcache.v1.config import load_engine_config_with_overrides
    from lmcache.v1.metadata import LMCacheMetadata
    from lmcache.v1.storage_backend import CreateStorageBackends
    from lmcache.v1.transfer_channel.transfer_utils import get_correct_device

    config = load_engine_config_with_overrides()  # reads $LMCACHE_CONFIG_FILE and validates it
    dtype = torch.bfloat16
    md = LMCacheMetadata(model_name=MODEL, world_size=1, local_world_size=1, worker_id=0, local_worker_id=0,
                         kv_dtype=dtype, kv_shape=torch.Size(KV_SHAPE))
    shape = md.get_shapes()[0]
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    backends = CreateStorageBackends(config, md, loop,
                                     dst_device=get_correct_device(config.nixl_buffer_device, md.worker_id))
    nb = backends["NixlStorageBackend"]
    print(f"{type(nb).__name__}: NIXL backend {nb.agent.backend}, pages of {nb.memory_allocator.align_bytes} bytes "
          f"on {config.nixl_buffer_device}", flush=True)
    keys = [CacheEngineKey(model_name=MODEL, world_size=1, worker_id=0, chunk_hash=0xF0 + i, dtype=dtype)
            for i in range(CHUNKS + 1)]
    absent = keys.pop()

    def chunk(i):
        return torch.randn(shape, generator=torch.Generator().manual_seed(3700 + i)).to(dtype)

    def check(i, obj, how):
        assert obj is not None, f"{how}: chunk {i} is a miss"
        got = obj.tensor.view(torch.uint8)
        assert torch.equal(got, chunk(i).to(got.device).view(torch.uint8)), f"{how}: chunk {i} came back different"
        obj.ref_count_down()

    if op in ("put", "both"):
        objs = []
        for i in range(CHUNKS):
            o = nb.allocate(shape, dtype, busy_loop=False)
            assert o is not None, "no page free in the backend's pool"
            assert o.tensor.device.type == ("cpu" if config.nixl_buffer_device == "cpu" else "cuda")
            o.tensor.copy_(chunk(i))
            objs.append(o)
        if config.nixl_buffer_device != "cpu":
            torch.cuda.synchronize()  # the agent reads the pages from its own process
        assert not any(nb.contains(k) for k in keys), "a key is there before its put"
        nb.batched_submit_put_task(keys, objs)  # the static pool puts on `loop`, after this returns
        for o in objs:
            o.ref_count_down()
        for _ in range(3000):
            if all(nb.contains(k) for k in keys):
                break
            time.sleep(0.01)
        assert [nb.contains(k) for k in keys] == [True] * CHUNKS, "a put did not land (LMCache logs why above)"
        print(f"put {CHUNKS} chunks", flush=True)
    if op in ("get", "both"):
        assert [nb.contains(k) for k in keys] == [True] * CHUNKS
        for i, k in enumerate(keys):
            check(i, nb.get_blocking(k), "get_blocking")
        got = asyncio.run_coroutine_threadsafe(nb.batched_get_non_blocking("ferry-test", keys), loop).result()
        assert len(got) == CHUNKS, f"batched_get_non_blocking found {len(got)} of {CHUNKS}"
        for i, obj in enumerate(got):
            check(i, obj, "batched_get_non_blocking")
        if hasattr(nb, "batched_contains"):  # the dynamic backend asks the agent in one query
            assert nb.batched_contains(keys + [absent]) == CHUNKS
        # A key never put is a miss (the plugin's not-found is NIXL_ERR_BACKEND, which LMCache counts so).
        assert not nb.contains(absent)
        assert nb.get_blocking(absent) is None
        print(f"got {CHUNKS} chunks back byte-exact; the absent key is a miss", flush=True)
    for b in backends.values():
        b.close()
    loop.call_soon_threadsafe(loop.stop)
    print("LMCACHE-NIXL OK", flush=True)


if __name__ == "__main__":
    worker(sys.argv[1])
    sys.exit(0)

torch = pytest.importorskip("torch")
pytest.importorskip("lmcache")
# LMCache imports nixl._api: the meta package, which picks nixl_cu12 or nixl_cu13. Only the
# workers import it: a process holds one of the two, and this one may need the other.
if importlib.util.find_spec("nixl") is None:
    pytest.skip("no nixl (the meta package: pip install nixl==1.5.1)", allow_module_level=True)

from conftest import AgentProcess, nixl_plugin_dir  # noqa: E402

YAML = """\
chunk_size: 256
local_cpu: false
save_unfull_chunk: false          # dynamic mode requires it
max_local_cpu_size: 0.1           # GiB; in cpu mode NIXL's pages, one agent region each (--max-regions)
nixl_buffer_device: {device}
{buffer}extra_config:
  enable_nixl_storage: true
  nixl_backend: OBJ               # Ferry's plugin under NIXL_PLUGIN_DIR, as LMCache accepts no other name
  nixl_pool_size: {pool}          # 0: dynamic, an object per chunk named from its key; >0: static slots
  nixl_backend_params:            # strings only: NIXL's binding takes Mapping[str, str]
    endpoint: "{endpoint}"
    queue_depth: "32"
"""


@pytest.fixture
def plugin_as_obj(tmp_path):
    folder = tmp_path / "nixl-plugins"
    folder.mkdir()
    plugin = os.path.join(nixl_plugin_dir(), "libplugin_DOCA_DMA_PROXY.so")
    assert os.path.exists(plugin), f"no plugin at {plugin}: build it or set FERRY_NIXL_PLUGIN_DIR"
    (folder / "libplugin_OBJ.so").symlink_to(plugin)
    return folder


@pytest.mark.parametrize("pool", [0, 8], ids=["dynamic", "static"])
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_lmcache_puts_and_gets_kv_chunks_through_the_plugin(tmp_path, plugin_as_obj, device, pool):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    (tmp_path / "store").mkdir()
    gpu = "0" if torch.cuda.is_available() else "none"
    agent = AgentProcess(tmp_path, ["dram:1GiB", f"file:{tmp_path / 'store'}"], gpu=gpu)
    try:
        cfg = tmp_path / "lmcache.yaml"
        buffer = "nixl_buffer_size: 134217728       # bytes: 32 pages of GPU memory\n" if device == "cuda" else ""
        cfg.write_text(YAML.format(device=device, buffer=buffer, pool=pool, endpoint=agent.endpoint))
        env = dict(os.environ, LMCACHE_CONFIG_FILE=str(cfg), NIXL_PLUGIN_DIR=str(plugin_as_obj))
        # Dynamic objects outlive the process that put them: a second process reads them back.
        for op in (["put", "get"] if pool == 0 else ["both"]):
            r = subprocess.run([sys.executable, __file__, op], env=env, capture_output=True, text=True, timeout=300)
            print(r.stdout)
            assert r.returncode == 0 and "LMCACHE-NIXL OK" in r.stdout, \
                f"{op} failed (rc {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
        assert agent.proc.poll() is None, "the agent died"
    finally:
        agent.stop()
