"""A stand-in for SeedVR's `VideoAutoencoderKLWrapper`, the VAE class of ComfyUI-SeedVR2 and of the official
SeedVR code, which are not on PyPI: the class's name, constructor arguments and attributes, `encode`/`decode`
arguments and return types (`CausalEncoderOutput`, `CausalDecoderOutput`, diffusers' posterior), computing
SeedVR2's VAE in plain PyTorch with scripts/tiny_vaes.py's modules (the golden cases check them).

`VideoAutoencoderKLWrapper` is ComfyUI-SeedVR2's (tiling arguments, the latent is the posterior's mode);
`OfficialVideoAutoencoderKLWrapper` is the official code's (no tiling arguments, the latent is a sample).
Constructor defaults are the released config's (s8_c16_t4_inflation_sd3.yaml). It computes whole frames of
that structure only: tiles, another activation, quant convs or no attention raise.
"""

import contextlib
import pathlib
import sys
from typing import NamedTuple, Optional, Tuple

import torch
import torch.nn as nn
from diffusers.models.autoencoders.vae import DecoderOutput, DiagonalGaussianDistribution
from diffusers.models.modeling_outputs import AutoencoderKLOutput

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts"))
from tiny_vaes import SeedDecoder, SeedEncoder  # noqa: E402


class CausalAutoencoderOutput(NamedTuple):
    sample: torch.Tensor
    latent: torch.Tensor
    posterior: Optional[DiagonalGaussianDistribution]


class CausalEncoderOutput(NamedTuple):
    latent: torch.Tensor
    posterior: Optional[DiagonalGaussianDistribution]


class CausalDecoderOutput(NamedTuple):
    sample: torch.Tensor


class VideoAutoencoderKL(nn.Module):
    def __init__(self, in_channels: int = 3, out_channels: int = 3,
                 down_block_types: Tuple[str, ...] = ("DownEncoderBlock3D",) * 4,
                 up_block_types: Tuple[str, ...] = ("UpDecoderBlock3D",) * 4,
                 block_out_channels: Tuple[int, ...] = (128, 256, 512, 512), layers_per_block: int = 2,
                 act_fn: str = "silu", latent_channels: int = 16, norm_num_groups: int = 32, sample_size: int = 32,
                 scaling_factor: float = 0.18215, force_upcast: bool = True, attention: bool = True,
                 temporal_scale_num: int = 2, slicing_up_num: int = 0, gradient_checkpoint: bool = False,
                 inflation_mode: str = "pad", time_receptive_field: str = "full", slicing_sample_min_size: int = 4,
                 use_quant_conv: bool = False, use_post_quant_conv: bool = False):
        super().__init__()
        computed = {"in_channels": 3, "out_channels": 3, "act_fn": "silu", "attention": True,
                    "time_receptive_field": "full", "use_quant_conv": False, "use_post_quant_conv": False}
        given = {"in_channels": in_channels, "out_channels": out_channels, "act_fn": act_fn, "attention": attention,
                 "time_receptive_field": time_receptive_field, "use_quant_conv": use_quant_conv,
                 "use_post_quant_conv": use_post_quant_conv}
        other = {key: value for key, value in given.items() if value != computed[key]}
        if other:
            raise ValueError(f"the stand-in computes SeedVR2's released structure, not {other}")
        # What diffusers' ConfigMixin records of the real class (its AutoencoderKL arguments).
        self.config = {"in_channels": in_channels, "out_channels": out_channels,
                       "block_out_channels": tuple(block_out_channels), "layers_per_block": layers_per_block,
                       "act_fn": act_fn, "latent_channels": latent_channels, "norm_num_groups": norm_num_groups,
                       "sample_size": sample_size, "scaling_factor": scaling_factor, "force_upcast": force_upcast}
        self.slicing_sample_min_size = slicing_sample_min_size
        args = (list(block_out_channels), layers_per_block, norm_num_groups, latent_channels, temporal_scale_num)
        self.encoder = SeedEncoder(*args)
        self.decoder = SeedDecoder(*args)
        self.quant_conv = None
        self.post_quant_conv = None

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.parameters()).dtype

    def encode(self, x: torch.Tensor, return_dict: bool = True, tiled: bool = False,
               tile_size: Tuple[int, int] = (512, 512), tile_overlap: Tuple[int, int] = (64, 64)):
        if tiled:
            raise NotImplementedError("the stand-in computes whole frames only")
        posterior = DiagonalGaussianDistribution(self.encoder(x.to(self.device, self.dtype)))
        return AutoencoderKLOutput(latent_dist=posterior) if return_dict else (posterior,)

    def decode(self, z: torch.Tensor, return_dict: bool = True, tiled: bool = False,
               tile_size: Tuple[int, int] = (512, 512), tile_overlap: Tuple[int, int] = (64, 64)):
        if tiled:
            raise NotImplementedError("the stand-in computes whole frames only")
        decoded = self.decoder(z.to(self.device, self.dtype))
        return DecoderOutput(sample=decoded) if return_dict else (decoded,)


class VideoAutoencoderKLWrapper(VideoAutoencoderKL):
    def __init__(self, *args, spatial_downsample_factor: int, temporal_downsample_factor: int,
                 freeze_encoder: bool, **kwargs):
        self.spatial_downsample_factor = spatial_downsample_factor
        self.temporal_downsample_factor = temporal_downsample_factor
        self.freeze_encoder = freeze_encoder
        super().__init__(*args, **kwargs)

    def forward(self, x: torch.Tensor) -> CausalAutoencoderOutput:
        with torch.no_grad() if self.freeze_encoder else contextlib.nullcontext():
            z, p = self.encode(x)
        return CausalAutoencoderOutput(self.decode(z).sample, z, p)

    def encode(self, x: torch.Tensor, return_dict: bool = True, tiled: bool = False,
               tile_size: Tuple[int, int] = (512, 512),
               tile_overlap: Tuple[int, int] = (64, 64)) -> CausalEncoderOutput:
        if x.ndim == 4:
            x = x.unsqueeze(2)
        posterior = super().encode(x, return_dict, tiled, tile_size, tile_overlap).latent_dist
        return CausalEncoderOutput(posterior.mode().squeeze(2), posterior)

    def decode(self, z: torch.Tensor, return_dict: bool = True, tiled: bool = False,
               tile_size: Tuple[int, int] = (512, 512),
               tile_overlap: Tuple[int, int] = (64, 64)) -> CausalDecoderOutput:
        if z.ndim == 4:
            z = z.unsqueeze(2)
        return CausalDecoderOutput(super().decode(z, return_dict, tiled, tile_size, tile_overlap).sample.squeeze(2))


class OfficialVideoAutoencoderKLWrapper(VideoAutoencoderKLWrapper):
    """The official SeedVR code's methods: no tiling or return_dict arguments; the latent samples the posterior."""

    def encode(self, x: torch.Tensor) -> CausalEncoderOutput:
        if x.ndim == 4:
            x = x.unsqueeze(2)
        posterior = VideoAutoencoderKL.encode(self, x).latent_dist
        return CausalEncoderOutput(posterior.sample().squeeze(2), posterior)

    def decode(self, z: torch.Tensor) -> CausalDecoderOutput:
        if z.ndim == 4:
            z = z.unsqueeze(2)
        return CausalDecoderOutput(VideoAutoencoderKL.decode(self, z).sample.squeeze(2))


def build(config: dict, official: bool = False) -> VideoAutoencoderKLWrapper:
    """A wrapper of a tiny config (tests/data/seedvr2-tiny/meta.json's keys), as the real class is built."""
    cls = OfficialVideoAutoencoderKLWrapper if official else VideoAutoencoderKLWrapper
    blocks = len(config["block_out_channels"])
    return cls(block_out_channels=tuple(config["block_out_channels"]), layers_per_block=config["layers_per_block"],
               latent_channels=config["latent_channels"], norm_num_groups=config["norm_num_groups"],
               temporal_scale_num=config["temporal_scale_num"], down_block_types=("DownEncoderBlock3D",) * blocks,
               up_block_types=("UpDecoderBlock3D",) * blocks, spatial_downsample_factor=2 ** (blocks - 1),
               temporal_downsample_factor=2 ** config["temporal_scale_num"], freeze_encoder=False)
