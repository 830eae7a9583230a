#!/usr/bin/env python3
"""Makes a golden data set for a Wan VAE family from diffusers' AutoencoderKLWan (PyPI: diffusers).

A folder in the format of tests/data/*-tiny, which tests/test_golden.cpp reads (VAECODEC_GOLDEN_DIR=DIR):
  weights.safetensors  seeded random weights of a small config, float32, under diffusers' key names
  weights.pth          the same state dict written by torch.save
  cases.safetensors    float32 tensors [1, C, T, H, W]: video -> video_mu, latent -> latent_decoded,
                       video_roundtrip, image (the first frame) -> image_mu, image_roundtrip
  meta.json            model, config (vaecodec's names), seed, latent statistics, shapes, how each case was made

Families: wan2.1-vae and wan2.2-vae (diffusers' is_residual variant with patch size 2). seedvr2-vae has no
implementation on PyPI (its VAE lives in the ByteDance-Seed/SeedVR repository), so its set is not made here.
See Note [Golden data from diffusers] below for what is computed and how.
"""

import argparse
import json
import os
import sys

# Note [Golden data from diffusers]
# - Weights: every tensor of the diffusers model is drawn in float32 from one generator seeded with --seed, in
#   sorted key order: convolution weights and biases uniform with unit gain (bound sqrt(3 / fan_in), so no
#   path is negligible), RMS-norm gains 1 + 0.1 N(0, 1) (perturbed, so a dropped gain shows). diffusers' own
#   initialisation is not used; the attention's output projection is random like every other convolution.
#   The float32 values are what is written and, widened to float64, what the reference computes with.
# - Latent statistics: seeded too, multiples of 1/256 (exact in float32, so meta.json's config compares equal
#   to the one vaecodec reads back), in the config as latents_mean / latents_std - vaecodec takes them from
#   there (Note [Latent statistics in the config] in core/vae_model.h), whatever z_dim is.
# - Cases: the model in float64 on the CPU, diffusers' whole-clip path (no tiling, no slicing): encode runs the
#   first frame, then four at a time, through its causal cache; decode one latent frame at a time. video_mu is
#   (latent_dist.mean - latents_mean) / latents_std, the normalised latent vaecodec's encode returns; a decode
#   takes a normalised latent and first undoes that (z * latents_std + latents_mean), as diffusers' pipelines do
#   before AutoencoderKLWan.decode. vaecodec's decode does not clamp, diffusers' ends with clamp(-1, 1): the
#   decodes here run diffusers' _decode loop without that last step; latent_decoded's is checked to equal
#   AutoencoderKLWan.decode exactly once clamped (the others would cost another decode each).

FAMILIES = {
    # name: (diffusers' is_residual, patch size, default z_dim)
    "wan2.1-vae": (False, 1, 16),
    "wan2.2-vae": (True, 2, 48),
}
NO_PYPI = {
    "seedvr2-vae": "seedvr2-vae has no implementation on PyPI (its VAE is in the ByteDance-Seed/SeedVR "
    "repository); its golden set tests/data/seedvr2-tiny was made from that code",
}


def fail(why):
    print(f"make_golden.py: {why}", file=sys.stderr)
    sys.exit(1)


def int_list(text):
    try:
        return [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers")


def bool_list(text):
    values = {"1": True, "true": True, "0": False, "false": False}
    try:
        return [values[v.strip().lower()] for v in text.split(",")]
    except KeyError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of true/false")


def parse_args():
    p = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="seedvr2-vae: " + NO_PYPI["seedvr2-vae"] + ". " + "Example: scripts/make_golden.py --family "
        "wan2.2-vae --out tests/data/wan22-dim12 --dim 12",
    )
    p.add_argument("--family", required=True, choices=sorted(FAMILIES) + sorted(NO_PYPI))
    p.add_argument("--out", required=True, help="folder to write (made if missing; existing set files are refused "
                   "unless --force)")
    p.add_argument("--force", action="store_true", help="overwrite the set's files in --out")
    p.add_argument("--seed", type=int, default=0, help="seed of the weights, statistics and inputs (default 0)")
    p.add_argument("--dim", type=int, default=8, help="encoder base width (default 8; released: 96 / 160)")
    p.add_argument("--dec-dim", type=int, help="decoder base width, wan2.2-vae only (default --dim; released 256)")
    p.add_argument("--z-dim", type=int, help="latent channels (default: the family's, 16 / 48)")
    p.add_argument("--dim-mult", type=int_list, default=[1, 2, 4, 4], help="width multipliers (default 1,2,4,4)")
    p.add_argument("--num-res-blocks", type=int, default=2, help="residual blocks per stage (default 2)")
    p.add_argument("--temperal-downsample", type=bool_list, default=[False, True, True],
                   help="per down stage, whether it halves time (default false,true,true)")
    p.add_argument("--frames", type=int, default=17, help="video frames, 1 + 4k (default 17)")
    p.add_argument("--height", type=int, default=64, help="video height (default 64)")
    p.add_argument("--width", type=int, help="video width (default 48 for wan2.1-vae, 64 for wan2.2-vae)")
    return p.parse_args()


def check_args(a):
    if a.family in NO_PYPI:
        fail(NO_PYPI[a.family])
    residual, patch, z_default = FAMILIES[a.family]
    if a.dec_dim is not None and not residual:
        fail("--dec-dim is a wan2.2-vae setting: the wan2.1-vae decoder has the encoder's width")
    a.z_dim = z_default if a.z_dim is None else a.z_dim
    a.dec_dim = a.dim if a.dec_dim is None else a.dec_dim
    a.width = (64 if residual else 48) if a.width is None else a.width
    for name in ("dim", "dec_dim", "z_dim", "num_res_blocks", "frames", "height", "width"):
        if getattr(a, name) < 1:
            fail(f"--{name.replace('_', '-')} must be at least 1")
    if any(m < 1 for m in a.dim_mult):
        fail("--dim-mult values must be at least 1")
    if len(a.dim_mult) != len(a.temperal_downsample) + 1:
        fail(f"--dim-mult has {len(a.dim_mult)} values and --temperal-downsample {len(a.temperal_downsample)}: "
             "the first needs one more (one per stage, one per down step)")
    # diffusers encodes the first frame, then 4 frames at a time; other lengths are not a whole-clip encode.
    if a.frames % 4 != 1:
        fail(f"--frames {a.frames} is not 1 + 4k (diffusers encodes frame 0, then 4 at a time)")
    factor = patch * 2 ** (len(a.dim_mult) - 1)
    if a.height % factor or a.width % factor:
        fail(f"--height {a.height} and --width {a.width} must be multiples of {factor} (the spatial factor)")
    return residual, patch


def diffusers_config(a, residual, patch, mean, std):
    io_channels = 3 * patch * patch
    return {
        "base_dim": a.dim,
        "decoder_base_dim": a.dec_dim,
        "z_dim": a.z_dim,
        "dim_mult": a.dim_mult,
        "num_res_blocks": a.num_res_blocks,
        # Attention at other scales is not offered: diffusers' Wan decoder leaves out the up blocks' attention
        # that the reference (and vaecodec) would build for a non-empty attn_scales.
        "attn_scales": [],
        "temperal_downsample": a.temperal_downsample,
        "latents_mean": mean,
        "latents_std": std,
        "is_residual": residual,
        "in_channels": io_channels,
        "out_channels": io_channels,
        "patch_size": patch if patch > 1 else None,
        "scale_factor_temporal": 2 ** sum(a.temperal_downsample),
        "scale_factor_spatial": patch * 2 ** (len(a.dim_mult) - 1),
    }


def vaecodec_config(a, residual, patch, mean, std):
    """The config in the reference's (and vaecodec's) names, as the family's Config::from_json reads it."""
    c = {"dim": a.dim}
    if residual:
        c["dec_dim"] = a.dec_dim
    c.update({"z_dim": a.z_dim, "dim_mult": a.dim_mult, "num_res_blocks": a.num_res_blocks, "attn_scales": [],
              "temperal_downsample": a.temperal_downsample})
    if residual:
        c["patch_size"] = patch
    c.update({"latents_mean": mean, "latents_std": std})
    return c


def seeded_weights(model, gen):
    """Draws every tensor of the model (Note [Golden data from diffusers]); returns the float32 state dict."""
    import torch

    state = model.state_dict()
    out = {}
    for name in sorted(state):
        shape = state[name].shape
        if name.endswith("gamma"):
            value = 1 + 0.1 * torch.randn(shape, generator=gen, dtype=torch.float32)
        else:
            owner = name.rsplit(".", 1)[0]
            weight = state.get(owner + ".weight")
            if weight is None or weight.dim() < 2:
                fail(f"diffusers' model has a tensor this script does not know how to draw: {name} {list(shape)}")
            fan_in = weight[0].numel()
            bound = (3.0 / fan_in) ** 0.5
            value = (torch.rand(shape, generator=gen, dtype=torch.float32) * 2 - 1) * bound
        out[name] = value.contiguous()
    model.load_state_dict(out, strict=True)
    return out


def seeded_statistics(z_dim, gen):
    import torch

    mean = torch.randint(-256, 257, (z_dim,), generator=gen) / 256.0  # [-1, 1]
    std = torch.randint(128, 641, (z_dim,), generator=gen) / 256.0  # [0.5, 2.5]
    return [float(v) for v in mean], [float(v) for v in std]


def decode_unclamped(vae, z, check):
    """diffusers' AutoencoderKLWan._decode (whole clip, one latent frame at a time) without the final clamp;
    with check, also that clamped it is AutoencoderKLWan.decode bit for bit (so the loop is diffusers')."""
    import torch
    from diffusers.models.autoencoders.autoencoder_kl_wan import unpatchify

    vae.clear_cache()
    x = vae.post_quant_conv(z)
    frames = []
    for i in range(z.shape[2]):
        vae._conv_idx = [0]
        frames.append(vae.decoder(x[:, :, i:i + 1], feat_cache=vae._feat_map, feat_idx=vae._conv_idx,
                                  first_chunk=i == 0))
    vae.clear_cache()
    out = torch.cat(frames, dim=2)
    if vae.config.patch_size is not None:
        out = unpatchify(out, patch_size=vae.config.patch_size)
    if check and not torch.equal(out.clamp(-1.0, 1.0), vae.decode(z).sample):
        fail("the unclamped decode differs from AutoencoderKLWan.decode after clamping: diffusers' _decode "
             "changed; update decode_unclamped")
    return out


def main():
    a = parse_args()
    residual, patch = check_args(a)
    try:
        import diffusers
        import torch
        from diffusers import AutoencoderKLWan
        from safetensors.torch import save_file
    except ImportError as e:
        fail(f"{e.name or e} is not installed (scripts/setup.sh installs diffusers and safetensors into .venv)")

    names = ("weights.safetensors", "weights.pth", "cases.safetensors", "meta.json")
    if not a.force and any(os.path.exists(os.path.join(a.out, n)) for n in names):
        fail(f"{a.out} already holds a golden set (--force overwrites it)")
    os.makedirs(a.out, exist_ok=True)

    # One thread: the tiny model's layers are too small to share, and busy cores make waiting threads spin
    # (three times slower on a loaded two-core machine).
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(a.seed)
    mean, std = seeded_statistics(a.z_dim, gen)
    dconfig = diffusers_config(a, residual, patch, mean, std)
    try:
        vae = AutoencoderKLWan(**dconfig)
    except Exception as e:  # diffusers refuses some configs (AvgDown3D's channel grouping)
        fail(f"diffusers cannot build this config: {e}")
    weights = seeded_weights(vae, gen)
    vae = vae.double().eval()

    # Inputs in float32 (what is stored), computed with in float64.
    video = torch.rand((1, 3, a.frames, a.height, a.width), generator=gen, dtype=torch.float32) * 2 - 1
    factor_s = patch * 2 ** (len(a.dim_mult) - 1)
    latent_frames = 1 + (a.frames - 1) // dconfig["scale_factor_temporal"]
    latent = torch.randn((1, a.z_dim, latent_frames, a.height // factor_s, a.width // factor_s), generator=gen,
                         dtype=torch.float32)
    image = video[:, :, :1].clone()
    m = torch.tensor(mean, dtype=torch.float64).view(1, -1, 1, 1, 1)
    s = torch.tensor(std, dtype=torch.float64).view(1, -1, 1, 1, 1)

    def encode(x):
        return (vae.encode(x.double()).latent_dist.mean - m) / s

    def decode(z, check=False):
        return decode_unclamped(vae, z.double() * s + m, check)

    with torch.no_grad():
        cases = {"video": video, "latent": latent, "image": image}
        cases["video_mu"] = encode(video)
        cases["latent_decoded"] = decode(latent, check=True)
        cases["video_roundtrip"] = decode(cases["video_mu"])
        cases["image_mu"] = encode(image)
        cases["image_roundtrip"] = decode(cases["image_mu"])
    cases = {k: v.float().contiguous() for k, v in cases.items()}

    computed = (f"diffusers {diffusers.__version__} AutoencoderKLWan, float64 on CPU, torch {torch.__version__}, "
                "scripts/make_golden.py")
    meta = {
        "model": a.family,
        "config": vaecodec_config(a, residual, patch, mean, std),
        "seed": a.seed,
        "latent_mean": mean,
        "latent_std": std,
        "shapes": {k: list(v.shape) for k, v in cases.items()},
        "computed": computed,
        "weights_layout": "diffusers AutoencoderKLWan key names (vaecodec renames them to the reference's)",
        "diffusers_config": dconfig,
        "tensors_layout": "[batch, channels, frames, height, width]; video values in [-1, 1]",
        "cases": {
            "video_mu": "(encode(video).latent_dist.mean - latents_mean) / latents_std: normalized mean latent; "
                        "diffusers' whole-clip encode (frame 0, then 4 at a time)",
            "latent_decoded": "decode(latent * latents_std + latents_mean), unclamped: diffusers' whole-clip decode "
                              "(one latent frame at a time) without its final clamp",
            "video_roundtrip": "decode(encode(video)), unclamped",
            "image_mu": "encode of a single frame (T=1)",
            "image_roundtrip": "decode(encode(image)), unclamped",
        },
    }
    save_file(weights, os.path.join(a.out, "weights.safetensors"), metadata={"format": "pt"})
    torch.save(weights, os.path.join(a.out, "weights.pth"))
    save_file(cases, os.path.join(a.out, "cases.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(a.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(f"{a.out}: {a.family} golden set, {len(weights)} tensors, cases "
          + ", ".join(f"{k} {list(v.shape)}" for k, v in cases.items() if k not in ("video", "latent", "image")))


if __name__ == "__main__":
    main()
