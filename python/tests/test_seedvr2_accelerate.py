"""vaecodec.seedvr2.accelerate on a VideoAutoencoderKLWrapper (seedvr2_front_end's stand-in for ComfyUI-SeedVR2's
and the official SeedVR code's class) with the tiny SeedVR2 weights, against the golden cases of the official
code, on the CPU in float32 (1e-5 relative)."""

import json
import os
import pathlib
import types

import pytest
import torch
import torch.nn as nn

import vaecodec
from conftest import DATA, relative_error

# diffusers is one of the test environment's packages (scripts/setup.sh): without it these tests fail, never skip.
import vaecodec.seedvr2
from diffusers.models.autoencoders.vae import DiagonalGaussianDistribution
from safetensors.torch import load_file

import seedvr2_front_end
from seedvr2_front_end import CausalDecoderOutput, CausalEncoderOutput  # noqa: E402

GOLDEN = pathlib.Path(os.environ.get("VAECODEC_SEEDVR2_GOLDEN", DATA / "seedvr2-tiny"))
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def golden():
    meta = json.loads((GOLDEN / "meta.json").read_text())
    cases = load_file(str(GOLDEN / "cases.safetensors"))
    return types.SimpleNamespace(config=meta["config"], weights=load_file(str(GOLDEN / "weights.safetensors")),
                                 **cases)


def make_vae(golden, official=False):
    vae = seedvr2_front_end.build(golden.config, official=official)
    vae.load_state_dict(golden.weights, strict=True)
    return vae.eval()


def one_line(error) -> str:
    text = str(error.value)
    assert "\n" not in text, f"more than one line: {text!r}"
    return text


def test_the_stand_in_computes_the_golden_cases(golden):
    vae = make_vae(golden)
    with torch.no_grad():
        assert relative_error(vae.encode(golden.video).latent, golden.video_mean_sliced) <= TOLERANCE
        assert relative_error(vae.decode(golden.latent).sample, golden.latent_decoded_sliced) <= TOLERANCE


def test_accelerated_encode_and_decode_are_the_golden_cases(golden):
    vae = make_vae(golden)
    with vaecodec.seedvr2.accelerate(vae) as handle:
        assert handle.model.family == "seedvr2-vae" and handle.model.config["norm_num_groups"] == 8
        assert handle.model.dtype == torch.float32 and handle.model.device == torch.device("cpu")
        out = vae.encode(golden.video)
        assert type(out) is CausalEncoderOutput
        assert isinstance(out.posterior, DiagonalGaussianDistribution)
        assert relative_error(out.latent, golden.video_mean_sliced) <= TOLERANCE
        assert torch.equal(out.posterior.mode(), out.latent) and torch.equal(out.posterior.sample(), out.latent)
        assert out.latent.dtype == torch.float32
        decoded = vae.decode(golden.latent)
        assert type(decoded) is CausalDecoderOutput
        # Unclamped, as the class decodes: the golden frames reach 2.5.
        assert relative_error(decoded.sample, golden.latent_decoded_sliced) <= TOLERANCE
        assert relative_error(vae.decode(out.latent).sample, golden.video_roundtrip_sliced) <= TOLERANCE
        # The class's forward calls its encode and decode: the engine's now.
        assert relative_error(vae(golden.video).sample, golden.video_roundtrip_sliced) <= TOLERANCE


def test_one_image_is_4d_in_and_out_as_the_class_gives_it(golden):
    vae = make_vae(golden)
    image = golden.video[:, :, 0]  # [1, 3, 64, 48]
    with torch.no_grad():
        own_latent = vae.encode(image).latent
        own_frame = vae.decode(own_latent).sample
        own_one_frame = vae.encode(golden.video[:, :, :1]).latent
    with vaecodec.seedvr2.accelerate(vae):
        latent = vae.encode(image).latent
        assert latent.shape == own_latent.shape == (1, 16, 8, 6)
        # Causal: an image's latent is the clip's first latent frame.
        assert relative_error(latent, golden.video_mean_sliced[:, :, 0]) <= TOLERANCE
        assert vae.encode(image).posterior.mean.shape == (1, 16, 1, 8, 6)
        frame = vae.decode(latent).sample
        assert frame.shape == own_frame.shape == (1, 3, 64, 48)
        assert relative_error(frame, own_frame) <= TOLERANCE
        # A clip of one frame loses its time axis as the class's squeeze(2) takes it away.
        assert vae.encode(golden.video[:, :, :1]).latent.shape == own_one_frame.shape == (1, 16, 8, 6)
        assert vae.decode(golden.latent[:, :, :1]).sample.shape == (1, 3, 64, 48)


def test_tile_arguments_are_accepted_and_the_engine_plans_its_own(golden):
    vae = make_vae(golden)
    with vaecodec.seedvr2.accelerate(vae):
        whole = vae.encode(golden.video).latent
        tiled = vae.encode(golden.video, True, True, (32, 32), (8, 8)).latent
        assert torch.equal(tiled, whole)
        frames = vae.decode(golden.latent, tiled=True, tile_size=(32, 32), tile_overlap=(16, 16)).sample
        assert torch.equal(frames, vae.decode(golden.latent).sample)
        with pytest.raises(TypeError, match="tile_sizes"):
            vae.encode(golden.video, tile_sizes=(32, 32))  # not an argument of the class's
        with pytest.raises(TypeError, match="encode expects a tensor of frames, got list"):
            vae.encode([golden.video])


def test_the_official_class_keeps_its_arguments(golden):
    vae = make_vae(golden, official=True)
    with vaecodec.seedvr2.accelerate(vae):
        out = vae.encode(golden.video)
        assert type(out) is CausalEncoderOutput
        assert relative_error(out.latent, golden.video_mean_sliced) <= TOLERANCE
        assert relative_error(vae.decode(z=golden.latent).sample, golden.latent_decoded_sliced) <= TOLERANCE
        with pytest.raises(TypeError, match="tiled"):
            vae.encode(golden.video, tiled=True)
        with pytest.raises(TypeError):
            vae.decode(golden.latent, True)


def test_restore_puts_the_class_s_methods_back(golden):
    vae = make_vae(golden)
    with torch.no_grad():
        own = vae.decode(golden.latent).sample
    runner = types.SimpleNamespace(vae=vae, dit=None)
    handle = vaecodec.seedvr2.accelerate(runner)
    assert handle.vae is vae and "decode" in vae.__dict__
    assert vae.__dict__["decode"].__self__ is handle
    handle.restore()
    assert "encode" not in vae.__dict__ and "decode" not in vae.__dict__ and handle.model is None
    with torch.no_grad():
        assert torch.equal(vae.decode(golden.latent).sample, own)
    handle.restore()  # a second restore changes nothing
    assert "encode" not in vae.__dict__


def test_the_budget_is_the_argument_s(golden):
    vae = make_vae(golden)
    with vaecodec.seedvr2.accelerate(vae, vram="1G") as handle:
        assert handle.model.plan(list(golden.latent.shape))["budget_bytes"] == 1 << 30
    with vaecodec.seedvr2.accelerate(vae, vram="16M"):
        with pytest.raises(ValueError, match="does not fit in 16 MiB") as raised:
            vae.decode(golden.latent)
        one_line(raised)


def test_another_config_runs_exactly_as_its_own_class():
    torch.manual_seed(3)
    config = {"block_out_channels": [8, 16, 16], "layers_per_block": 1, "latent_channels": 8, "norm_num_groups": 4,
              "temporal_scale_num": 1}
    vae = seedvr2_front_end.build(config).eval()
    g = torch.Generator().manual_seed(5)
    video = torch.rand(1, 3, 9, 32, 24, generator=g) * 2 - 1
    latent = torch.randn(1, 8, 5, 8, 6, generator=g)
    with torch.no_grad():
        own_latent = vae.encode(video).latent
        own_frames = vae.decode(latent).sample
    with vaecodec.seedvr2.accelerate(vae) as handle:
        assert handle.model.config["norm_num_groups"] == 4 and handle.model.latent_channels == 8
        assert handle.model.spatial_factor == vae.spatial_downsample_factor == 4
        assert handle.model.temporal_factor == vae.temporal_downsample_factor == 2
        assert relative_error(vae.encode(video).latent, own_latent) <= TOLERANCE
        assert relative_error(vae.decode(latent).sample, own_frames) <= TOLERANCE


def test_another_dtype_runs_as_asked_and_returns_the_vae_s(golden):
    vae = make_vae(golden)
    with vaecodec.seedvr2.accelerate(vae, dtype=torch.bfloat16) as handle:
        assert handle.model.dtype == torch.bfloat16
        latent = vae.encode(golden.video).latent
        assert latent.dtype == torch.float32
        assert relative_error(latent, golden.video_mean_sliced) <= 5e-2  # bf16's arithmetic
    vae.to(torch.bfloat16)
    with vaecodec.seedvr2.accelerate(vae) as handle:  # the VAE's own dtype
        assert handle.model.dtype == torch.bfloat16
        assert vae.decode(golden.latent).sample.dtype == torch.bfloat16


def mixed_dtypes(vae):
    vae.decoder.conv_out.to(torch.float16)


def float64(vae):
    vae.to(torch.float64)


def on_meta(vae):
    vae.to("meta")


def quant_conv(vae):
    vae.quant_conv = nn.Conv3d(32, 32, 1)  # the real class's use_quant_conv=True


def no_attention(vae):
    vae.decoder.mid_block.attentions = nn.ModuleList([None])  # the real class's attention=False


def gelu(vae):
    vae.config["act_fn"] = "gelu"


def mixed_groups(vae):
    vae.encoder.conv_norm_out.num_groups = 4


def norm_eps(vae):
    for m in vae.modules():
        if isinstance(m, nn.GroupNorm):
            m.eps = 1e-5


@pytest.mark.parametrize("change, error, words", [
    (mixed_dtypes, TypeError, "the VAE's parameters are in torch.float16 and torch.float32: vaecodec runs a VAE in "
                              "one dtype (convert it with vae.to(dtype))"),
    (float64, TypeError, "the VAE is in torch.float64: vaecodec runs torch.float32, torch.bfloat16 or torch.float16 "
                         "(pass dtype= to run it in one of them)"),
    (on_meta, ValueError, "the VAE's weights are not loaded (they are on the meta device): accelerate it once they "
                          "are"),
    (quant_conv, ValueError, "the VAE's use_quant_conv is True: vaecodec computes SeedVR2's VAE with use_quant_conv "
                             "False"),
    (no_attention, ValueError, "the VAE's attention is False: vaecodec computes SeedVR2's VAE with attention True"),
    (gelu, ValueError, "the VAE's act_fn is 'gelu': vaecodec computes SeedVR2's VAE with act_fn 'silu'"),
    (mixed_groups, ValueError, "the VAE's norms have 4 and 8 groups: vaecodec's SeedVR2 VAE has one norm_num_groups"),
    (norm_eps, ValueError, "the VAE's norm_eps is 1e-05: vaecodec computes SeedVR2's VAE with norm_eps 1e-06"),
], ids=lambda v: v.__name__ if callable(v) else None)
def test_a_vae_the_engine_does_not_compute_is_refused_in_one_line(golden, change, error, words):
    vae = make_vae(golden)
    change(vae)
    with pytest.raises(error) as raised:
        vaecodec.seedvr2.accelerate(vae)
    assert one_line(raised) == words
    assert "encode" not in vae.__dict__ and "decode" not in vae.__dict__


def test_a_float64_vae_runs_in_the_dtype_asked_for(golden):
    vae = make_vae(golden).to(torch.float64)
    with vaecodec.seedvr2.accelerate(vae, dtype="fp32") as handle:
        assert handle.model.dtype == torch.float32
        latent = vae.encode(golden.video).latent
        assert latent.dtype == torch.float64
        assert relative_error(latent, golden.video_mean_sliced) <= TOLERANCE


def test_other_objects_are_refused():
    with pytest.raises(TypeError, match="VideoAutoencoderKLWrapper .or what holds one as .vae., not Linear$"):
        vaecodec.seedvr2.accelerate(nn.Linear(2, 2))
    with pytest.raises(TypeError, match="not SimpleNamespace$"):
        vaecodec.seedvr2.accelerate(types.SimpleNamespace(dit=None))
