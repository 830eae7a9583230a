"""vaecodec.load(...).encode/.decode against the CLI run on the same frames and latents, on the CPU in float32."""

import subprocess
import threading
import time

import pytest
import torch
from safetensors.torch import load_file, save_file

import vaecodec
from conftest import TINY, relative_error, run_cli

FAMILIES = sorted(TINY)


def smooth_clip(frames: int, height: int, width: int, seed: int = 0) -> torch.Tensor:
    """8-bit RGB frames [T, H, W, 3] with some structure (a blurred random field plus a little noise)."""
    g = torch.Generator().manual_seed(seed)
    coarse = torch.rand(1, 3, frames, max(height // 8, 1), max(width // 8, 1), generator=g)
    fine = torch.nn.functional.interpolate(coarse, size=(frames, height, width), mode="trilinear")
    fine = fine + 0.05 * torch.randn(fine.shape, generator=g)
    return (fine.clamp(0, 1) * 255).round().to(torch.uint8)[0].permute(1, 2, 3, 0).contiguous()


def write_rgb_video(path, rgb: torch.Tensor, fps: int = 16):
    """A lossless planar-RGB video (FFV1, gbrp) of `rgb` [T, H, W, 3] uint8, written by ffmpeg."""
    t, h, w, _ = rgb.shape
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{w}x{h}",
                    "-r", str(fps), "-i", "-", "-c:v", "ffv1", "-pix_fmt", "gbrp", str(path)],
                   input=rgb.numpy().tobytes(), check=True)


def read_rgb48(path, frames: int, height: int, width: int) -> torch.Tensor:
    """The frames of a 16-bit RGB video as code values [T, H, W, 3] (int32)."""
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", str(path), "-f", "rawvideo", "-pix_fmt", "rgb48le", "-"],
                         capture_output=True, check=True).stdout
    import numpy as np

    codes = np.frombuffer(raw, dtype="<u2").astype("int32")
    return torch.from_numpy(codes).view(frames, height, width, 3)


def as_model_input(rgb: torch.Tensor) -> torch.Tensor:
    """uint8 [T, H, W, 3] -> [1, 3, T, H, W] in [-1, 1], as the CLI converts 8-bit RGB (v * 2 / 255 - 1)."""
    return rgb.permute(3, 0, 1, 2).unsqueeze(0).float().mul_(2.0 / 255).sub_(1.0)


def as_codes16(video: torch.Tensor) -> torch.Tensor:
    """[1, 3, T, H, W] in [-1, 1] -> 16-bit code values [T, H, W, 3], as the CLI quantizes RGB output."""
    return video[0].float().add(1.0).mul_(0.5).clamp(0.0, 1.0).mul_(65535).round_().to(torch.int32).permute(1, 2, 3, 0)


@pytest.fixture(scope="module")
def models():
    return {family: vaecodec.load(path, device="cpu", dtype="fp32") for family, path in TINY.items()}


@pytest.mark.parametrize("family", FAMILIES)
def test_encode_equals_the_cli_on_the_same_frames(cli, models, tmp_path, family):
    rgb = smooth_clip(9, 48, 64)
    write_rgb_video(tmp_path / "clip.mkv", rgb)
    run_cli(cli, "encode", tmp_path / "clip.mkv", "-o", tmp_path / "clip.safetensors", "--weights", TINY[family],
            "--device", "cpu", "--quiet")
    want = load_file(str(tmp_path / "clip.safetensors"))["latents"]
    got = models[family].encode(as_model_input(rgb))
    assert got.shape == want.shape
    assert got.dtype == torch.float32 and got.device.type == "cpu"
    assert relative_error(got, want) <= 1e-6


def test_raw_latents_equal_the_cli_s_comfyui_file(cli, models, tmp_path):
    # A .latent holds raw latents (mean * std + mean per channel): normalized=False must give the same.
    rgb = smooth_clip(5, 32, 48, seed=3)
    write_rgb_video(tmp_path / "clip.mkv", rgb)
    run_cli(cli, "encode", tmp_path / "clip.mkv", "-o", tmp_path / "clip.latent", "--weights", TINY["wan2.1-vae"],
            "--device", "cpu", "--quiet")
    want = load_file(str(tmp_path / "clip.latent"))["latent_tensor"]
    m = models["wan2.1-vae"]
    raw = m.encode(as_model_input(rgb), normalized=False)
    assert relative_error(raw, want) <= 1e-6
    assert relative_error(m.encode(as_model_input(rgb)), (want - m.latent_mean.view(1, -1, 1, 1, 1))
                          / m.latent_std.view(1, -1, 1, 1, 1)) <= 1e-5


@pytest.mark.parametrize("family", FAMILIES)
def test_decode_equals_the_cli_on_the_same_latents(cli, models, tmp_path, family):
    m = models[family]
    h, w = 48 // m.spatial_factor, 64 // m.spatial_factor
    latents = torch.randn(1, m.latent_channels, 3, h, w, generator=torch.Generator().manual_seed(1))
    save_file({"latents": latents}, str(tmp_path / "z.safetensors"))
    run_cli(cli, "decode", tmp_path / "z.safetensors", "-o", tmp_path / "video.mkv", "--fps", "16", "--weights",
            TINY[family], "--device", "cpu", "--codec", "ffv1", "--pix-fmt", "gbrp16le", "--quiet")
    video = m.decode(latents)
    frames = 1 + (latents.shape[2] - 1) * m.temporal_factor
    assert video.shape == (1, 3, frames, 48, 64)
    assert video.min() >= -1 and video.max() <= 1
    got, want = as_codes16(video), read_rgb48(tmp_path / "video.mkv", frames, 48, 64)
    # The same engine on the same latents: the same code values, but for a rounding tie at most one level off.
    assert (got - want).abs().max().item() <= 1
    assert (got != want).float().mean().item() <= 1e-3


def test_decode_takes_raw_latents_too(models):
    m = models["wan2.1-vae"]
    z = torch.randn(1, 16, 2, 4, 6, generator=torch.Generator().manual_seed(2))
    raw = z * m.latent_std.view(1, -1, 1, 1, 1) + m.latent_mean.view(1, -1, 1, 1, 1)
    assert relative_error(m.decode(raw, normalized=False), m.decode(z)) <= 1e-5


def test_a_batch_is_its_clips_one_by_one(models):
    m = models["wan2.1-vae"]
    video = as_model_input(smooth_clip(5, 32, 32, seed=4)).repeat(2, 1, 1, 1, 1)
    video[1] = -video[1]
    both = m.encode(video)
    assert both.shape[0] == 2
    for b in range(2):
        assert torch.equal(both[b:b + 1], m.encode(video[b:b + 1]))


def test_properties_and_plan(models):
    m = models["wan2.1-vae"]
    assert m.family == "wan2.1-vae"
    assert (m.latent_channels, m.spatial_factor, m.temporal_factor) == (16, 8, 4)
    assert m.config["dim"] == 8 and m.config["z_dim"] == 16
    assert m.device == torch.device("cpu") and m.dtype == torch.float32
    w22 = models["wan2.2-vae"]
    assert (w22.latent_channels, w22.spatial_factor) == (48, 16)
    plan = m.plan([1, 16, 21, 90, 160], "decode")
    assert plan["chunk"] >= 1 and "summary" in plan and "decode" in plan["summary"]
    assert "wan2.1-vae" in repr(m)


def test_state_dict_loads_as_the_file_does(models):
    m = vaecodec.load(load_file(str(TINY["wan2.1-vae"])), device="cpu", dtype="fp32")
    z = torch.randn(1, 16, 2, 3, 4, generator=torch.Generator().manual_seed(5))
    assert torch.equal(m.decode(z), models["wan2.1-vae"].decode(z))


def test_any_float_dtype_and_non_contiguous_input(models):
    m = models["wan2.1-vae"]
    video = as_model_input(smooth_clip(5, 32, 32, seed=6))
    want = m.encode(video)
    assert relative_error(m.encode(video.double()), want) <= 1e-6
    transposed = video.transpose(3, 4).contiguous().transpose(3, 4)
    assert torch.equal(m.encode(transposed), want)
    assert relative_error(m.encode(video.half()), want) <= 1e-2


def test_outputs_come_in_the_plain_layout_and_save_as_they_are(models, tmp_path):
    # The engine runs channels-last on the GPU and for float32 on the CPU; encode and decode hand back
    # contiguous tensors, which safetensors (a trainer's latent cache) takes as they are.
    for family, m in models.items():
        video = as_model_input(smooth_clip(9, 64, 64, seed=8))
        latents = m.encode(video)
        decoded = m.decode(latents)
        assert latents.is_contiguous() and decoded.is_contiguous(), family
        save_file({"latents": latents}, str(tmp_path / f"{family}.safetensors"))
        assert torch.equal(load_file(str(tmp_path / f"{family}.safetensors"))["latents"], latents)


def test_the_gil_is_released_while_the_engine_runs(models):
    m = models["wan2.1-vae"]
    z = torch.randn(1, 16, 4, 8, 12)
    done = threading.Event()
    errors = []

    def work():
        try:
            m.decode(z)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
        done.set()

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one engine thread: this one gets a core of its own to count on
    try:
        thread = threading.Thread(target=work)
        ticks = 0
        start = time.perf_counter()
        thread.start()
        while not done.is_set():
            ticks += 1
            time.sleep(0.001)
        thread.join()
        seconds = time.perf_counter() - start
    finally:
        torch.set_num_threads(threads)
    assert not errors
    # Holding the GIL for the whole call would leave this thread a tick or two; it ran throughout.
    assert seconds > 0.05 and ticks >= 20


def test_model_config_tells_a_state_dict_what_its_tensors_cannot():
    # The tiny SeedVR2's 8 norm groups: in a file's metadata (conftest's copy), or model_config for its
    # state dict; without it the released 32 groups are assumed, which do not divide its channels.
    tensors = load_file(str(TINY["seedvr2-vae"]))
    from_file = vaecodec.load(TINY["seedvr2-vae"], device="cpu", dtype="fp32")
    from_dict = vaecodec.load(tensors, device="cpu", dtype="fp32", model_config={"norm_num_groups": 8})
    z = torch.randn(1, from_file.latent_channels, 2, 6, 8, generator=torch.Generator().manual_seed(3))
    assert torch.equal(from_dict.decode(z), from_file.decode(z))
    with pytest.raises(Exception, match="norm groups"):
        vaecodec.load(tensors, device="cpu", dtype="fp32")
    with pytest.raises(TypeError, match="model_config is for a state dict"):
        vaecodec.load(TINY["seedvr2-vae"], device="cpu", model_config={"norm_num_groups": 8})
    with pytest.raises(TypeError, match="model_config must be a dict"):
        vaecodec.load(tensors, device="cpu", model_config=8)


def test_decode_clamps_unless_asked_not_to(models):
    # Random latents through a tiny random-weight model overshoot [-1, 1]: clamp=False gives them as they are.
    model = models["seedvr2-vae"]
    z = 3 * torch.randn(1, model.latent_channels, 2, 4, 6, generator=torch.Generator().manual_seed(5))
    raw, clamped = model.decode(z, clamp=False), model.decode(z)
    assert raw.abs().max() > 1
    assert torch.equal(clamped, raw.clamp(-1, 1))
    raw.add_(0)  # a plain tensor the caller may change, not an inference-mode one
