"""Fixtures for the Python package's tests: a real `ferry agent` per test,
with a dram tier over a file tier in the test's own folder.

The agent binary is $FERRY_BIN, or build/apps/ferry/ferry in this checkout."""

import importlib
import os
import pathlib
import signal
import subprocess
import sys
import time
import uuid

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def ferry_bin() -> str:
    path = os.environ.get("FERRY_BIN", str(ROOT / "build" / "apps" / "ferry" / "ferry"))
    if not os.access(path, os.X_OK):
        pytest.fail(f"no ferry binary at {path}: build it (make build) or set FERRY_BIN")
    return path


def nixl_plugin_dir() -> str:
    """The folder of Ferry's NIXL plugin, libplugin_DOCA_DMA_PROXY.so: $FERRY_NIXL_PLUGIN_DIR, else build/nixl-plugins."""
    return os.environ.get("FERRY_NIXL_PLUGIN_DIR", str(ROOT / "build" / "nixl-plugins"))


def import_nixl():
    """NIXL's Python API and its binding (whose classes are NIXL's errors): nixl_cu12, what
    `make python` installs, else nixl_cu13, the CUDA 13 build that torch cu130 needs (the GPU
    machine). One already loaded wins: both register the same pybind11 types, so one process can
    hold only one (the `nixl` meta package, which LMCache imports, loads the one torch's CUDA asks
    for). ImportError when neither is installed."""
    names = ("nixl_cu12", "nixl_cu13")
    for name in [n for n in names if n in sys.modules] or names:
        try:
            return importlib.import_module(f"{name}._api"), importlib.import_module(f"{name}._bindings")
        except ModuleNotFoundError as e:
            if e.name != name:
                raise
    raise ImportError("neither nixl_cu12 nor nixl_cu13 is installed")


class AgentProcess:
    def __init__(self, folder: pathlib.Path, tiers, extra=(), endpoint=None, gpu=None):
        self.endpoint = endpoint or f"unix:ferry-pytest-{uuid.uuid4().hex[:12]}"
        ready = folder / "ready"
        if ready.exists():
            ready.unlink()
        self.log_path = folder / "agent.log"
        self.log = open(self.log_path, "w")
        # FERRY_TEST_GPU=0 on the GPU machine (or gpu="0"): GPU tensors then go by CUDA IPC.
        gpu = gpu or os.environ.get("FERRY_TEST_GPU", "none")
        args = [ferry_bin(), "agent", "--endpoint", self.endpoint, "--gpu", gpu,
                "--staging-mib", "256", "--ready-file", str(ready)]
        for t in tiers:
            args += ["--tier", t]
        self.proc = subprocess.Popen(args + list(extra), stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while not ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"ferry agent did not start: {self.log_path.read_text()}")
            time.sleep(0.02)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()


@pytest.fixture
def agent_process(tmp_path):
    (tmp_path / "store").mkdir()
    p = AgentProcess(tmp_path, ["dram:64MiB", f"file:{tmp_path / 'store'}"])
    yield p
    p.stop()


@pytest.fixture
def agent(agent_process):
    import ferry
    a = ferry.Agent(agent_process.endpoint, name="pytest")
    yield a
    a.close()
