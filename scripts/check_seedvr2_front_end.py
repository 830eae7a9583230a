"""vaecodec.seedvr2.accelerate on the real VideoAutoencoderKLWrapper of a fetched ComfyUI-SeedVR2 or official
SeedVR copy (neither is on PyPI, so CI tests a stand-in: python/tests/seedvr2_front_end.py). On the CPU in
float32 with the tiny SeedVR2 weights: the class's own encode/decode against the accelerated ones and the golden
cases, its tiling arguments, restore(), another config, and the settings and dtypes that are refused.

    .venv/bin/python scripts/check_seedvr2_front_end.py --peer /path/to/ComfyUI-SeedVR2_VideoUpscaler

PATH is an extracted tree (`git archive HEAD | tar -x`) of either project. Its modules import einops (and
ComfyUI-SeedVR2's psutil), which vaecodec does not need: make them importable for this check only, e.g.
`pip install --target DIR einops psutil` and PYTHONPATH=DIR. Exits 1 when a check fails.
"""

import argparse
import importlib
import inspect
import json
import pathlib
import subprocess
import sys

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
TOLERANCE = 1e-5


def import_class(peer: pathlib.Path):
    """The wrapper class, imported as the package its relative imports expect."""
    for module in ("src.models.video_vae_v3.modules.attn_video_vae",  # ComfyUI-SeedVR2
                   "models.video_vae_v3.modules.attn_video_vae"):  # official SeedVR
        if (peer / (module.replace(".", "/") + ".py")).is_file():
            sys.path.insert(0, str(peer))
            return importlib.import_module(module).VideoAutoencoderKLWrapper
    raise SystemExit(f"{peer}: neither src/models/video_vae_v3 (ComfyUI-SeedVR2) nor models/video_vae_v3 (SeedVR)")


def build(cls, config: dict, **overrides):
    blocks = len(config["block_out_channels"])
    args = dict(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock3D",) * blocks,
                up_block_types=("UpDecoderBlock3D",) * blocks, block_out_channels=tuple(config["block_out_channels"]),
                layers_per_block=config["layers_per_block"], latent_channels=config["latent_channels"],
                norm_num_groups=config["norm_num_groups"], temporal_scale_num=config["temporal_scale_num"],
                inflation_mode="pad", use_quant_conv=False, use_post_quant_conv=False, slicing_sample_min_size=4,
                spatial_downsample_factor=2 ** (blocks - 1),
                temporal_downsample_factor=2 ** config["temporal_scale_num"], freeze_encoder=False)
    args.update(overrides)
    return cls(**args).eval()


class Report:
    def __init__(self):
        self.failed = 0

    def compare(self, what: str, got: torch.Tensor, want: torch.Tensor, tolerance: float = TOLERANCE) -> None:
        got, want = got.detach().double().cpu(), want.detach().double().cpu()
        if got.shape != want.shape:
            self.check(f"{what}: shape {tuple(got.shape)} vs {tuple(want.shape)}", False)
            return
        rel = ((got - want).norm() / want.norm()).item()
        self.check(f"{what}: max abs diff {(got - want).abs().max().item():.3e}, relative {rel:.3e}",
                   rel <= tolerance)

    def check(self, what: str, ok: bool) -> None:
        self.failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {what}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peer", type=pathlib.Path, required=True, help="extracted ComfyUI-SeedVR2 or SeedVR tree")
    parser.add_argument("--golden", type=pathlib.Path, default=ROOT / "tests" / "data" / "seedvr2-tiny")
    parser.add_argument("--commit", default="", help="the commit the tree was extracted from, for the record")
    args = parser.parse_args()

    import vaecodec.seedvr2
    from safetensors.torch import load_file

    cls = import_class(args.peer.resolve())
    commit = args.commit or subprocess.run(["git", "-C", str(args.peer), "rev-parse", "HEAD"], capture_output=True,
                                           text=True).stdout.strip() or "unknown"
    print(f"peer {args.peer} ({cls.__module__}.{cls.__name__}), commit {commit}; vaecodec {vaecodec.__version__}, "
          f"torch {torch.__version__}")
    config = json.loads((args.golden / "meta.json").read_text())["config"]
    weights = load_file(str(args.golden / "weights.safetensors"))
    cases = load_file(str(args.golden / "cases.safetensors"))
    video, latent, image = cases["video"], cases["latent"], cases["video"][:, :, 0]
    report = Report()
    tiling = "tiled" in inspect.signature(cls.encode).parameters  # ComfyUI-SeedVR2's
    sampled = not tiling  # the official class's latent is posterior.sample()

    vae = build(cls, config)
    vae.load_state_dict(weights, strict=True)
    with torch.no_grad():
        own = {"encode(video)": vae.encode(video), "decode(latent)": vae.decode(latent),
               "encode(image)": vae.encode(image)}
        # The official class's latent samples the posterior: decode its mean, as the engine's latent is.
        image_latent = own["encode(image)"].posterior.mode().squeeze(2)
        own["decode(image latent)"] = vae.decode(image_latent)
        if tiling:
            vae.debug = None  # ComfyUI-SeedVR2 gives its VAE a logger; the tiled path reads it
            own["tiled encode(video)"] = vae.encode(video, tiled=True, tile_size=(32, 32), tile_overlap=(8, 8))
        vae.set_causal_slicing(split_size=4, memory_device="same")  # the inference setting: chunks of 4 frames
        own["sliced decode(latent)"] = vae.decode(latent)
        vae.set_causal_slicing(split_size=None, memory_device=None)
    handle = vaecodec.seedvr2.accelerate(vae)
    print(f"accelerated: {handle.model!r}, norm groups {handle.model.config['norm_num_groups']}")
    fast = {"encode(video)": vae.encode(video), "decode(latent)": vae.decode(latent),
            "encode(image)": vae.encode(image)}
    fast["decode(image latent)"] = vae.decode(image_latent)
    fast["sliced decode(latent)"] = fast["decode(latent)"]
    for name, theirs in own.items():
        if name.startswith("tiled"):
            continue
        ours = fast[name]
        report.check(f"{name}: {type(ours).__name__} as the class's", type(ours) is type(theirs))
        if name.startswith("encode"):  # the posterior's mean (the official class's latent is a sample of it)
            report.compare(f"{name} accelerated vs the class's, posterior mean", ours.posterior.mode(),
                           theirs.posterior.mode())
        if sampled and name.startswith("encode"):
            report.check(f"{name}: latent {tuple(ours.latent.shape)}, the class's shape (a sample of its "
                         "posterior: not compared)", ours.latent.shape == theirs.latent.shape)
        else:
            report.compare(f"{name} accelerated vs the class's", ours[0], theirs[0])
    report.check("posterior: the class's type", type(fast["encode(video)"].posterior)
                 is type(own["encode(video)"].posterior))
    report.compare("encode(video) accelerated vs golden video_mean_sliced", fast["encode(video)"].latent,
                   cases["video_mean_sliced"])
    report.compare("decode(latent) accelerated vs golden latent_decoded_sliced", fast["decode(latent)"].sample,
                   cases["latent_decoded_sliced"])
    report.compare("decode(encode(video)) accelerated vs golden video_roundtrip_sliced",
                   vae.decode(fast["encode(video)"].latent).sample, cases["video_roundtrip_sliced"])
    if tiling:
        tiled = vae.encode(video, tiled=True, tile_size=(32, 32), tile_overlap=(8, 8)).latent
        report.check("tiled=True accelerated: the engine's plan, equal to untiled",
                     torch.equal(tiled, fast["encode(video)"].latent))
        diff = own["tiled encode(video)"].latent - own["encode(video)"].latent
        print(f"note the class's own tiled encode (32 px tiles) vs its untiled one: relative "
              f"{(diff.norm() / own['encode(video)'].latent.norm()).item():.3e} (an approximation; not a check)")
    else:
        try:
            vae.encode(video, tiled=True)
            report.check("tiled=True refused as the class refuses it", False)
        except TypeError as e:
            report.check(f"tiled=True refused as the class refuses it: {e}", True)
    handle.restore()
    with torch.no_grad():
        report.check("restore(): the class's own decode again", "decode" not in vae.__dict__ and torch.equal(
            vae.decode(latent).sample, own["decode(latent)"].sample))

    torch.manual_seed(3)
    other = {"block_out_channels": [8, 16, 16], "layers_per_block": 1, "latent_channels": 8, "norm_num_groups": 4,
             "temporal_scale_num": 1}
    small = build(cls, other)
    g = torch.Generator().manual_seed(5)
    clip, z = torch.rand(1, 3, 9, 32, 24, generator=g) * 2 - 1, torch.randn(1, 8, 5, 8, 6, generator=g)
    with torch.no_grad():
        own_latent, own_frames = small.encode(clip).posterior.mode(), small.decode(z).sample
    with vaecodec.seedvr2.accelerate(small):
        report.compare(f"another config {other}: encode, posterior mean", small.encode(clip).posterior.mode(),
                       own_latent)
        report.compare("another config: decode", small.decode(z).sample, own_frames)

    refused = {"attention=False": dict(attention=False), "act_fn='gelu'": dict(act_fn="gelu"),
               "use_quant_conv=True": dict(use_quant_conv=True), "float64": {}}
    for name, overrides in refused.items():
        try:
            bad = build(cls, config, **overrides)
        except Exception as e:  # the class itself may not build it
            report.check(f"{name}: the class does not build it ({type(e).__name__}: {e})", True)
            continue
        if name == "float64":
            bad.to(torch.float64)
        try:
            vaecodec.seedvr2.accelerate(bad)
            report.check(f"{name}: refused", False)
        except (TypeError, ValueError) as e:
            report.check(f"{name}: refused: {type(e).__name__}: {e}", "\n" not in str(e))
    print("all checks passed" if not report.failed else f"{report.failed} checks failed")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
