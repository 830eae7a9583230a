#!/usr/bin/env python3
"""SeedVR2's tiled decode and encode beside ComfyUI-SeedVR2's (issue 38, item 4).

On the same weights, input, tile grid and overlap, each side's tiled run is compared with its own untiled run:
the relative L2 error, the PSNR (decode) and the error inside the tiles' overlap bands against elsewhere (a
seam shows as a band). The peer is numz/ComfyUI-SeedVR2_VideoUpscaler's own VideoAutoencoderKLWrapper, called
as its nodes call it (`encode/decode(x, tiled=True, tile_size=(px, px), tile_overlap=(px, px))`, causal
slicing of 4 frames, memory limits of 0.5) from an extracted copy of its repository (--peer):

    git -C <bare repo> archive HEAD | tar -x -C /tmp/peer

vaecodec runs the same tiles through time (vaecodec.load(tile=, tile_overlap=, norm_context=, tile_norms=))
once per --contexts value and --tile-norms kind: crop tiles (the whole model on each tile's crop and context)
and frame tiles (the latent-resolution blocks on the whole frame, the tile and its context above them). Sizes are chosen so that both grids are the same tiles: the peer steps its tiles by
tile - overlap from the top left and drops a last tile that lies inside the overlap, vaecodec spreads tiles of
one size evenly; where the frame is not a whole number of steps the grids differ, and the table says so.

Needs, beside the vaecodec package: diffusers, einops, psutil and PyYAML (the peer's imports; not
dependencies of vaecodec: `pip install einops psutil`), safetensors and the ffmpeg program (the clip).

    # the tiny model on the CPU (tests/data/seedvr2-peer-tiny.json was made so):
    scripts/seedvr2_peer.py --peer /tmp/peer --weights tests/data/seedvr2-tiny/weights.safetensors \\
        --model-config tests/data/seedvr2-tiny/meta.json --device cpu --size 160x160 --frames 5 \\
        --tile 96 --overlap 32 --op decode,encode --json out.json
    # the released architecture with random weights on a GPU, ComfyUI-SeedVR2's default tiles:
    scripts/seedvr2_peer.py --peer /tmp/peer --config released --seed 0 --device cuda --dtype bf16 \\
        --size 1920x1080 --frames 81 --tile 1024 --overlap 128 --op decode,encode --json out.json
    # the peer's tiled runs alone, timed (where its untiled run does not fit; beside `vaecodec bench` rows):
    scripts/seedvr2_peer.py --peer /tmp/peer --config released --device cuda --size 3840x2160 --frames 21 \\
        --tile 1024 --overlap 128 --input noise --peer-only --json peer.jsonl
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import io
import json
import math
import os
import pathlib
import platform
import shlex
import subprocess
import sys
import tempfile
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_CLIP = ROOT / "tests" / "data" / "wan21-trained" / "heldout_bbb.mp4"
SPATIAL = 8  # pixels per latent pixel, both sides
# ComfyUI-SeedVR2's VAE settings (its configs_3b/main.yaml): temporal slices of 4 frames, 0.5 GiB limits.
PEER_SLICING = {"split_size": 4, "memory_device": "same"}
PEER_MEMORY_LIMIT = {"conv_max_mem": 0.5, "norm_max_mem": 0.5}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


# --- inputs

def clip_video(path: os.PathLike, width: int, height: int, frames: int) -> torch.Tensor:
    """`frames` frames of the clip, scaled to cover width x height and centre-cropped (looped where it is
    shorter), as [1, 3, T, H, W] float32 in [-1, 1]."""
    command = ["ffmpeg", "-v", "error", "-stream_loop", "-1", "-i", str(path), "-vf",
               f"scale={width}:{height}:force_original_aspect_ratio=increase:flags=bicubic,crop={width}:{height}",
               "-frames:v", str(frames), "-f", "rawvideo", "-pix_fmt", "rgb24", "-"]
    raw = subprocess.run(command, capture_output=True, check=True).stdout
    if len(raw) != frames * height * width * 3:
        raise RuntimeError(f"ffmpeg gave {len(raw)} bytes of {path}, not {frames} frames of {width}x{height}")
    video = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(frames, height, width, 3)
    return (video.permute(3, 0, 1, 2).unsqueeze(0).float() / 127.5 - 1).contiguous()


# --- grids and bands (latent pixels)

def peer_spans(extent: int, tile: int, overlap: int) -> list[tuple[int, int]]:
    """The peer's tiles along one side: steps of tile - overlap from 0, the last cut at the edge, a tile
    that lies inside its neighbour's overlap left out."""
    stride = max(1, tile - overlap)
    spans = []
    for start in range(0, extent, stride):
        end = min(start + tile, extent)
        if start > 0 and end - start <= overlap:
            continue
        spans.append((start, end))
    return spans


def vaecodec_spans(extent: int, tile: int, count: int) -> list[tuple[int, int]]:
    """vaecodec's blended tiles along one side (core/tile_grid.cpp): `count` tiles of one size, spread
    evenly, the first at 0 and the last flush with the far edge."""
    if count <= 1:
        return [(0, extent)]
    origins = [(i * (extent - tile) + (count - 1) // 2) // (count - 1) for i in range(count)]
    return [(o, o + tile) for o in origins]


def band_mask(rows: list[tuple[int, int]], cols: list[tuple[int, int]], height: int, width: int,
              scale: int) -> torch.Tensor:
    """[H, W] True where two or more tiles cover a row or a column (their overlap bands), `scale` pixels per
    latent pixel."""
    def along(spans, extent):
        covered = torch.zeros(extent, dtype=torch.int32)
        for start, end in spans:
            covered[start * scale:end * scale] += 1
        return covered >= 2
    return along(rows, height)[:, None] | along(cols, width)[None, :]


# --- metrics

def compare(got: torch.Tensor, want: torch.Tensor, band: torch.Tensor | None, frames: bool) -> dict:
    """Relative L2 of `got` against `want` (both [1, C, T, H, W]), inside and outside `band` ([H, W]), and
    for frames the PSNR over [-1, 1] (both clamped, as a video is). Summed frame by frame in float64."""
    sums = dict(err=0.0, ref=0.0, err_band=0.0, ref_band=0.0, sq_clamped=0.0, n=0)
    for t in range(want.size(2)):
        g, w = got[:, :, t].double(), want[:, :, t].double()
        d2, w2 = (g - w).square(), w.square()
        sums["err"] += d2.sum().item()
        sums["ref"] += w2.sum().item()
        if band is not None:
            sums["err_band"] += d2[..., band].sum().item()
            sums["ref_band"] += w2[..., band].sum().item()
        if frames:
            sums["sq_clamped"] += (g.clamp(-1, 1) - w.clamp(-1, 1)).square().sum().item()
        sums["n"] += w.numel()
    out = {"relative_l2": math.sqrt(sums["err"] / sums["ref"])}
    if frames:
        mse = sums["sq_clamped"] / sums["n"]
        out["psnr_db"] = 10 * math.log10(4 / mse) if mse > 0 else float("inf")
    if band is not None and band.any() and not band.all():
        out["band_relative_l2"] = math.sqrt(sums["err_band"] / sums["ref_band"])
        out["elsewhere_relative_l2"] = math.sqrt((sums["err"] - sums["err_band"]) / (sums["ref"] - sums["ref_band"]))
        out["band_share"] = band.float().mean().item()
    return out


# --- running

class Runner:
    """Runs and times calls on one device: peak memory allocated by the call (torch's allocator, which the
    engine shares) and wall time; the result comes back to the host in float32."""

    def __init__(self, device: torch.device):
        self.device = device
        self.cuda = device.type == "cuda"

    def free(self):
        gc.collect()
        if self.cuda:
            torch.cuda.empty_cache()

    def __call__(self, fn) -> tuple[torch.Tensor, dict]:
        self.free()
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        with torch.no_grad():
            out = fn()
        if self.cuda:
            torch.cuda.synchronize()
        stats = {"seconds": time.perf_counter() - start}
        if self.cuda:
            stats["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
        result = out.float().cpu()
        del out
        self.free()
        return result, stats


def vaecodec_model(weights, device: str, dtype: str, **tiles):
    import vaecodec
    return vaecodec.load(weights, device=device, dtype=dtype, **tiles)


def vaecodec_op(model, op: str, x: torch.Tensor) -> torch.Tensor:
    # Decode through the engine unclamped (Model.decode clamps to [-1, 1]; the peer does not): the relative
    # errors are of what each model computes.
    x = x.to(model.device)
    return model.encode(x) if op == "encode" else model._native.decode(x)


def vaecodec_runs(weights, op: str, x: torch.Tensor, tile_latent: tuple[int, int], overlap_latent: int,
                  contexts: list[int], device: str, dtype: str, runner: Runner,
                  tile_norms: tuple[str, ...] = ("crop", "frame")) -> dict:
    """vaecodec untiled, then tiled on `tile_latent` (width, height) sharing `overlap_latent` with each kind
    of tile norms and norm context ("crop 4": crop tiles, context 4): outputs, run statistics, and the tiled
    runs' grids."""
    out = {}
    model = vaecodec_model(weights, device, dtype)
    out["untiled"] = runner(lambda: vaecodec_op(model, op, x)) + ({"tiles": "untiled"},)
    del model
    for norms in tile_norms:
        for context in contexts:
            model = vaecodec_model(weights, device, dtype, tile=tile_latent, tile_overlap=overlap_latent,
                                   norm_context=context, tile_norms=norms)
            plan = model.plan(list(x.shape), op)
            result, stats = runner(lambda: vaecodec_op(model, op, x))
            g = plan["tiles"]
            grid = {"rows": vaecodec_spans(g["latent_height"], g["tile_height"], g["rows"]),
                    "cols": vaecodec_spans(g["latent_width"], g["tile_width"], g["cols"]),
                    "kind": plan["tile_kind"], "context": g["context"]}
            out[f"{norms} {context}"] = (result, stats, grid)
            del model
    return out


# --- the peer

def import_peer(path: pathlib.Path):
    """The peer's VideoAutoencoderKLWrapper and its config, importing the extracted repository's `src` as a
    package (its modules import each other relatively). Its import-time notices go to stderr."""
    if not (path / "src" / "models" / "video_vae_v3" / "modules" / "attn_video_vae.py").exists():
        raise SystemExit(f"--peer {path}: not an extracted ComfyUI-SeedVR2_VideoUpscaler repository")
    sys.path.insert(0, str(path))
    with contextlib.redirect_stdout(sys.stderr):
        from src.models.video_vae_v3.modules.attn_video_vae import VideoAutoencoderKLWrapper
    import yaml
    config = yaml.safe_load((path / "src" / "models" / "video_vae_v3" / "s8_c16_t4_inflation_sd3.yaml").read_text())
    return VideoAutoencoderKLWrapper, config


def peer_commit(path: pathlib.Path, given: str | None) -> str:
    if given:
        return given
    done = subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else "unknown (give --peer-commit)"


def build_peer(cls, config: dict, state: dict | None, device: torch.device, dtype: torch.dtype, seed: int = 0):
    """The peer's wrapper as ComfyUI-SeedVR2 configures it, with `state` (key names are the same on both
    sides: the released checkpoint's, diffusers' attention names) or, without, its own seeded random init."""
    torch.manual_seed(seed)
    model = cls(**config, freeze_encoder=False, gradient_checkpoint=False)
    if state is not None:
        missing, unexpected = model.load_state_dict({k: v.float() for k, v in state.items()}, strict=True)
        if missing or unexpected:
            raise RuntimeError(f"the peer's model does not take the weights: missing {missing}, unexpected {unexpected}")
    model.debug = None  # the nodes attach their logger here; the tiled paths read it
    model.requires_grad_(False).eval()
    model.set_causal_slicing(**PEER_SLICING)
    model.set_memory_limit(**PEER_MEMORY_LIMIT)
    return model.to(device, dtype)


def peer_op(model, op: str, x: torch.Tensor, tile_px: int | None, overlap_px: int) -> torch.Tensor:
    x = x.to(next(model.parameters()).device, next(model.parameters()).dtype)
    tiled = dict(tiled=tile_px is not None, tile_size=(tile_px or 0,) * 2, tile_overlap=(overlap_px,) * 2)
    out = model.encode(x, **tiled).latent if op == "encode" else model.decode(x, **tiled).sample
    return out.unsqueeze(2) if out.dim() == 4 else out  # a single frame comes back without its time axis


# --- weights and config

def config_overrides(args, tensors: dict | None) -> dict:
    """What the peer's yaml (the released config) must change for these weights: widths and layers from the
    tensors, norm groups (which no shape tells) from the file's vaecodec_config or --model-config."""
    overrides = {}
    if args.model_config:
        data = json.loads(pathlib.Path(args.model_config).read_text())
        overrides.update(data.get("config", data))
    if tensors is not None:
        widths = [tensors[f"encoder.down_blocks.{i}.resnets.0.conv1.weight"].shape[0] for i in range(4)]
        overrides["block_out_channels"] = widths
        overrides["layers_per_block"] = len({k.split(".")[4] for k in tensors if k.startswith("encoder.down_blocks.0.resnets.")})
    return overrides


def load_weights(args) -> tuple[dict | None, dict]:
    if args.weights:
        from safetensors import safe_open
        from safetensors.torch import load_file
        tensors = load_file(args.weights)
        overrides = config_overrides(args, tensors)
        with safe_open(args.weights, "pt") as f:
            in_file = (f.metadata() or {}).get("vaecodec_config")
        if in_file:
            overrides.update(json.loads(in_file))
        return tensors, overrides
    return None, config_overrides(args, None)


def vaecodec_weights(state: dict, overrides: dict, folder: str):
    """The weights as vaecodec.load takes them: the state dict, or where the norm groups differ from the
    released 32 a safetensors copy stating them (Note [Config in the weights file])."""
    groups = overrides.get("norm_num_groups", 32)
    if groups == 32:
        return state
    from safetensors.torch import save_file
    path = os.path.join(folder, "weights.safetensors")
    save_file({k: v.contiguous() for k, v in state.items()}, path,
              metadata={"vaecodec_config": json.dumps({"norm_num_groups": groups})})
    return path


# --- the report

def report(op: str, peer: dict, ours: dict, untiled_agree: float, frames: bool, grids_match: bool) -> list[dict]:
    rows = []
    for name, (result, stats, grid) in [("ComfyUI-SeedVR2 tiled", peer["tiled"])] + [
            (f"vaecodec {k.split()[0]} tiles, norm context {k.split()[1]}", v)
            for k, v in ours.items() if k != "untiled"]:
        reference = (peer if name.startswith("ComfyUI") else ours)["untiled"][0]
        band = band_mask(grid["rows"], grid["cols"], result.size(-2), result.size(-1), SPATIAL if frames else 1)
        row = {"run": name, "op": op, **compare(result, reference, band, frames), **stats,
               "grid": f"{len(grid['rows'])}x{len(grid['cols'])}", "rows": grid["rows"], "cols": grid["cols"]}
        rows.append(row)
    for name, side in (("ComfyUI-SeedVR2 untiled", peer), ("vaecodec untiled", ours)):
        rows.append({"run": name, "op": op, **side["untiled"][1], "grid": "1x1"})
    rows.append({"run": "vaecodec untiled vs ComfyUI-SeedVR2 untiled", "op": op, "relative_l2": untiled_agree,
                 "grid": "-", "same_grid": grids_match})
    return rows


def markdown(rows: list[dict]) -> str:
    def f(value, fmt):
        if not isinstance(value, (int, float)):
            return "-"
        return format(value, ".1e" if fmt == ".4f" and 0 < value < 1e-3 else fmt)
    lines = ["| op | run | tiles | rel. L2 vs own untiled | PSNR dB | rel. L2 in overlap bands | elsewhere | "
             "band / elsewhere | s | peak GiB |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = (r["band_relative_l2"] / r["elsewhere_relative_l2"]
                 if r.get("elsewhere_relative_l2") else None)
        peak = r["peak_allocated_bytes"] / 2**30 if "peak_allocated_bytes" in r else None
        lines.append(f"| {r['op']} | {r['run']} | {r['grid']} | {f(r.get('relative_l2'), '.4f')} | "
                     f"{f(r.get('psnr_db'), '.2f')} | {f(r.get('band_relative_l2'), '.4f')} | "
                     f"{f(r.get('elsewhere_relative_l2'), '.4f')} | {f(ratio, '.2f')} | "
                     f"{f(r.get('seconds'), '.2f')} | {f(peak, '.2f')} |")
    return "\n".join(lines)


def peer_grid(width: int, height: int, tile_latent: int, overlap_latent: int) -> dict:
    """The peer's tile spans at a frame size: {"rows": [...], "cols": [...]} in latent pixels."""
    return {"rows": peer_spans(height // SPATIAL, tile_latent, overlap_latent),
            "cols": peer_spans(width // SPATIAL, tile_latent, overlap_latent)}


def noise_latents(args, width: int, height: int) -> torch.Tensor:
    """--input noise: seeded normal latents of the clip's shape."""
    return torch.randn(1, 16, 1 + (args.frames - 1) // 4, height // SPATIAL, width // SPATIAL,
                       generator=torch.Generator().manual_seed(args.seed))


def peer_timings(args, ops: list[str], peer, runner: Runner, width: int, height: int) -> int:
    """--peer-only: the peer's tiled run of each op, one JSON line each (seconds, peak allocated bytes)."""
    for op in ops:
        if op == "encode":
            x = clip_video(args.clip, width, height, args.frames)
        else:
            x = noise_latents(args, width, height)
        _, stats = runner(lambda: peer_op(peer, op, x, args.tile, args.overlap))
        grid = peer_grid(width, height, args.tile // SPATIAL, args.overlap // SPATIAL)
        row = {"run": "ComfyUI-SeedVR2 tiled", "op": op, "size": [width, height], "frames": args.frames,
               "tile_px": args.tile, "overlap_px": args.overlap, "grid": "%dx%d" % (len(grid["rows"]), len(grid["cols"])),
               "device": torch.cuda.get_device_name(runner.device) if runner.cuda else "cpu",
               "peer_commit": peer_commit(args.peer, args.peer_commit), **stats}
        print(json.dumps(row), flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(row) + "\n")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--peer", type=pathlib.Path, required=True, help="an extracted ComfyUI-SeedVR2 repository")
    p.add_argument("--peer-commit", help="the peer's commit, where --peer is not a git checkout")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--weights", help="a SeedVR2 VAE safetensors file (released key names)")
    source.add_argument("--config", choices=["released"], help="random weights of the released config")
    p.add_argument("--seed", type=int, default=0, help="seed of --config's random weights and of noise input")
    p.add_argument("--model-config", help="JSON of config keys the tensors do not tell (a tiny model's meta.json)")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--dtype", choices=list(DTYPES), help="default: fp32 on the CPU, bf16 on CUDA")
    p.add_argument("--size", default="160x160", help="WIDTHxHEIGHT in pixels, multiples of 8")
    p.add_argument("--frames", type=int, default=5, help="1 + 4k frames")
    p.add_argument("--tile", type=int, default=96, help="tile side in pixels (the peer's unit), multiple of 8")
    p.add_argument("--overlap", type=int, default=32, help="tile overlap in pixels (the peer's unit), multiple of 8")
    p.add_argument("--op", default="decode,encode", help="decode, encode or both (comma-separated)")
    p.add_argument("--contexts", default="0,8,16", help="vaecodec's norm contexts to run, latent pixels")
    p.add_argument("--tile-norms", default="crop,frame", help="vaecodec's kinds of tiles to run: crop, frame")
    p.add_argument("--input", default="clip", choices=["clip", "noise"],
                   help="decode's latents: the clip's untiled encode (vaecodec's), or seeded normal noise")
    p.add_argument("--clip", default=str(DEFAULT_CLIP), help="the video encoded (and whose latents decoded)")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--peer-only", action="store_true",
                   help="time the peer's tiled run alone (no vaecodec, no untiled run, no comparison): where its "
                        "untiled run does not fit the device, or beside `vaecodec bench` rows; decode takes "
                        "--input noise")
    args = p.parse_args(argv)
    if args.peer_only and "decode" in args.op and args.input != "noise":
        p.error("--peer-only decodes noise (the clip's latents would come from vaecodec): give --input noise")

    width, height = (int(v) for v in args.size.lower().split("x"))
    for name, value in (("--size", width), ("--size", height), ("--tile", args.tile), ("--overlap", args.overlap)):
        if value % SPATIAL:
            p.error(f"{name}: {value} is not a multiple of {SPATIAL}")
    if (args.frames - 1) % 4:
        p.error(f"--frames {args.frames}: 1 + 4k frames")
    dtype_name = args.dtype or ("bf16" if args.device == "cuda" else "fp32")
    device = torch.device(args.device)
    ops = [op.strip() for op in args.op.split(",")]
    contexts = [int(c) for c in args.contexts.split(",")]
    tile_latent, overlap_latent = args.tile // SPATIAL, args.overlap // SPATIAL

    peer_cls, config = import_peer(args.peer)
    state, overrides = load_weights(args)
    config.update(overrides)
    runner = Runner(device)
    peer = build_peer(peer_cls, config, state, device, DTYPES[dtype_name], seed=args.seed)
    if state is None:  # the peer's own seeded init, the same tensors for vaecodec
        state = {k: v.detach().to("cpu", DTYPES[dtype_name]) for k, v in peer.state_dict().items()}

    if args.peer_only:
        return peer_timings(args, ops, peer, runner, width, height)
    video = clip_video(args.clip, width, height, args.frames)
    rows, inputs = [], {}
    with tempfile.TemporaryDirectory() as folder:
        weights = vaecodec_weights(state, overrides, folder)
        for op in ops:
            if op == "encode":
                x = video
            elif args.input == "noise":
                x = noise_latents(args, width, height)
            else:
                x = runner(lambda: vaecodec_op(vaecodec_model(weights, args.device, dtype_name), "encode", video))[0]
            inputs[op] = {"shape": list(x.shape), "from": "clip" if op == "encode" or args.input == "clip" else "noise"}
            if peer is None:
                peer = build_peer(peer_cls, config, state, device, DTYPES[dtype_name])
            peer_out = {"untiled": runner(lambda: peer_op(peer, op, x, None, 0)) + ({},)}
            tiled, stats = runner(lambda: peer_op(peer, op, x, args.tile, args.overlap))
            grid = peer_grid(width, height, tile_latent, overlap_latent)
            peer_out["tiled"] = (tiled, stats, grid)
            peer = None  # off the device while vaecodec runs
            runner.free()
            ours = vaecodec_runs(weights, op, x, (tile_latent, tile_latent), overlap_latent, contexts,
                                 args.device, dtype_name, runner, tuple(args.tile_norms.split(",")))
            same = all(v[2]["rows"] == grid["rows"] and v[2]["cols"] == grid["cols"]
                       for k, v in ours.items() if k != "untiled")
            agree = compare(ours["untiled"][0], peer_out["untiled"][0], None, False)["relative_l2"]
            rows += report(op, peer_out, ours, agree, op == "decode", same)

    table = markdown(rows)
    print(table)
    if not all(r.get("same_grid", True) for r in rows):
        print("\nnote: the two grids differ at this size (see rows/cols in the JSON)")
    if args.json:
        import diffusers
        import vaecodec
        record = {
            "command": "scripts/seedvr2_peer.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:])),
            "date": datetime.date.today().isoformat(),
            "peer": "numz/ComfyUI-SeedVR2_VideoUpscaler", "peer_commit": peer_commit(args.peer, args.peer_commit),
            "machine": platform.processor() or platform.machine(),
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "torch": torch.__version__, "diffusers": diffusers.__version__, "vaecodec": vaecodec.__version__,
            "dtype": dtype_name,
            "size": [width, height], "frames": args.frames, "tile_px": args.tile, "overlap_px": args.overlap,
            "clip": os.path.relpath(args.clip, ROOT) if args.input == "clip" or "encode" in ops else None,
            "inputs": inputs, "config": overrides, "results": rows,
        }
        pathlib.Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
