"""SeedVR2 in one line: `vaecodec.seedvr2.accelerate(vae)` runs a loaded SeedVR2 VAE on vaecodec's engine.

    handle = vaecodec.seedvr2.accelerate(runner.vae)   # a VideoAutoencoderKLWrapper (or what holds one as .vae)
    latent = runner.vae.encode(video).latent           # encode and decode now run on vaecodec
    handle.restore()                                   # the class's own methods again

The VAE is the `VideoAutoencoderKLWrapper` of ComfyUI-SeedVR2 or of the official SeedVR code (neither is on
PyPI, so the class is recognised by name). Its interface stays: the arguments of the class's own `encode` and
`decode` (ComfyUI-SeedVR2's `tiled`, `tile_size`, `tile_overlap`; the official class has none, and a call with
them fails as it would there), `CausalEncoderOutput(latent, posterior)` and `CausalDecoderOutput(sample)` of
the class's own module, one image `[B, 3, H, W]` or a clip `[B, 3, T, H, W]`, and a time axis of one frame
squeezed away as the class squeezes it. Results are in the VAE's dtype, on the device of the engine's copy
(the VAE's when `accelerate` was called). Differences (docs/python.md, "SeedVR2 front ends"):
- the engine computes the posterior's mean only: `posterior` is deterministic, `latent` is its mean (the
  official class samples the posterior: with this one, the sample is the mean);
- the engine plans its own chunks and tiles under its budget: `tiled`, `tile_size` and `tile_overlap` are
  accepted and not consulted (the engine's plan is exact wherever the frame fits the budget);
- `decode` gives unclamped pixels, as the class does (`vaecodec.Model.decode` clamps to [-1, 1]);
- the engine holds its own copy of the weights, taken when `accelerate` is called.

What the tensors cannot tell is read off the VAE's modules: the norm groups (every GroupNorm's) and whether
its mid blocks attend and it has quant convs; the activation is its config's `act_fn`. A setting the engine
does not compute, or a dtype it does not run, is refused with one line naming it, before anything is changed.
The weights reach the engine as a state dict, with the norm groups as the engine's own config key
(`load(model_config=)`, what a file carries in its metadata: Note [Config in the weights file] in
core/models/registry.cpp).
"""

from __future__ import annotations

import inspect
import sys
from typing import Optional

import torch

from . import Model, _check_tensor, load
from .diffusers import Accelerated as _Handle

__all__ = ["accelerate", "Accelerated", "SUPPORTED"]

# The class whose encode/decode vaecodec's engine computes: ComfyUI-SeedVR2's and the official SeedVR code's
# (src/models/video_vae_v3/modules/attn_video_vae.py in both), or a subclass of it.
SUPPORTED = "VideoAutoencoderKLWrapper"

# What vaecodec's SeedVR2 model computes besides what the tensors tell (core/models/seedvr2/): the released
# VAE's settings.
_ENGINE_SETTINGS = {"act_fn": "silu", "attention": True, "use_quant_conv": False, "use_post_quant_conv": False,
                    "norm_eps": 1e-6}
_ENGINE_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _is_supported(obj) -> bool:
    return any(cls.__name__ == SUPPORTED for cls in type(obj).__mro__)


def _find_vae(vae_or_runner):
    if _is_supported(vae_or_runner):
        return vae_or_runner
    vae = getattr(vae_or_runner, "vae", None)
    if vae is not None and _is_supported(vae):
        return vae
    found = type(vae).__name__ if vae is not None else type(vae_or_runner).__name__
    raise TypeError(f"vaecodec.seedvr2 accelerates SeedVR2's {SUPPORTED} (or what holds one as .vae), not {found}")


def _output_types(cls):
    """CausalEncoderOutput and CausalDecoderOutput as the class's own module has them."""
    for klass in cls.__mro__:
        module = sys.modules.get(klass.__module__)
        found = (getattr(module, "CausalEncoderOutput", None), getattr(module, "CausalDecoderOutput", None))
        if all(found):
            return found
    raise TypeError(f"{cls.__name__}: no CausalEncoderOutput and CausalDecoderOutput in its module to return")


def _has_attention(vae) -> bool:
    # The class drops attention by making each mid block's attentions [None].
    for part in ("encoder", "decoder"):
        attentions = getattr(getattr(getattr(vae, part, None), "mid_block", None), "attentions", None)
        if not attentions or attentions[0] is None:
            return False
    return True


def _settings(vae) -> dict:
    """What the VAE computes beyond its tensors, under the names of its constructor's arguments."""
    norms = [m for m in vae.modules() if isinstance(m, torch.nn.GroupNorm)]
    if not norms:
        raise ValueError(f"{type(vae).__name__} has no GroupNorm: not SeedVR2's VAE")
    groups = sorted({m.num_groups for m in norms})
    if len(groups) > 1:
        raise ValueError(f"the VAE's norms have {' and '.join(map(str, groups))} groups: vaecodec's SeedVR2 VAE "
                         "has one norm_num_groups")
    eps = sorted({m.eps for m in norms})
    config = getattr(vae, "config", None) or {}
    return {"act_fn": config.get("act_fn"), "attention": _has_attention(vae),
            "use_quant_conv": getattr(vae, "quant_conv", None) is not None,
            "use_post_quant_conv": getattr(vae, "post_quant_conv", None) is not None,
            "norm_eps": eps[0] if len(eps) == 1 else eps, "norm_num_groups": groups[0]}


def _check(vae, dtype) -> int:
    """Refuses a VAE the engine would not compute as it does (one line naming what differs); returns its norm
    groups."""
    parameters = list(vae.parameters())
    if not parameters:
        raise ValueError(f"{type(vae).__name__} has no parameters")
    if any(p.is_meta for p in parameters):
        raise ValueError("the VAE's weights are not loaded (they are on the meta device): accelerate it once they are")
    dtypes = sorted({str(p.dtype) for p in parameters})
    if len(dtypes) > 1:
        raise TypeError(f"the VAE's parameters are in {' and '.join(dtypes)}: vaecodec runs a VAE in one dtype "
                        "(convert it with vae.to(dtype))")
    if dtype is None and parameters[0].dtype not in _ENGINE_DTYPES:
        raise TypeError(f"the VAE is in {parameters[0].dtype}: vaecodec runs torch.float32, torch.bfloat16 or "
                        "torch.float16 (pass dtype= to run it in one of them)")
    settings = _settings(vae)
    for key, computed in _ENGINE_SETTINGS.items():
        if settings[key] != computed:
            raise ValueError(f"the VAE's {key} is {settings[key]!r}: vaecodec computes SeedVR2's VAE with "
                             f"{key} {computed!r}")
    return settings["norm_num_groups"]


def _load_engine(vae, groups: int, **load_args) -> Model:
    tensors = {name: t.detach() for name, t in vae.state_dict().items()}
    # The group count is what SeedVR2's tensors cannot tell: given as the engine's own config key.
    model = load(tensors, model_config={"norm_num_groups": groups}, **load_args)
    if model.family != "seedvr2-vae":
        raise TypeError(f"the VAE's weights are a {model.family}'s, not SeedVR2's")
    return model


class Accelerated(_Handle):
    """What `accelerate` did to a VAE; `restore()` undoes it. Usable as a context manager."""

    def __init__(self, vae, model: Model):
        cls = type(vae)
        # The class's own methods (not a previous accelerate's), for their arguments and defaults.
        self._signatures = {name: inspect.signature(getattr(cls, name).__get__(vae, cls))
                            for name in ("encode", "decode")}
        self._encoder_output, self._decoder_output = _output_types(cls)
        super().__init__(vae, model)

    def _first_argument(self, name: str, args, kwargs):
        """The tensor a call passes, after binding the call to the class's signature: an argument the class
        does not take fails here as it would there. The others (return_dict, the tiling) are not consulted."""
        bound = self._signatures[name].bind(*args, **kwargs)
        value = next(iter(bound.arguments.values()))
        _check_tensor(value, name, "frames" if name == "encode" else "latents")
        return value

    def _result_dtype(self) -> torch.dtype:
        return next(self.vae.parameters()).dtype

    def _encode(self, *args, **kwargs):
        from diffusers.models.autoencoders.vae import DiagonalGaussianDistribution

        x = self._first_argument("encode", args, kwargs)
        if x.dim() == 4:  # one image
            x = x.unsqueeze(2)
        mean = self.model.encode(x, normalized=False).to(self._result_dtype())
        # [mean, log-variance]: the engine gives the mean alone, so the distribution is deterministic.
        posterior = DiagonalGaussianDistribution(torch.cat([mean, torch.zeros_like(mean)], 1), deterministic=True)
        return self._encoder_output(posterior.mode().squeeze(2), posterior)

    def _decode(self, *args, **kwargs):
        z = self._first_argument("decode", args, kwargs)
        if z.dim() == 4:  # one latent frame
            z = z.unsqueeze(2)
        video = self.model.decode(z, clamp=False)  # SeedVR2's decode returns unclamped pixels
        return self._decoder_output(video.to(self._result_dtype()).squeeze(2))


def accelerate(vae_or_runner, device=None, dtype=None, vram=None, preset: Optional[str] = None,
               **options) -> Accelerated:
    """Runs the encode and decode of SeedVR2's `VideoAutoencoderKLWrapper` (ComfyUI-SeedVR2's or the official
    SeedVR code's, or the `.vae` of what holds one) on vaecodec's engine; returns a handle whose `restore()`
    puts the class's own methods back.

    device, dtype: default the VAE's own (the engine runs torch.float32, torch.bfloat16 and torch.float16).
    vram: the budget runs are planned for ("8G" or bytes); None: the preset's, else the memory free on the
        device at each call. preset and the other options: as `vaecodec.load` takes them.
    A VAE of a setting the engine does not compute, or in another dtype, raises one line naming it.
    """
    vae = _find_vae(vae_or_runner)
    groups = _check(vae, dtype)
    first = next(vae.parameters())
    model = _load_engine(vae, groups, device=first.device if device is None else device,
                         dtype=first.dtype if dtype is None else dtype, vram=vram, preset=preset, **options)
    return Accelerated(vae, model)
