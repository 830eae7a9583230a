"""The ComfyUI node pack's functions with tensors shaped as ComfyUI passes them: IMAGE [N, H, W, 3] in [0, 1],
LATENT {"samples": raw latents [B, C, t, h, w]}."""

import pathlib
import sys

import pytest
import torch
from safetensors.torch import load_file

import vaecodec
from conftest import TINY, relative_error

sys.path.append(str(pathlib.Path(__file__).resolve().parents[1]))  # the node pack; vaecodec stays the installed one
import comfyui_vaecodec  # noqa: E402
from comfyui_vaecodec import nodes  # noqa: E402

WEIGHTS = str(TINY["wan2.1-vae"])


@pytest.fixture(scope="module")
def model():
    # Loaded as the nodes load a weights path (the GPU in bf16 where there is one, else the CPU in float32), so
    # that what the nodes add (layouts, crops, ranges) is compared alone.
    return vaecodec.load(WEIGHTS)


class StateDictVae:
    """What the nodes take from ComfyUI's VAE object: get_sd() (the first stage model's state dict, original
    Wan names), device and vae_dtype. Built here from the tiny model's own tensors."""

    def __init__(self):
        cuda = torch.cuda.is_available()
        self.device = torch.device("cuda" if cuda else "cpu")
        self.vae_dtype = torch.bfloat16 if cuda else torch.float32
        self._sd = load_file(WEIGHTS)

    def get_sd(self):
        return self._sd


def images(n, h, w, seed=0):
    return torch.rand(n, h, w, 3, generator=torch.Generator().manual_seed(seed))


def test_the_pack_registers_both_nodes():
    names = comfyui_vaecodec.NODE_DISPLAY_NAME_MAPPINGS
    assert names == {"VaecodecDecode": "VAE Decode (vaecodec)", "VaecodecEncode": "VAE Encode (vaecodec)"}
    for cls in comfyui_vaecodec.NODE_CLASS_MAPPINGS.values():
        spec = cls.INPUT_TYPES()
        assert set(spec["optional"]) == {"vae", "weights", "vram"}
        assert callable(getattr(cls(), cls.FUNCTION))
    assert comfyui_vaecodec.NODE_CLASS_MAPPINGS["VaecodecDecode"].RETURN_TYPES == ("IMAGE",)
    assert comfyui_vaecodec.NODE_CLASS_MAPPINGS["VaecodecEncode"].RETURN_TYPES == ("LATENT",)


def test_encode_gives_raw_latents_of_the_frames(model):
    pixels = images(9, 32, 48)
    (latent,) = nodes.VaecodecEncode().run(pixels, weights=WEIGHTS)
    samples = latent["samples"]
    assert samples.shape == (1, 16, 3, 4, 6) and samples.dtype == torch.float32 and samples.device.type == "cpu"
    want = model.encode(pixels.permute(3, 0, 1, 2).unsqueeze(0) * 2 - 1, normalized=False)
    assert relative_error(samples, want) <= 1e-6


def test_encode_crops_and_drops_frames_as_comfyui_does(model):
    pixels = images(11, 37, 50, seed=1)  # 11 frames: 9 kept; 37x50: the centred 32x48 kept
    (latent,) = nodes.VaecodecEncode().run(pixels, weights=WEIGHTS)
    kept = pixels[:9, 2:34, 1:49]
    want = model.encode(kept.permute(3, 0, 1, 2).unsqueeze(0) * 2 - 1, normalized=False)
    assert relative_error(latent["samples"], want) <= 1e-6


def test_decode_gives_every_frame_in_zero_one(model):
    samples = torch.randn(2, 16, 3, 4, 6, generator=torch.Generator().manual_seed(2)) * 2
    (image,) = nodes.VaecodecDecode().run({"samples": samples}, weights=WEIGHTS)
    assert image.shape == (2 * 9, 32, 48, 3) and image.device.type == "cpu"
    assert image.min() >= 0 and image.max() <= 1
    video = model.decode(samples, normalized=False)
    want = ((video.float() + 1) / 2).clamp(0, 1).movedim(1, -1).reshape(-1, 32, 48, 3)
    assert relative_error(image, want) <= 1e-6


def test_a_comfyui_vae_object_is_taken_with_its_weights_and_cached():
    vae = StateDictVae()
    pixels = images(5, 32, 32, seed=3)
    (a,) = nodes.VaecodecEncode().run(pixels, vae=vae)
    (b,) = nodes.VaecodecEncode().run(pixels, weights=WEIGHTS)
    assert torch.equal(a["samples"], b["samples"])
    assert nodes.get_model(vae) is nodes.get_model(vae)
    assert nodes.get_model(vae, vram="1G") is not nodes.get_model(vae)


def test_round_trip_through_both_nodes_keeps_the_shape():
    pixels = images(5, 32, 32, seed=4)
    (latent,) = nodes.VaecodecEncode().run(pixels, weights=WEIGHTS)
    (image,) = nodes.VaecodecDecode().run(latent, weights=WEIGHTS)
    assert image.shape == pixels.shape


def test_nothing_to_run_on_is_an_error():
    with pytest.raises(ValueError, match="VAE or a weights path"):
        nodes.VaecodecDecode().run({"samples": torch.zeros(1, 16, 1, 2, 2)})
