"""The LTX-2 video VAE's golden data (tests/data/ltx2-tiny, made by scripts/make_golden_ltx2.py) against diffusers'
AutoencoderKLLTX2Video in float64, and the streaming facts docs/ltx2-vae.md states: how many output frames a
non-causal decode must hold back, and that the encoder is causal."""

import json
import pathlib
import sys

import pytest
import torch

# diffusers (scripts/setup.sh installs 0.42.1, which has AutoencoderKLLTX2Video) is one of the test
# environment's packages: without it these tests fail, never skip.
import diffusers
from safetensors import safe_open
from safetensors.torch import load_file

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
TINY = DATA / "ltx2-tiny"
sys.path.insert(0, str(ROOT / "scripts"))
import make_golden_ltx2 as golden  # noqa: E402

META = json.loads((TINY / "meta.json").read_text())
TAGS = ["20", "23"]
TOL = 1e-12


def close(a, b, tol=TOL):
    return (a - b).abs().max().item() <= tol * max(1.0, b.abs().max().item())


@pytest.fixture(scope="module")
def cases():
    return load_file(str(TINY / "cases.safetensors"))


@pytest.fixture(scope="module")
def models():
    torch.set_grad_enabled(False)
    out = {}
    for tag in TAGS:
        entry = META["configs"][tag]
        model = diffusers.AutoencoderKLLTX2Video(**entry["diffusers"]).double().eval()
        weights = load_file(str(TINY / entry["weights"]))
        four = len(golden.split_blocks(entry["original"]["decoder_blocks"], golden.UP)[1]) == 4
        state = {golden.conversion_rename(k, four): v.double() for k, v in weights.items()}
        model.load_state_dict(state, strict=True)
        out[tag] = model
    return out


@pytest.mark.parametrize("tag", TAGS)
def test_weights_carry_their_config(tag):
    entry = META["configs"][tag]
    with safe_open(str(TINY / entry["weights"]), "pt") as f:
        config = json.loads(f.metadata()["config"])["vae"]
        assert all(f.get_slice(k).get_dtype() == "BF16" for k in f.keys())
    assert config == entry["original"] == golden.TINY[tag]
    assert json.loads(json.dumps(golden.diffusers_config(config))) == entry["diffusers"]


def test_released_configs_translate_to_diffusers_released_ones():
    # diffusers' configs for Lightricks/LTX-2 and LTX-2.3 (scripts/convert_ltx2_to_diffusers.py, hub vae/config.json)
    c20, c23 = golden.diffusers_config(golden.RELEASED["20"]), golden.diffusers_config(golden.RELEASED["23"])
    assert c20["block_out_channels"] == (256, 512, 1024, 2048) and c20["layers_per_block"] == (4, 6, 6, 2, 2)
    assert c20["decoder_block_out_channels"] == (256, 512, 1024) and c20["decoder_layers_per_block"] == (5,) * 4
    assert c20["upsample_residual"] == (True,) * 3 and c20["upsample_factor"] == (2, 2, 2)
    assert c20["decoder_spatial_padding_mode"] == "reflect" and c20["encoder_spatial_padding_mode"] == "zeros"
    assert c23["block_out_channels"] == (256, 512, 1024, 1024) and c23["layers_per_block"] == (4, 6, 4, 2, 2)
    assert c23["decoder_block_out_channels"] == (256, 512, 512, 1024)
    assert c23["decoder_layers_per_block"] == (4, 6, 4, 2, 2) and c23["upsample_factor"] == (2, 2, 1, 2)
    assert c23["upsample_type"] == ("spatiotemporal", "spatiotemporal", "temporal", "spatial")
    assert c23["upsample_residual"] == (False,) * 4 and c23["decoder_spatial_padding_mode"] == "zeros"
    for c in (c20, c23):
        assert (c["spatial_compression_ratio"], c["temporal_compression_ratio"]) == (32, 8)
        assert c["encoder_causal"] and not c["decoder_causal"] and not c["timestep_conditioning"]


@pytest.mark.parametrize("name,count", [("ltx2", 184), ("ltx23", 170)])
def test_released_key_manifest(name, count):
    keys = json.loads((DATA / f"{name}-released-keys.json").read_text())
    assert len(keys) == count
    assert keys["per_channel_statistics.mean-of-means"] == [128]
    assert keys["encoder.conv_in.conv.weight"] == [128, 48, 3, 3, 3]
    assert keys["encoder.conv_out.conv.weight"] == [129, keys["encoder.conv_out.conv.weight"][1], 3, 3, 3]
    assert keys["decoder.conv_out.conv.weight"] == [48, 128, 3, 3, 3]
    assert all(k.startswith(("encoder.", "decoder.", "per_channel_statistics.")) for k in keys)


@pytest.mark.parametrize("tag", TAGS)
def test_encode_matches_golden(models, cases, tag):
    model, c = models[tag], META["configs"][tag]["original"]["latent_channels"]
    mean, std = golden.stats(model)
    video = cases["video"].double()
    h = model.encoder(video)
    assert close(h[:, :c], cases[f"{tag}.video_mu_raw"])
    assert close(h[:, c:c + 1], cases[f"{tag}.video_logvar"])
    assert close((h[:, :c] - mean) / std, cases[f"{tag}.video_mu"])
    assert close((model.encoder(video[:, :, :1])[:, :c] - mean) / std, cases[f"{tag}.image_mu"])


@pytest.mark.parametrize("tag", TAGS)
def test_decode_matches_golden(models, cases, tag):
    model = models[tag]
    mean, std = golden.stats(model)
    latent = cases[f"{tag}.latent"]
    assert close(model.decode(latent * std + mean).sample, cases[f"{tag}.latent_decoded"])
    assert close(model.decode(latent[:, :, :1] * std + mean).sample, cases[f"{tag}.image_decoded"])


@pytest.mark.parametrize("tag", TAGS)
def test_encoder_is_causal(models, cases, tag):
    # The first 1 + 8k frames alone give the first 1 + k latent frames: no look-ahead, first frame replicated left.
    model = models[tag]
    video = cases["video"].double()
    assert close(model.encoder(video[:, :, :9]), model.encoder(video)[:, :, :2])


@pytest.mark.parametrize("tag,frames,arrived,hw", [("20", 11, 9, (2, 2)), ("23", 13, 11, (1, 1))])
def test_decoder_look_ahead(models, tag, frames, arrived, hw):
    """With `arrived` latent frames of a longer clip, exactly final_frames(...) output frames are settled: they
    equal the whole clip's whatever comes later, and the next one does not."""
    model, vae = models[tag], META["configs"][tag]["original"]
    gen = torch.Generator().manual_seed(5)
    c = vae["latent_channels"]
    z = torch.randn(1, c, frames, *hw, generator=gen, dtype=torch.float64)
    other = z.clone()
    other[:, :, arrived:] = torch.randn(1, c, frames - arrived, *hw, generator=gen, dtype=torch.float64)
    whole, changed = model.decode(z).sample, model.decode(other).sample
    cut = model.decode(z[:, :, :arrived]).sample  # the clip ends there: right padding replicates its last frame
    settled = golden.final_frames(vae, arrived, ended=False)
    assert settled > 0
    assert whole.shape[2] == 8 * (frames - 1) + 1 and cut.shape[2] == 8 * (arrived - 1) + 1
    assert cut.shape[2] - settled == golden.held_back(vae) == META["held_back_output_frames"][tag]
    assert close(changed[:, :, :settled], whole[:, :, :settled])
    assert close(cut[:, :, :settled], whole[:, :, :settled])
    assert (changed[:, :, settled] - whole[:, :, settled]).abs().max() > 1e-6
    assert (cut[:, :, settled] - whole[:, :, settled]).abs().max() > 1e-6


def test_released_hold_back():
    # docs/ltx2-vae.md, Streaming: output frames held back by a streaming decode of the released decoders
    assert golden.held_back(golden.RELEASED["20"]) == 173
    assert golden.held_back(golden.RELEASED["23"]) == 108
