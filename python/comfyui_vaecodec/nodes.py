"""The node functions, importable without ComfyUI (the tests call them with tensors shaped as ComfyUI passes).

ComfyUI's conventions, which these nodes keep:
- IMAGE: float [N, H, W, 3] in [0, 1]; for a video VAE the N images are the frames of one clip.
- LATENT: {"samples": [B, C, t, h, w]}, the raw latents (not normalized) as ComfyUI's Wan VAE returns them,
  float32 on ComfyUI's intermediate device (the CPU unless set otherwise); its diffusion models normalize
  them on the way in.
- VAE: ComfyUI's VAE object; its weights (get_sd(), in the original Wan layout), device and dtype are taken.
  A weights path may be given instead.
- Encode crops the frame to multiples of the spatial factor around the centre and keeps 1 + 4k frames, as
  ComfyUI's VAE encode does; decode returns every frame, [B * T, H, W, 3].
"""

from __future__ import annotations

import weakref

import torch

import vaecodec

_by_vae = weakref.WeakKeyDictionary()  # ComfyUI VAE -> {options: vaecodec.Model}
_by_path = {}  # (path, options) -> vaecodec.Model


def _output_device():
    try:
        import comfy.model_management

        return comfy.model_management.intermediate_device()
    except ImportError:
        return torch.device("cpu")


def _options(vram: str) -> dict:
    return {"vram": vram.strip() or None}


def get_model(vae=None, weights: str = "", vram: str = "") -> vaecodec.Model:
    """The engine's model for a ComfyUI VAE or a weights path, made once per VAE (or path) and budget."""
    options = _options(vram)
    key = tuple(sorted(options.items()))
    if weights.strip():
        path_key = (weights.strip(), key)
        if path_key not in _by_path:
            _by_path[path_key] = vaecodec.load(weights.strip(), **options)
        return _by_path[path_key]
    if vae is None:
        raise ValueError("give a VAE or a weights path")
    models = _by_vae.setdefault(vae, {})
    if key not in models:
        device = getattr(vae, "device", None)
        dtype = getattr(vae, "vae_dtype", None)
        models[key] = vaecodec.load(vae.get_sd(), device=device, dtype=dtype, **options)
    return models[key]


def encode(pixels: torch.Tensor, vae=None, weights: str = "", vram: str = "") -> dict:
    """IMAGE [N, H, W, 3] in [0, 1] -> LATENT {"samples": raw latents [1, C, 1 + (N - 1) // 4, h, w]}."""
    model = get_model(vae, weights, vram)
    if not torch.is_tensor(pixels) or pixels.dim() != 4:
        raise ValueError("VAE Encode (vaecodec) expects an IMAGE shaped [N, H, W, C]")
    f, tf = model.spatial_factor, model.temporal_factor
    height, width = pixels.shape[1] // f * f, pixels.shape[2] // f * f
    top, left = (pixels.shape[1] % f) // 2, (pixels.shape[2] % f) // 2
    frames = 1 + (pixels.shape[0] - 1) // tf * tf
    clip = pixels[:frames, top:top + height, left:left + width, :3]
    video = clip.movedim(-1, 0).unsqueeze(0) * 2 - 1  # [1, 3, N, H, W] in [-1, 1]
    latents = model.encode(video, normalized=False)
    return {"samples": latents.to(_output_device(), torch.float32)}


def decode(samples: dict, vae=None, weights: str = "", vram: str = "") -> torch.Tensor:
    """LATENT {"samples": raw latents [B, C, t, h, w]} -> IMAGE [B * (1 + 4 (t - 1)), H, W, 3] in [0, 1]."""
    model = get_model(vae, weights, vram)
    video = model.decode(samples["samples"], normalized=False)  # [B, 3, T, H, W] in [-1, 1]
    images = ((video.float() + 1) / 2).clamp(0, 1).movedim(1, -1)  # [B, T, H, W, 3]
    return images.reshape(-1, *images.shape[-3:]).to(_output_device())


_VAE_INPUTS = {
    "vae": ("VAE",),
    "weights": ("STRING", {"default": "", "tooltip": "a weights file or folder instead of the VAE input"}),
    "vram": ("STRING", {"default": "", "tooltip": "memory budget, e.g. 8G; empty: the GPU's free memory"}),
}


class VaecodecDecode:
    CATEGORY = "latent"
    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "run"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"samples": ("LATENT",)}, "optional": dict(_VAE_INPUTS)}

    def run(self, samples, vae=None, weights="", vram=""):
        return (decode(samples, vae, weights, vram),)


class VaecodecEncode:
    CATEGORY = "latent"
    RETURN_TYPES = ("LATENT",)
    FUNCTION = "run"

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"pixels": ("IMAGE",)}, "optional": dict(_VAE_INPUTS)}

    def run(self, pixels, vae=None, weights="", vram=""):
        return (encode(pixels, vae, weights, vram),)


NODE_CLASS_MAPPINGS = {"VaecodecDecode": VaecodecDecode, "VaecodecEncode": VaecodecEncode}
NODE_DISPLAY_NAME_MAPPINGS = {"VaecodecDecode": "VAE Decode (vaecodec)", "VaecodecEncode": "VAE Encode (vaecodec)"}
