"""On a CUDA device: tensors stay there, the caller's stream is used, the caller's switches come back, and
the GPU's float32 result is the CPU's."""

import pytest
import torch

import vaecodec
from conftest import TINY, relative_error

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def models():
    return {
        "cpu": vaecodec.load(TINY["wan2.1-vae"], device="cpu", dtype="fp32"),
        "fp32": vaecodec.load(TINY["wan2.1-vae"], device="cuda", dtype="fp32"),
        "bf16": vaecodec.load(TINY["wan2.1-vae"], device="cuda", dtype="bf16"),
    }


def clip(seed=0):
    return torch.rand(1, 3, 9, 64, 96, generator=torch.Generator().manual_seed(seed)) * 2 - 1


def test_float32_on_the_gpu_is_the_cpu_s(models):
    video = clip()
    want = models["cpu"].encode(video)
    got = models["fp32"].encode(video.cuda())
    assert got.device.type == "cuda"
    assert relative_error(got, want) <= 1e-5
    z = torch.randn(1, 16, 3, 8, 12, generator=torch.Generator().manual_seed(1))
    assert relative_error(models["fp32"].decode(z.cuda()), models["cpu"].decode(z)) <= 1e-5


def test_bf16_is_within_its_bound(models):
    z = torch.randn(1, 16, 3, 8, 12, generator=torch.Generator().manual_seed(2))
    got = models["bf16"].decode(z.cuda())
    assert got.dtype == torch.bfloat16 and got.device.type == "cuda"
    assert relative_error(got, models["cpu"].decode(z)) <= 5e-2


def test_the_caller_s_stream_is_used(models):
    m = models["fp32"]
    z = torch.randn(1, 16, 3, 8, 12, device="cuda")
    want = m.decode(z)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        # Made on the stream and used there without a synchronisation: the engine must queue behind it.
        z2 = z * 1.0
        got = m.decode(z2)
        total = got.sum()
    stream.synchronize()
    assert relative_error(got, want) <= 1e-6
    assert torch.isfinite(total)


def test_the_caller_s_switches_come_back(models):
    torch.backends.cudnn.benchmark = False
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    models["fp32"].decode(torch.randn(1, 16, 2, 8, 8, device="cuda"))
    vaecodec.load(TINY["wan2.1-vae"], device="cuda", dtype="fp32")
    assert torch.backends.cudnn.benchmark is False
    assert torch.backends.cuda.matmul.allow_tf32 is True
    assert torch.backends.cudnn.allow_tf32 is True


def test_out_of_budget_is_a_value_error_and_the_model_stays_usable(models):
    m = vaecodec.load(TINY["wan2.1-vae"], device="cuda", dtype="bf16", vram="1M")
    with pytest.raises(ValueError, match="does not fit in 1 MiB"):
        m.decode(torch.zeros(1, 16, 3, 90, 160, device="cuda"))
    ok = vaecodec.load(TINY["wan2.1-vae"], device="cuda", dtype="bf16")
    assert ok.decode(torch.zeros(1, 16, 1, 8, 8, device="cuda")).shape == (1, 3, 1, 64, 64)


def test_a_budget_given_is_planned_for():
    m = vaecodec.load(TINY["wan2.1-vae"], device="cuda", dtype="fp32", vram="2G")
    plan = m.plan([1, 16, 3, 8, 12], "decode")
    assert plan["budget_bytes"] == 2 << 30 and plan["op"] == "decode"
    z = torch.randn(1, 16, 3, 8, 12, generator=torch.Generator().manual_seed(3))
    unbudgeted = vaecodec.load(TINY["wan2.1-vae"], device="cuda", dtype="fp32")
    # The budget may choose other chunks (other convolution shapes and algorithms): float32's bound.
    assert relative_error(m.decode(z.cuda()), unbudgeted.decode(z.cuda())) <= 1e-5
