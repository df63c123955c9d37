"""torch tensors through the Python module (label gpu: runs on the GPU machine;
skipped where torch or a GPU is missing). The agent runs with --gpu 0 there
(FERRY_TEST_GPU), so GPU tensors go by CUDA IPC, CPU tensors by cross-memory attach."""

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import ferry  # noqa: E402


@pytest.mark.parametrize("nbytes", [4096, 1 << 20, 32 << 20])
def test_cuda_tensors_round_trip(agent, nbytes):
    src = torch.randint(0, 256, (4, nbytes), dtype=torch.uint8, device="cuda")
    dst = torch.zeros_like(src)
    torch.cuda.synchronize()
    agent.register(src)
    region = agent.register(dst)
    assert region.on_gpu
    keys = [f"gpu/{nbytes}/{i}" for i in range(4)]
    agent.push(keys, list(src)).wait()
    agent.pull(keys, [dst[3 - i] for i in range(4)]).wait()
    for i in range(4):
        assert torch.equal(dst[3 - i], src[i])


def test_bf16_kv_blocks_and_a_cpu_tensor_through_dlpack(agent):
    # KV-shaped: (layers, 2, tokens, heads, head_dim) in bf16.
    kv = torch.randn(4, 2, 256, 8, 128, dtype=torch.bfloat16, device="cuda")
    host = torch.zeros(kv.shape, dtype=torch.bfloat16).pin_memory()
    torch.cuda.synchronize()
    agent.register(kv)
    agent.register(host)
    agent.push([f"layer{i}" for i in range(4)], list(kv)).wait()
    agent.pull([f"layer{i}" for i in range(4)], list(host)).wait()
    assert torch.equal(host, kv.cpu())


def test_a_non_contiguous_cuda_tensor_is_refused(agent):
    t = torch.zeros(64, 64, device="cuda")
    agent.register(t)
    with pytest.raises(ValueError, match="not C-contiguous"):
        agent.push(["t"], [t.t()])
