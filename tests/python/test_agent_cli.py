"""`ferry agent` started with the reference agent's flags (-b, -m, -q, -T, -p),
and reached from Python."""

import os
import socket
import subprocess
import time

import numpy as np
import pytest

import ferry
from conftest import ferry_bin


def start(args, ready):
    proc = subprocess.Popen([ferry_bin(), "agent", "--gpu", "none", "--ready-file", str(ready), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 20
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            out = proc.communicate(timeout=5)[0] if proc.poll() is not None else ""
            proc.kill()
            pytest.fail(f"ferry agent {' '.join(args)} did not start: {out}")
        time.sleep(0.02)
    return proc, ready.read_text().strip()


def stop(proc):
    proc.terminate()
    proc.wait(timeout=10)


def test_posix_backend_tcp_mode_staging_and_queue_flags(tmp_path):
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", 7417)) == 0:
            pytest.skip("port 7417 (-T's default) is taken on this machine")
    store = tmp_path / "posix"
    proc, endpoint = start(["-T", "-b", f"posix:{store}", "-m", "64", "-q", "4"], tmp_path / "ready")
    try:
        assert endpoint == "tcp:127.0.0.1:7417"
        with ferry.Agent(endpoint) as agent:
            assert agent.tiers == [f"file:{store}"]
            buf = np.arange(1 << 16, dtype=np.uint8)
            agent.register(buf)
            agent.push(["posix-key"], [buf]).wait()
            assert agent.exists(["posix-key"]) == [True]
        assert any(store.rglob("*")), "the posix backend wrote no file"
    finally:
        stop(proc)


def test_backends_chain_after_tiers(tmp_path):
    proc, endpoint = start(["--endpoint", "unix:ferry-pytest-cli", "--tier", "dram:16MiB", "-b", "direct:" + str(tmp_path)],
                           tmp_path / "ready")
    try:
        with ferry.Agent(endpoint) as agent:
            assert agent.tiers == ["dram:16MiB", f"file:{tmp_path},direct"]
    finally:
        stop(proc)


@pytest.mark.parametrize("args,message", [
    ([], "--tier dram:8GiB"),
    (["-b", "tape"], "the backends are posix"),
    (["-b", "dram", "-p", "0000:99:00.0"], "PCI address 0000:99:00.0"),
    (["-b", "dram", "-p", "0", "--gpu", "none"], "excludes"),
])
def test_bad_reference_flags_say_what_is_wrong(tmp_path, args, message):
    out = subprocess.run([ferry_bin(), "agent", *args], capture_output=True, text=True, timeout=20)
    assert out.returncode != 0
    assert message.lower() in (out.stdout + out.stderr).lower(), out.stdout + out.stderr
