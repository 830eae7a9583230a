"""diffusers in one line: `vaecodec.diffusers.accelerate(pipe)` runs the pipeline's VAE on vaecodec's engine.

    handle = vaecodec.diffusers.accelerate(pipe)   # or a bare AutoencoderKLWan / AutoencoderKLQwenImage
    video = pipe(...).frames                       # the VAE's encode and decode now run on vaecodec
    handle.restore()                               # diffusers' own methods again

The VAE keeps diffusers' interface and return types: `encode(x)` gives `AutoencoderKLOutput(latent_dist=...)`,
`decode(z)` gives `DecoderOutput(sample=...)` (or tuples with `return_dict=False`), on the VAE's device and in
its dtype. Differences (docs/python.md, "diffusers"):
- the engine computes the posterior's mean only: `latent_dist` is deterministic (`sample()` and `mode()` both
  return the mean, `std` is 0);
- the engine plans its own chunks and tiles under its memory budget: diffusers' `enable_tiling()` and
  `enable_slicing()` are not consulted;
- the engine holds its own copy of the weights (taken when `accelerate` is called; call it again after
  changing them).
"""

from __future__ import annotations

from typing import Optional

import torch

from . import Model, load

__all__ = ["accelerate", "Accelerated", "SUPPORTED"]

# The diffusers classes whose encode/decode vaecodec's engine computes (Wan2.1's VAE, Wan2.2's 48-channel VAE
# through AutoencoderKLWan's is_residual config, and Qwen-Image's, a Wan2.1 VAE).
SUPPORTED = ("AutoencoderKLWan", "AutoencoderKLQwenImage")


def _find_vae(vae_or_pipe):
    if type(vae_or_pipe).__name__ in SUPPORTED:
        return vae_or_pipe
    vae = getattr(vae_or_pipe, "vae", None)
    if vae is not None and type(vae).__name__ in SUPPORTED:
        return vae
    found = type(vae).__name__ if vae is not None else type(vae_or_pipe).__name__
    raise TypeError(f"vaecodec accelerates {', '.join(SUPPORTED)} (or a pipeline holding one as .vae), "
                    f"not {found}")


class Accelerated:
    """What `accelerate` did to a VAE; `restore()` undoes it. Usable as a context manager."""

    def __init__(self, vae, model: Model):
        self.vae = vae
        self.model = model
        self._saved = {name: vae.__dict__[name] for name in ("encode", "decode") if name in vae.__dict__}
        vae.encode = self._encode
        vae.decode = self._decode

    def restore(self) -> None:
        """Puts the VAE's own encode and decode back and lets the engine's copy of the weights go."""
        if self.model is None:
            return
        for name in ("encode", "decode"):
            if name in self._saved:
                setattr(self.vae, name, self._saved[name])
            else:
                self.vae.__dict__.pop(name, None)
        self.model = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.restore()

    def _encode(self, x: torch.Tensor, return_dict: bool = True):
        from diffusers.models.autoencoders.vae import DiagonalGaussianDistribution
        from diffusers.models.modeling_outputs import AutoencoderKLOutput

        # diffusers encodes frame 0 and then whole groups of four: frames past the last group are left out.
        if torch.is_tensor(x) and x.dim() == 5 and x.size(2) > 1:
            tf = self.model.temporal_factor
            x = x[:, :, :1 + (x.size(2) - 1) // tf * tf]
        mean = self.model.encode(x, normalized=False).to(self.vae.dtype)
        # [mean, log-variance]: the engine gives the mean alone, so the distribution is deterministic.
        posterior = DiagonalGaussianDistribution(torch.cat([mean, torch.zeros_like(mean)], 1), deterministic=True)
        if not return_dict:
            return (posterior,)
        return AutoencoderKLOutput(latent_dist=posterior)

    def _decode(self, z: torch.Tensor, return_dict: bool = True):
        from diffusers.models.autoencoders.vae import DecoderOutput

        video = self.model.decode(z, normalized=False).to(self.vae.dtype)
        if not return_dict:
            return (video,)
        return DecoderOutput(sample=video)


def accelerate(vae_or_pipe, device=None, dtype=None, vram=None, preset: Optional[str] = None,
               **options) -> Accelerated:
    """Runs the encode and decode of a diffusers `AutoencoderKLWan` or `AutoencoderKLQwenImage` (or of the
    `.vae` of a pipeline) on vaecodec's engine; returns a handle whose `restore()` puts diffusers' back.

    device, dtype: default the VAE's own. vram, preset and the other options: as `vaecodec.load` takes them.
    """
    vae = _find_vae(vae_or_pipe)
    if device is None:
        device = vae.device
    if dtype is None:
        dtype = vae.dtype
    model = load(vae.state_dict(), device=device, dtype=dtype, vram=vram, preset=preset,
                 config=dict(vae.config), **options)
    return Accelerated(vae, model)
