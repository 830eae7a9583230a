#!/usr/bin/env python3
"""Makes the LTX-2 video VAE's golden data (tests/data/ltx2-tiny) and its released-key manifests from diffusers'
AutoencoderKLLTX2Video (PyPI: diffusers >= 0.42).

  weights-20.safetensors  a tiny VAE shaped like the released LTX-2 (2.0): reflect-padded decoder with residual
                          depth-to-space upsamplers; bfloat16, the original single-file key names of a VAE-only
                          file (encoder.*, decoder.*, per_channel_statistics.*), its config in the metadata
                          ("config" -> {"vae": {...}}) as the released files carry it
  weights-23.safetensors  the same for LTX-2.3 / 2.5: zero-padded decoder, four plain upsamplers
  cases.safetensors       float64 cases (the input video in float32, exact), keys "<config>.<case>"
  meta.json               both configs (original and diffusers terms), the key rule, shapes, how each case was made

With --keys, also writes tests/data/ltx2-released-keys.json (2.0) and tests/data/ltx23-released-keys.json
(2.3 / 2.5): name -> shape of the released VAE-only files, from the released configs on the meta device.
See docs/ltx2-vae.md for the architecture and Note [LTX-2 golden data] below for what is computed.
"""

import argparse
import json
import pathlib
import re
import sys

# Note [LTX-2 golden data]
# - Weights: drawn in float64 from one generator seeded with --seed, in sorted diffusers key order, then rounded
#   to bfloat16 (the released checkpoints' type); the cases are computed from exactly those values widened to
#   float64. Convolutions: N(0, 1 / fan_in) weights, N(0, 0.1^2) biases, so every pixel norm feeds an O(1)
#   signal and no path is negligible. The latent statistics are multiples of 1/64 (exact in bfloat16).
# - The model runs in float64 on the CPU in eval mode, diffusers' whole-clip path (no tiling, no framewise
#   decoding), encoder causal and decoder non-causal as in the released configs, no timestep conditioning and
#   no noise injection (both off in the released 2.0 and 2.3 configs).
# - Latent normalisation happens outside AutoencoderKLLTX2Video (diffusers' pipelines) and inside the original
#   encoder/decoder: mu = (mean - latents_mean) / latents_std after the encoder, z * latents_std + latents_mean
#   before the decoder. *_mu_raw is the posterior mean as the class returns it, *_mu the normalised one;
#   *_decoded is AutoencoderKLLTX2Video.decode(latent * std + mean) of a normalised latent (unclamped).

# The released configs, in the original checkpoints' terms (metadata "config" -> "vae"). 2.0's metadata has no
# "spatial_padding_mode": the original decoder then pads by reflection, its encoder by zeros.
RELEASED = {
    "20": {
        "_class_name": "CausalVideoAutoencoder", "dims": 3, "in_channels": 3, "out_channels": 3,
        "latent_channels": 128, "patch_size": 4, "norm_layer": "pixel_norm", "latent_log_var": "uniform",
        "causal_decoder": False, "timestep_conditioning": False, "decoder_base_channels": 128,
        "encoder_blocks": [["res_x", {"num_layers": 4}], ["compress_space_res", {"multiplier": 2}],
                           ["res_x", {"num_layers": 6}], ["compress_time_res", {"multiplier": 2}],
                           ["res_x", {"num_layers": 6}], ["compress_all_res", {"multiplier": 2}],
                           ["res_x", {"num_layers": 2}], ["compress_all_res", {"multiplier": 2}],
                           ["res_x", {"num_layers": 2}]],
        "decoder_blocks": [["res_x", {"num_layers": 5, "inject_noise": False}],
                           ["compress_all", {"residual": True, "multiplier": 2}],
                           ["res_x", {"num_layers": 5, "inject_noise": False}],
                           ["compress_all", {"residual": True, "multiplier": 2}],
                           ["res_x", {"num_layers": 5, "inject_noise": False}],
                           ["compress_all", {"residual": True, "multiplier": 2}],
                           ["res_x", {"num_layers": 5, "inject_noise": False}]],
    },
    "23": {
        "_class_name": "CausalVideoAutoencoder", "dims": 3, "in_channels": 3, "out_channels": 3,
        "latent_channels": 128, "patch_size": 4, "norm_layer": "pixel_norm", "latent_log_var": "uniform",
        "causal_decoder": False, "timestep_conditioning": False, "decoder_base_channels": 128,
        "spatial_padding_mode": "zeros",
        "encoder_blocks": [["res_x", {"num_layers": 4}], ["compress_space_res", {"multiplier": 2}],
                           ["res_x", {"num_layers": 6}], ["compress_time_res", {"multiplier": 2}],
                           ["res_x", {"num_layers": 4}], ["compress_all_res", {"multiplier": 2}],
                           ["res_x", {"num_layers": 2}], ["compress_all_res", {"multiplier": 1}],
                           ["res_x", {"num_layers": 2}]],
        "decoder_blocks": [["res_x", {"num_layers": 4}], ["compress_space", {"multiplier": 2}],
                           ["res_x", {"num_layers": 6}], ["compress_time", {"multiplier": 2}],
                           ["res_x", {"num_layers": 4}], ["compress_all", {"multiplier": 1}],
                           ["res_x", {"num_layers": 2}], ["compress_all", {"multiplier": 2}],
                           ["res_x", {"num_layers": 2}]],
    },
}


def tiny(released, latent, base, enc_layers, dec_layers):
    """The released block lists with fewer layers and narrower channels; every block kind, stride, multiplier,
    residual flag and padding mode kept."""
    cfg = json.loads(json.dumps(released))
    cfg["latent_channels"], cfg["decoder_base_channels"] = latent, base
    for blocks, layers in ((cfg["encoder_blocks"], enc_layers), (cfg["decoder_blocks"], dec_layers)):
        res = [b for b in blocks if b[0] == "res_x"]
        assert len(res) == len(layers)
        for block, n in zip(res, layers):
            block[1]["num_layers"] = n
    return cfg


TINY = {
    "20": tiny(RELEASED["20"], latent=4, base=4, enc_layers=[1, 1, 1, 1, 1], dec_layers=[1, 1, 1, 1]),
    "23": tiny(RELEASED["23"], latent=4, base=2, enc_layers=[1, 1, 1, 1, 1], dec_layers=[1, 1, 1, 1, 2]),
}

DOWN = {"compress_space_res": "spatial", "compress_time_res": "temporal", "compress_all_res": "spatiotemporal"}
UP = {"compress_space": "spatial", "compress_time": "temporal", "compress_all": "spatiotemporal"}


def split_blocks(blocks, kinds):
    """[res_x, compress, res_x, ..., res_x] -> (res_x params list, compress (name, params) list)."""
    res, comp = [], []
    for i, (name, params) in enumerate(blocks):
        params = {"num_layers": params} if isinstance(params, int) else params
        want_res = i % 2 == 0
        if want_res != (name == "res_x") or (not want_res and name not in kinds):
            raise ValueError(f"block {i} ({name}) breaks the res_x / compress alternation diffusers can express")
        (res if want_res else comp).append((name, params))
    if len(res) != len(comp) + 1:
        raise ValueError("the block list must start and end with res_x")
    return res, comp


def diffusers_config(vae):
    """An original 'vae' config -> AutoencoderKLLTX2Video kwargs (see docs/ltx2-vae.md, 'Configs')."""
    if vae.get("timestep_conditioning", True) is not False or vae.get("norm_layer") != "pixel_norm":
        raise ValueError("only pixel_norm VAEs without timestep conditioning are covered")
    latent = vae["latent_channels"]
    e_res, e_comp = split_blocks(vae["encoder_blocks"], DOWN)
    width, enc_out = latent, []
    for _, p in e_comp:
        width *= p.get("multiplier", 2)
        enc_out.append(width)
    d_res, d_comp = split_blocks(vae["decoder_blocks"], UP)
    width, dec_out = vae.get("decoder_base_channels", 128), []
    for _, p in d_comp:  # listed pixel side first; a block's entry is the width entering its upsampler
        width *= p.get("multiplier", 1)
        dec_out.append(width)
    padding = vae.get("spatial_padding_mode")
    return dict(
        in_channels=vae["in_channels"], out_channels=vae["out_channels"], latent_channels=latent,
        block_out_channels=tuple(enc_out), down_block_types=("LTX2VideoDownBlock3D",) * len(e_comp),
        layers_per_block=tuple(p["num_layers"] for _, p in e_res),
        spatio_temporal_scaling=(True,) * len(e_comp), downsample_type=tuple(DOWN[n] for n, _ in e_comp),
        decoder_block_out_channels=tuple(dec_out),
        decoder_layers_per_block=tuple(p["num_layers"] for _, p in d_res),
        decoder_spatio_temporal_scaling=(True,) * len(d_comp),
        decoder_inject_noise=tuple(bool(p.get("inject_noise", False)) for _, p in d_res),
        # diffusers reverses every per-block decoder list but this one, which it reads latent side first
        upsample_type=tuple(UP[n] for n, _ in reversed(d_comp)),
        upsample_residual=tuple(bool(p.get("residual", False)) for _, p in d_comp),
        upsample_factor=tuple(p.get("multiplier", 1) for _, p in d_comp),
        timestep_conditioning=False, patch_size=vae["patch_size"], patch_size_t=1, resnet_norm_eps=1e-6,
        scaling_factor=1.0, encoder_causal=True, decoder_causal=bool(vae.get("causal_decoder", False)),
        encoder_spatial_padding_mode=padding or "zeros", decoder_spatial_padding_mode=padding or "reflect",
        # diffusers' own default counts 2 per down block in both axes (64 / 16): the released configs set these
        spatial_compression_ratio=vae["patch_size"] * 2 ** sum(n != "compress_time_res" for n, _ in e_comp),
        temporal_compression_ratio=2 ** sum(n != "compress_space_res" for n, _ in e_comp),
    )


# diffusers' key patterns -> the original VAE-only file's keys (the inverse of diffusers' conversion renames);
# `e` is the encoder's count of down blocks (its mid block is the original's last down block).
ORIGINAL_NAMES = [
    (r"encoder\.down_blocks\.(\d+)\.resnets\.(\d+)\.(.*)",
     lambda m, e: f"encoder.down_blocks.{2 * int(m[1])}.res_blocks.{m[2]}.{m[3]}"),
    (r"encoder\.down_blocks\.(\d+)\.downsamplers\.0\.(.*)",
     lambda m, e: f"encoder.down_blocks.{2 * int(m[1]) + 1}.{m[2]}"),
    (r"encoder\.mid_block\.resnets\.(\d+)\.(.*)", lambda m, e: f"encoder.down_blocks.{2 * e}.res_blocks.{m[1]}.{m[2]}"),
    (r"decoder\.mid_block\.resnets\.(\d+)\.(.*)", lambda m, e: f"decoder.up_blocks.0.res_blocks.{m[1]}.{m[2]}"),
    (r"decoder\.up_blocks\.(\d+)\.upsamplers\.0\.(.*)", lambda m, e: f"decoder.up_blocks.{2 * int(m[1]) + 1}.{m[2]}"),
    (r"decoder\.up_blocks\.(\d+)\.resnets\.(\d+)\.(.*)",
     lambda m, e: f"decoder.up_blocks.{2 * int(m[1]) + 2}.res_blocks.{m[2]}.{m[3]}"),
    (r"(encoder|decoder)\.conv_(in|out)\.conv\.(weight|bias)", lambda m, e: m[0]),
    (r"latents_mean", lambda m, e: "per_channel_statistics.mean-of-means"),
    (r"latents_std", lambda m, e: "per_channel_statistics.std-of-means"),
]


def to_original(name, enc_blocks):
    """diffusers' key -> the original VAE-only file's key."""
    for pattern, original in ORIGINAL_NAMES:
        m = re.fullmatch(pattern, name)
        if m:
            return original(m, enc_blocks)
    raise ValueError(f"no original name known for {name}")


def conversion_rename(name, four_up_blocks):
    """diffusers' conversion script's rule (scripts/convert_ltx2_to_diffusers.py): ordered substring
    replacements, original -> diffusers. Used only to check to_original against it."""
    rules = [(f"down_blocks.{i}", t) for i, t in enumerate(
        ["down_blocks.0", "down_blocks.0.downsamplers.0", "down_blocks.1", "down_blocks.1.downsamplers.0",
         "down_blocks.2", "down_blocks.2.downsamplers.0", "down_blocks.3", "down_blocks.3.downsamplers.0",
         "mid_block"])]
    rules += [(f"up_blocks.{i}", t) for i, t in enumerate(
        ["mid_block", "up_blocks.0.upsamplers.0", "up_blocks.0", "up_blocks.1.upsamplers.0", "up_blocks.1",
         "up_blocks.2.upsamplers.0", "up_blocks.2"])]
    rules += [("res_blocks", "resnets"), ("per_channel_statistics.mean-of-means", "latents_mean"),
              ("per_channel_statistics.std-of-means", "latents_std")]
    if four_up_blocks:
        rules += [("up_blocks.7", "up_blocks.3.upsamplers.0"), ("up_blocks.8", "up_blocks.3")]
    for old, new in rules:
        name = name.replace(old, new)
    return name


def original_names(model, vae):
    enc_blocks = len(split_blocks(vae["encoder_blocks"], DOWN)[1])
    four = len(split_blocks(vae["decoder_blocks"], UP)[1]) == 4
    names = {}
    for name in model.state_dict():
        orig = to_original(name, enc_blocks)
        if conversion_rename(orig, four) != name:
            raise AssertionError(f"{name} -> {orig} does not map back under diffusers' conversion rule")
        names[name] = orig
    return names


def randomize(model, seed):
    import torch

    gen = torch.Generator().manual_seed(seed)
    state = {}
    for name, value in sorted(model.state_dict().items()):
        if name == "latents_mean":
            v = torch.randint(-32, 33, value.shape, generator=gen).double() / 64
        elif name == "latents_std":
            v = torch.randint(32, 129, value.shape, generator=gen).double() / 64
        elif name.endswith(".weight") and value.dim() == 5:
            fan_in = value[0].numel()
            v = torch.randn(value.shape, generator=gen, dtype=torch.float64) / fan_in ** 0.5
        elif name.endswith(".bias"):
            v = 0.1 * torch.randn(value.shape, generator=gen, dtype=torch.float64)
        else:
            raise ValueError(f"unexpected tensor {name} {tuple(value.shape)}")
        state[name] = v.to(torch.bfloat16)
    model.load_state_dict({k: v.double() for k, v in state.items()})
    return state


def build(vae, dtype):
    import torch
    from diffusers import AutoencoderKLLTX2Video

    model = AutoencoderKLLTX2Video(**diffusers_config(vae)).to(dtype).eval()
    torch.set_grad_enabled(False)
    return model


def stats(model):
    c = model.config.latent_channels
    return model.latents_mean.view(1, c, 1, 1, 1), model.latents_std.view(1, c, 1, 1, 1)


def make(out, seed):
    import torch
    from safetensors.torch import save_file

    gen = torch.Generator().manual_seed(seed + 1000)
    # 17 frames (1 + 8k), 32 x 64: a latent of 3 x 1 x 2, non-square so a swapped axis shows.
    video = (torch.rand(1, 3, 17, 32, 64, generator=gen, dtype=torch.float64) * 2 - 1).float()
    # Decode inputs (frames, height, width): 2 x 2 for the reflect-padded 2.0 decoder (reflection needs 2
    # pixels), 1 x 2 for 2.3's zero-padded one; 2 and 3 latent frames keep the file small.
    latent_thw = {"20": (2, 2, 2), "23": (3, 1, 2)}
    cases = {"video": video}
    meta = {"family": "ltx2-vae", "seed": seed, "computed": "", "configs": {}, "shapes": {}, "cases": {}}
    for tag, vae in TINY.items():
        model = build(vae, torch.float64)
        state = randomize(model, seed + int(tag))
        names = original_names(model, vae)
        mean, std = stats(model)

        h = model.encoder(video.double())
        c = vae["latent_channels"]
        cases[f"{tag}.video_mu_raw"] = h[:, :c]
        cases[f"{tag}.video_logvar"] = h[:, c:c + 1]
        cases[f"{tag}.video_mu"] = (h[:, :c] - mean) / std
        post = model.encode(video.double()).latent_dist
        assert torch.equal(post.mean, h[:, :c]) and torch.equal(post.logvar[:, c - 1:], h[:, c:c + 1].clamp(-30, 20))
        image = video[:, :, :1].double()
        cases[f"{tag}.image_mu"] = (model.encoder(image)[:, :c] - mean) / std

        latent = torch.randn(1, c, *latent_thw[tag], generator=gen, dtype=torch.float64).float().double()
        cases[f"{tag}.latent"] = latent
        cases[f"{tag}.latent_decoded"] = model.decode(latent * std + mean).sample
        cases[f"{tag}.image_decoded"] = model.decode(latent[:, :, :1] * std + mean).sample

        metadata = {"format": "pt", "config": json.dumps({"vae": vae})}
        save_file({names[k]: v.contiguous() for k, v in state.items()}, str(out / f"weights-{tag}.safetensors"),
                  metadata=metadata)
        meta["configs"][tag] = {"original": vae, "diffusers": diffusers_config(vae),
                                "weights": f"weights-{tag}.safetensors", "tensors": len(state)}

    cases = {k: (v if k == "video" else v.double()).contiguous() for k, v in cases.items()}
    save_file(cases, str(out / "cases.safetensors"))
    import diffusers

    meta["computed"] = (f"diffusers {diffusers.__version__} AutoencoderKLLTX2Video, float64 on CPU, torch "
                        f"{torch.__version__}; whole clip (no tiling, no framewise decoding)")
    meta["tensors_layout"] = "[batch, channels, frames, height, width]; video values in [-1, 1]"
    meta["key_rule"] = (
        "weights use the original VAE-only file's names (prefix 'vae.' in the full model file). diffusers <- "
        "original: encoder.down_blocks.{i}.resnets.{j} <- encoder.down_blocks.{2i}.res_blocks.{j}; "
        "encoder.down_blocks.{i}.downsamplers.0 <- encoder.down_blocks.{2i+1}; encoder.mid_block.resnets.{j} <- "
        "encoder.down_blocks.{2n}.res_blocks.{j} (n = 4 downsamplers); decoder.mid_block.resnets.{j} <- "
        "decoder.up_blocks.0.res_blocks.{j}; decoder.up_blocks.{i}.upsamplers.0 <- decoder.up_blocks.{2i+1}; "
        "decoder.up_blocks.{i}.resnets.{j} <- decoder.up_blocks.{2i+2}.res_blocks.{j}; latents_mean <- "
        "per_channel_statistics.mean-of-means; latents_std <- per_channel_statistics.std-of-means; "
        "conv_in / conv_out unchanged. Checked against diffusers' conversion renames for every tensor.")
    meta["weights_dtype"] = "bfloat16 (widened to float64 for the cases)"
    meta["shapes"] = {k: list(v.shape) for k, v in cases.items()}
    meta["cases"] = {
        "video": "input, float32 values (exact), shared by both configs",
        "<c>.video_mu_raw": "encoder(video)[:, :C]: the posterior mean AutoencoderKLLTX2Video.encode returns",
        "<c>.video_logvar": "encoder(video)[:, C]: the one shared log-variance channel, before the clamp",
        "<c>.video_mu": "(video_mu_raw - latents_mean) / latents_std: what the original encoder returns",
        "<c>.image_mu": "the same normalised mean for the first frame alone (T = 1)",
        "<c>.latent": "a normalised latent (float32 values): 2 frames (20), 3 frames (23)",
        "<c>.latent_decoded": "decode(latent * latents_std + latents_mean): 9 or 17 frames, unclamped",
        "<c>.image_decoded": "decode of the latent's first frame alone: 1 frame",
    }
    meta["held_back_output_frames"] = {tag: held_back(vae) for tag, vae in TINY.items()}
    meta["held_back_output_frames"]["see"] = "docs/ltx2-vae.md, Streaming"
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")


def decoder_stages(vae):
    """The decoder's temporal stages in run order: ("conv", 1) for a conv looking one frame ahead at its own
    rate, ("up", 2) / ("up", 1) for an upsampler (its conv, then depth-to-space with that temporal stride)."""
    res, comp = split_blocks(vae["decoder_blocks"], UP)
    stages = [("conv", 1)] * (1 + 2 * res[-1][1]["num_layers"])  # conv_in, mid block
    for (name, _), (_, p) in zip(reversed(comp), reversed(res[:-1])):
        stages.append(("up", 2 if name in ("compress_all", "compress_time") else 1))
        stages += [("conv", 1)] * (2 * p["num_layers"])
    return stages + [("conv", 1)]  # conv_out


def final_frames(vae, latent_frames, ended):
    """Output frames that no later latent frame can change, once `latent_frames` have arrived."""
    a = latent_frames
    for kind, stride in decoder_stages(vae):
        a = a if ended else a - 1  # the conv's last frame waits for its right neighbour (or the clip's end)
        if kind == "up" and stride == 2:
            a = 2 * a - 1  # depth-to-space doubles, then drops the first frame
        a = max(a, 0)
    return a


def held_back(vae):
    """Output frames a streaming decode holds back until the next latent frame (or the end) arrives."""
    n = 64
    return final_frames(vae, n, True) - final_frames(vae, n, False)


def released_keys(out_dir):
    import torch

    for tag, path in (("20", "ltx2-released-keys.json"), ("23", "ltx23-released-keys.json")):
        vae = RELEASED[tag]
        with torch.device("meta"):
            model = build(vae, torch.float32)
        names = original_names(model, vae)
        keys = {names[k]: list(v.shape) for k, v in model.state_dict().items()}
        lines = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in keys.items()]
        (out_dir / path).write_text("{\n" + ",\n".join(lines) + "\n}\n")
        print(f"{path}: {len(keys)} tensors")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = pathlib.Path(__file__).resolve().parents[1]
    parser.add_argument("--out", type=pathlib.Path, default=root / "tests" / "data" / "ltx2-tiny")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keys", action="store_true", help="also write tests/data/ltx2*-released-keys.json")
    args = parser.parse_args()
    try:
        import diffusers  # noqa: F401
    except ImportError:
        sys.exit("make_golden_ltx2.py: needs diffusers >= 0.42 (AutoencoderKLLTX2Video)")
    args.out.mkdir(parents=True, exist_ok=True)
    make(args.out, args.seed)
    if args.keys:
        released_keys(root / "tests" / "data")
    for f in sorted(args.out.iterdir()):
        print(f"{f.name}: {f.stat().st_size} bytes")


if __name__ == "__main__":
    main()
