"""vaecodec's causal video VAE engine (Wan2.1, Wan2.2, SeedVR2) on torch tensors.

    m = vaecodec.load("Wan2.1_VAE.pth", device="cuda", dtype="bf16")
    latents = m.encode(video)      # video [B, 3, T, H, W] in [-1, 1] -> latents [B, C, t, h, w]
    video = m.decode(latents)      # latents -> video [B, 3, T, H, W] in [-1, 1]
    with m.decode_stream() as s:   # a clip block by block, as a realtime generator makes it
        frames = s.push(block)

The same planner, chunks, tiles, kernels and memory budget as the `vaecodec` command line, built against the
torch of this environment. `vaecodec.diffusers.accelerate(vae_or_pipe)` puts it under a diffusers pipeline.
"""

from __future__ import annotations

import json
import os
from typing import Mapping, Optional, Sequence, Union

import torch  # loads LibTorch before the extension, which links it

from . import _vaecodec
from .stream import Stream, make_stream

__all__ = ["Model", "Stream", "load", "__version__"]
__version__ = _vaecodec.version()

_DTYPES = {"Float": torch.float32, "BFloat16": torch.bfloat16, "Half": torch.float16, "Double": torch.float64}
_DTYPE_NAMES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


def _dtype_name(dtype) -> str:
    if dtype is None:
        return "auto"
    if isinstance(dtype, torch.dtype):
        if dtype not in _DTYPE_NAMES:
            raise TypeError(f"dtype {dtype} is not one of torch.float32, torch.bfloat16, torch.float16")
        return _DTYPE_NAMES[dtype]
    if isinstance(dtype, str):
        return {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}.get(dtype, dtype)
    raise TypeError(f"dtype must be a string such as 'bf16' or a torch.dtype, got {type(dtype).__name__}")


def _device_name(device) -> str:
    if device is None:
        return "auto"
    if isinstance(device, (str, torch.device)):
        return str(device)
    if isinstance(device, int):
        return f"cuda:{device}"
    raise TypeError(f"device must be a string, a torch.device or a CUDA index, got {type(device).__name__}")


def _vram_text(vram) -> str:
    if vram is None:
        return ""
    if isinstance(vram, bool) or not isinstance(vram, (int, str)):
        raise TypeError(f"vram must be a size such as '8G' or a number of bytes, got {type(vram).__name__}")
    return str(vram)


def _tile_text(tile) -> str:
    if tile is None:
        return ""
    if isinstance(tile, bool):
        raise TypeError("tile must be a size in latent pixels such as 64, (80, 48) or '80x48', got bool")
    if isinstance(tile, int):
        return str(tile)
    if isinstance(tile, str):
        return tile
    if isinstance(tile, (tuple, list)) and len(tile) == 2 and all(
            isinstance(side, int) and not isinstance(side, bool) for side in tile):
        return f"{tile[0]}x{tile[1]}"
    raise TypeError(f"tile must be a size in latent pixels such as 64, (80, 48) or '80x48', got {tile!r}")


def _latent_pixels(value, name: str) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be a number of latent pixels, got {type(value).__name__}")
    return value


def _check_tensor(value, op: str, what: str) -> None:
    if not torch.is_tensor(value):
        raise TypeError(f"{op} expects a tensor of {what}, got {type(value).__name__}")


class Model:
    """A VAE loaded onto one device, run by vaecodec's engine. Made by `vaecodec.load`."""

    def __init__(self, native):
        self._native = native
        self.device = torch.device(native.device)
        self.dtype = _DTYPES[native.dtype_name]
        self.family: str = native.family
        self.config: dict = json.loads(native.config_json)
        self.latent_channels: int = native.latent_channels
        self.spatial_factor: int = native.spatial_factor
        self.temporal_factor: int = native.temporal_factor
        # SeedVR2's diffusion model takes raw latents times this; Wan's latents are normalized and this is 1.
        self.latent_scale: float = native.latent_scale
        mean, std = native.latent_mean, native.latent_std
        # Per-channel statistics of Wan's raw latents (normalized = (raw - mean) / std); None for SeedVR2.
        self.latent_mean = torch.tensor(mean, dtype=torch.float32) if mean else None
        self.latent_std = torch.tensor(std, dtype=torch.float32) if std else None

    def __repr__(self) -> str:
        return (f"vaecodec.Model({self.family}, {self.latent_channels} latent channels, device={self.device}, "
                f"dtype={self.dtype})")

    def _statistics(self, like: torch.Tensor):
        shape = (1, -1, 1, 1, 1)
        return (self.latent_mean.to(like.device).view(shape), self.latent_std.to(like.device).view(shape))

    def encode(self, video: torch.Tensor, normalized: bool = True) -> torch.Tensor:
        """Frames [B, 3, T, H, W] in [-1, 1] (any float dtype; on the CPU or the model's device; T = 1 + 4k,
        H and W multiples of `spatial_factor`) -> latents [B, C, t, h, w] in float32 on the model's device,
        normalized per channel as the CLI's latent files are (Wan), or with `normalized=False` the raw mean
        (diffusers' `latent_dist.mean`). SeedVR2's latents are raw either way."""
        _check_tensor(video, "encode", "frames")
        latents = self._native.encode(video)
        if latents.is_inference():  # made under the engine's inference mode: a plain tensor for the caller
            latents = latents.clone()
        if not normalized and self.latent_mean is not None:
            mean, std = self._statistics(latents)
            latents = latents * std + mean
        return latents

    def decode(self, latents: torch.Tensor, normalized: bool = True, clamp: bool = True) -> torch.Tensor:
        """Latents [B, C, t, h, w] (normalized as `encode` gives them, or raw with `normalized=False`) ->
        frames [B, 3, 1 + 4(t - 1), H, W] in [-1, 1], in the model's dtype on the model's device; with
        `clamp=False` as the network gives them (SeedVR2's reference does not clamp)."""
        _check_tensor(latents, "decode", "latents")
        if not normalized and self.latent_mean is not None \
                and latents.is_floating_point() and latents.dim() == 5 and latents.size(1) == self.latent_channels:
            mean, std = self._statistics(latents)
            latents = (latents.float() - mean) / std
        # Out of place: the engine's result may be an inference-mode tensor, which the caller could not change.
        video = self._native.decode(latents)
        if clamp:
            return video.clamp(-1, 1)
        return video.clone() if video.is_inference() else video

    def decode_stream(self, normalized: bool = True, output: str = "float", pinned: bool = False,
                      chunk: int = 0) -> "Stream":
        """A session that decodes one clip block by block (`Stream.push`), exactly as the whole clip.

        normalized: the latents are as `encode` gives them (True) or raw (False). output: "float" frames
        [B, 3, T, H, W] in [-1, 1], or "uint8" frames [B, T, H, W, 3] for an encoder, on the device or, with
        pinned=True, in pinned host memory. chunk: at most this many latent frames per model call (0: the
        load's chunk, else a whole block)."""
        return make_stream(self, "decode", normalized, output, pinned, chunk)

    def encode_stream(self, normalized: bool = True, chunk: int = 0) -> "Stream":
        """A session that encodes one clip as its frames come (`Stream.push`), exactly as the whole clip; frames
        that do not complete a group of 4 wait for the next push."""
        return make_stream(self, "encode", normalized, chunk=chunk)

    def plan(self, shape: Sequence[int], op: str = "decode") -> dict:
        """The plan the engine would run an input of `shape` ([B, C, T, H, W]: frames for "encode", latents for
        "decode") under: chunk length, tiles, offloaded caches, the memory estimate and the budget."""
        return json.loads(self._native.plan([int(s) for s in shape], op))


def load(weights: Union[str, os.PathLike, Mapping[str, torch.Tensor]], device=None, dtype=None,
         vram: Optional[Union[str, int]] = None, preset: Optional[str] = None, *, config: Optional[dict] = None,
         conv: str = "auto", autotune: bool = False, chunk: int = 0, model: Optional[str] = None,
         tile: Optional[Union[int, str, Sequence[int]]] = None, tile_overlap: Optional[int] = None,
         norm_context: Optional[int] = None, tile_norms: Optional[str] = None,
         model_config: Optional[dict] = None) -> Model:
    """Loads a VAE for vaecodec's engine.

    weights: anything the CLI's --weights takes (a .safetensors or .pth file, a diffusers model or pipeline
        folder; the family is detected the same way), or a state dict (name -> tensor) with, for a diffusers
        model's, its `config` (the latent statistics in it apply).
    device: "cuda", "cuda:N" or "cpu"; None: the preset's, else cuda when available.
    dtype: "bf16", "fp16", "fp32" (or a torch.dtype), "fp8" (Wan on Hopper); None: the preset's, else bf16 on
        CUDA and fp32 on the CPU.
    vram: the budget runs are planned for ("8G", "7.5GiB" or bytes); None: the preset's, else the memory free
        on the device at each call.
    preset: a GPU tier of `vaecodec presets` (budget, dtype, engine options).
    conv, autotune, chunk, model: the CLI's --conv, --autotune, --chunk and --model.
    tile, tile_overlap, norm_context: the CLI's --tile, --tile-overlap and --norm-context, in latent pixels:
        fixed tiles (64, (width, height) or "80x48"; None: the planner's, only where the frame does not fit),
        the pixels neighbouring tiles share and blend (None: the preset's, else 8) and, for SeedVR2's tiles,
        the pixels around each tile its norms' statistics also see (None: none or 8, the planner's choice).
    tile_norms: the CLI's --tile-norms, SeedVR2's tiles: "crop" (each tile runs the whole model on its crop
        and context, every norm over that), "frame" (the latent-resolution blocks on the whole frame, the
        tiles above them) or "auto" (None: crop tiles decode, frame tiles encode).
    model_config: for a state dict, vaecodec's config keys for what its tensors cannot tell, as a weights file
        carries them in its metadata (`vaecodec_config`), e.g. {"norm_num_groups": 8} for a SeedVR2 VAE of
        another group count.
    """
    options = dict(device=_device_name(device), dtype=_dtype_name(dtype), vram=_vram_text(vram),
                   preset=preset or "", conv=conv, autotune=bool(autotune), chunk=int(chunk), family=model or "",
                   tile=_tile_text(tile), tile_overlap=_latent_pixels(tile_overlap, "tile_overlap"),
                   norm_context=_latent_pixels(norm_context, "norm_context"), tile_norms=tile_norms or "")
    if isinstance(weights, Mapping):
        tensors = {}
        for name, tensor in weights.items():
            if not torch.is_tensor(tensor):
                raise TypeError(f"weights['{name}'] is a {type(tensor).__name__}, not a tensor")
            tensors[str(name)] = tensor.detach().to("cpu")
        merged = dict(_plain(config)) if config is not None else {}
        if model_config is not None:
            if not isinstance(model_config, Mapping):
                raise TypeError(f"model_config must be a dict, got {type(model_config).__name__}")
            merged["vaecodec_config"] = _plain(model_config)
        config_json = json.dumps(merged) if (config is not None or model_config is not None) else ""
        return Model(_vaecodec.load_tensors(tensors, config_json, **options))
    if not isinstance(weights, (str, os.PathLike)):
        raise TypeError(f"weights must be a path or a state dict, got {type(weights).__name__}")
    if config is not None:
        raise TypeError("config is for a state dict; a weights folder brings its own config.json")
    if model_config is not None:
        raise TypeError("model_config is for a state dict; a file carries it in its metadata (vaecodec_config)")
    return Model(_vaecodec.load_path(os.fspath(weights), **options))


def _plain(value):
    """A config (diffusers' FrozenDict, tuples) as plain JSON values."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items() if not str(k).startswith("_")}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
