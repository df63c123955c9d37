"""ferry.lmcache under the real LMCache 0.5.6 (pinned in python/pyproject.toml):
the adapter is built by LMCache's own factory from the --l2-adapter JSON and
driven through the L2 adapter API its storage manager uses. Runs where
lmcache and torch are installed (the GPU machine: scripts/device/lmcache-check.sh)."""

import argparse
import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("lmcache")

from lmcache.cli.commands.bench.l2_adapter_bench.data import make_memory_objects, make_object_keys  # noqa: E402
from lmcache.v1.distributed.api import MemoryLayoutDesc  # noqa: E402
from lmcache.v1.distributed.l2_adapters import create_l2_adapter  # noqa: E402
from lmcache.v1.distributed.l2_adapters.config import parse_args_to_l2_adapters_config  # noqa: E402
from lmcache.cli.commands.bench.l2_adapter_bench.data import wait_eventfd  # noqa: E402

CHUNK = 4 << 20


def make_adapter(endpoint):
    spec = {"type": "native_plugin", "module_path": "ferry.lmcache", "class_name": "FerryL2Connector",
            "adapter_params": {"endpoint": endpoint}}
    cfg = parse_args_to_l2_adapters_config(argparse.Namespace(l2_adapter=[json.dumps(spec)]))
    return create_l2_adapter(cfg.adapters[0])


def store(adapter, keys, objs):
    task = adapter.submit_store_task(keys, objs)
    done = {}
    while task not in done:
        assert wait_eventfd(adapter.get_store_event_fd(), timeout=30)
        done.update(adapter.pop_completed_store_tasks())
    return done[task]


def lookup(adapter, keys):
    task = adapter.submit_lookup_and_lock_task(keys, {0: MemoryLayoutDesc(shapes=[], dtypes=[])})
    while True:
        assert wait_eventfd(adapter.get_lookup_and_lock_event_fd(), timeout=30)
        bitmap = adapter.query_lookup_and_lock_result(task)
        if bitmap is not None:
            adapter.submit_unlock(keys)
            return [bitmap.test(i) for i in range(len(keys))]


def load(adapter, keys, objs):
    task = adapter.submit_load_task(keys, objs)
    while True:
        assert wait_eventfd(adapter.get_load_event_fd(), timeout=30)
        bitmap = adapter.query_load_result(task)
        if bitmap is not None:
            return [bitmap.test(i) for i in range(len(keys))]


def test_store_lookup_load_delete_through_lmcache(agent_process):
    adapter = make_adapter(agent_process.endpoint)
    try:
        buf = torch.empty(8 * CHUNK, dtype=torch.uint8).pin_memory()
        keys = make_object_keys(4, model_name="meta-llama/Llama-3.1-8B", key_offset=1000)
        src = make_memory_objects(buf, 4, CHUNK, 0, fill_offset=11)
        dst = make_memory_objects(buf, 4, CHUNK, 4 * CHUNK, fill_offset=200)
        assert store(adapter, keys, src).is_successful()
        other = make_object_keys(1, model_name="meta-llama/Llama-3.1-8B", key_offset=5000)
        assert lookup(adapter, keys + other) == [True] * 4 + [False]
        assert load(adapter, keys, dst) == [True] * 4
        assert torch.equal(buf[:4 * CHUNK], buf[4 * CHUNK:])
        adapter.delete(keys[:2])
        assert lookup(adapter, keys) == [False, False, True, True]
        assert load(adapter, keys[:1], dst[:1]) == [False]
    finally:
        adapter.close()
