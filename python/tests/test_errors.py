"""Bad input is a Python exception with the CLI's one line (never an abort or a C++ stack), and a failed call
leaves the model usable."""

import re

import pytest
import torch
from safetensors.torch import save_file

import vaecodec
from conftest import TINY, run_cli


@pytest.fixture(scope="module")
def model():
    return vaecodec.load(TINY["wan2.1-vae"], device="cpu", dtype="fp32")


def one_line(error: BaseException) -> str:
    text = str(error)
    assert "\n" not in text, f"more than one line: {text!r}"
    assert "Exception raised from" not in text and "frame #" not in text
    return text


def cli_error(cli, *args) -> str:
    """The CLI's error line, without its "vaecodec: error: " prefix."""
    status, stderr = run_cli(cli, *args, expect_ok=False)
    assert status != 0
    lines = [line for line in stderr.splitlines() if line.startswith("vaecodec: error: ")]
    assert lines, stderr
    return lines[-1][len("vaecodec: error: "):]


@pytest.mark.parametrize("shape, words", [
    ((3, 5, 32, 32), "[B, 3, T, H, W], got 4-D"),
    ((1, 4, 5, 32, 32), "[B, 3, T, H, W], got 5-D with 4 channels"),
    ((1, 3, 5, 30, 32), "frame size 32x30 is not a positive multiple of 8"),
    ((1, 3, 6, 32, 32), "encode needs 1 + 4k frames, got 6"),
    ((1, 3, 0, 32, 32), "nothing to encode"),
    ((0, 3, 5, 32, 32), "empty batch"),
])
def test_encode_refuses_shapes_it_cannot_take(model, shape, words):
    with pytest.raises(ValueError) as caught:
        model.encode(torch.zeros(shape))
    assert words in one_line(caught.value)


@pytest.mark.parametrize("shape, words", [
    ((16, 2, 4, 4), "[B, 16, T, h, w], got 4-D with 2 channels"),
    ((1, 48, 2, 4, 4), "got 5-D with 48 channels"),
    ((1, 16, 0, 4, 4), "nothing to decode"),
])
def test_decode_refuses_shapes_it_cannot_take(model, shape, words):
    with pytest.raises(ValueError) as caught:
        model.decode(torch.zeros(shape))
    assert words in one_line(caught.value)


def test_wrong_dtype_is_a_type_error(model):
    with pytest.raises(TypeError) as caught:
        model.decode(torch.zeros(1, 16, 1, 4, 4, dtype=torch.int64))
    assert "floating-point" in one_line(caught.value) and "Long" in str(caught.value)
    with pytest.raises(TypeError) as caught:
        model.encode("frames")
    assert one_line(caught.value) == "encode expects a tensor of frames, got str"
    with pytest.raises(TypeError):
        vaecodec.load(42)


def test_wrong_device_is_a_value_error(model):
    with pytest.raises(ValueError) as caught:
        model.decode(torch.zeros(1, 16, 1, 4, 4, device="meta"))
    assert "the tensor is on meta, the model on cpu" in one_line(caught.value)


def test_a_budget_no_plan_meets_is_the_cli_s_message(cli, tmp_path):
    save_file({"latents": torch.zeros(1, 16, 3, 16, 16)}, str(tmp_path / "z.safetensors"))
    want = cli_error(cli, "decode", tmp_path / "z.safetensors", "-o", tmp_path / "v.mp4", "--fps", "16",
                     "--weights", TINY["wan2.1-vae"], "--device", "cpu", "--vram", "1M")
    m = vaecodec.load(TINY["wan2.1-vae"], device="cpu", dtype="fp32", vram="1M")
    with pytest.raises(ValueError) as caught:
        m.decode(torch.zeros(1, 16, 3, 16, 16))
    # The same line, the budget's option named as Python spells it (Note [Option spellings]).
    assert "; give --vram " in want and "smallest" in want
    assert one_line(caught.value) == re.sub(r"; give --vram (\S+) or more", r"; give vram='\1' or more", want)
    assert "--" not in str(caught.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a host without CUDA")
def test_options_are_named_as_python_spells_them():
    with pytest.raises(ValueError) as caught:
        vaecodec.load(TINY["wan2.1-vae"], device="cuda")
    assert one_line(caught.value) == "device 'cuda': no CUDA device is available here (device='cpu' runs on the CPU)"


def test_weights_the_cli_refuses_are_refused_with_its_message(cli, tmp_path):
    (tmp_path / "broken.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}")
    want = cli_error(cli, "inspect", tmp_path / "broken.safetensors")
    with pytest.raises(RuntimeError) as caught:
        vaecodec.load(tmp_path / "broken.safetensors", device="cpu")
    assert one_line(caught.value) == want
    (tmp_path / "empty").mkdir()
    want = cli_error(cli, "inspect", tmp_path / "empty")
    with pytest.raises(ValueError) as caught:
        vaecodec.load(tmp_path / "empty", device="cpu")
    assert one_line(caught.value) == want


def test_bad_options_are_value_errors():
    with pytest.raises(ValueError, match="vram: "):
        vaecodec.load(TINY["wan2.1-vae"], device="cpu", vram="eight gigs")
    with pytest.raises(ValueError, match="rtx-none"):
        vaecodec.load(TINY["wan2.1-vae"], device="cpu", preset="rtx-none")
    with pytest.raises(ValueError, match="is not a device"):
        vaecodec.load(TINY["wan2.1-vae"], device="gpu:0")
    with pytest.raises(ValueError, match="dtype 'fp64'"):
        vaecodec.load(TINY["wan2.1-vae"], device="cpu", dtype="fp64")
    with pytest.raises(ValueError, match="conv 'fast'"):
        vaecodec.load(TINY["wan2.1-vae"], device="cpu", conv="fast")
    with pytest.raises(ValueError, match="dtype fp8"):
        vaecodec.load(TINY["wan2.1-vae"], device="cpu", dtype="fp8")


def test_a_failed_call_leaves_the_model_usable(model):
    z = torch.randn(1, 16, 2, 4, 4, generator=torch.Generator().manual_seed(7))
    want = model.decode(z)
    for bad in (torch.zeros(1, 8, 2, 4, 4), torch.zeros(1, 16, 2, 4, 4, dtype=torch.int32)):
        with pytest.raises((ValueError, TypeError)):
            model.decode(bad)
    assert torch.equal(model.decode(z), want)
