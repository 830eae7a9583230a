#!/usr/bin/env python3
"""Times the LTX-2 VAE in vaecodec against diffusers' AutoencoderKLLTX2Video on one device, same weights.

The released LTX-2.3 (or 2.0) architecture with random weights (drawn as scripts/make_golden_ltx2.py draws the
golden data's, bf16), written once as a VAE-only file with the original key names and the config in its
metadata, as the released files carry it; diffusers builds the same model from the same tensors. For each op
(decode, encode) at --size x --frames in --dtype:
  vaecodec            `vaecodec bench --weights FILE` (the engine's own timing and peak, in its own process)
  diffusers           AutoencoderKLLTX2Video.decode / .encode, whole clip
  diffusers-tiled     the same after enable_tiling() (its default tiles)
Each: the median of --runs timed runs after --warmup and the peak memory the caching allocator held during the
timed runs (weights and input included), with model TFLOP/s from vaecodec's FLOP count of the same function.
Then the accuracy of vaecodec (the Python package, float32) against diffusers' float32 on the same weights at
--accuracy-size, where the package is importable.
One JSON line per row to --out; a table on stdout.

  python3 scripts/bench_ltx2.py --cli build/vaecodec --out out/gpu/ltx2_bench.jsonl
  python3 scripts/bench_ltx2.py --tiny --device cpu --dtype fp32 --size 64x64 --frames 9 --runs 1 --warmup 0 \\
      --accuracy-size 64x64x9     # a check of the script on the CPU, with the golden data's tiny config
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import make_golden_ltx2 as golden  # noqa: E402  (the configs, the key names and the weights' draw)

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def make_weights(path: pathlib.Path, config: dict, seed: int):
    """The config's model (float32, CPU) with random weights, written once as a VAE-only file (original names,
    metadata config) and read back from it later; returns the model and its weights in diffusers' names
    (bfloat16 values, exact in float32)."""
    from safetensors.torch import load_file, save_file

    model = golden.build(config, torch.float32)
    names = golden.original_names(model, config)
    if path.exists():
        by_original = load_file(str(path))
        state = {k: by_original[v] for k, v in names.items()}
    else:
        state = golden.randomize(model, seed)
        save_file({names[k]: v.contiguous() for k, v in state.items()}, str(path),
                  metadata={"format": "pt", "config": json.dumps({"vae": config})})
    model.load_state_dict({k: v.float() for k, v in state.items()})
    return model.eval(), state


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device, runs, warmup):
    """(median seconds, peak bytes allocated during the timed runs or 0 on the CPU)."""
    for _ in range(warmup):
        fn()
    sync(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        sync(device)
        seconds.append(time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0
    return statistics.median(seconds), peak


def inputs(model, op, frames, height, width, device, dtype, seed=1):
    """decode: raw latents (diffusers' decode input); encode: a smooth clip in [-1, 1]."""
    g = torch.Generator().manual_seed(seed)
    if op == "decode":
        c = model.config.latent_channels
        s = model.config.spatial_compression_ratio
        t = model.config.temporal_compression_ratio
        z = torch.randn(1, c, 1 + (frames - 1) // t, height // s, width // s, generator=g)
        return z.to(device, dtype)
    coarse = torch.rand(1, 3, frames, max(height // 16, 1), max(width // 16, 1), generator=g) * 2 - 1
    video = torch.nn.functional.interpolate(coarse, size=(frames, height, width), mode="trilinear")
    return video.clamp_(-1, 1).to(device, dtype)


def diffusers_rows(model, op, args, device, dtype, tflop):
    frames, (width, height) = args.frames, args.wh
    x = inputs(model, op, frames, height, width, device, dtype)
    rows = []
    for name, tiled in (("diffusers", False), ("diffusers-tiled", True)):
        if tiled:
            model.enable_tiling()
        else:
            model.disable_tiling()
        run = (lambda: model.decode(x).sample) if op == "decode" else (lambda: model.encode(x).latent_dist.mean)
        try:
            with torch.no_grad():
                seconds, peak = timed(run, device, args.runs, args.warmup)
            rows.append({"contender": name, "op": op, "median_s": seconds, "peak_allocated_gib": peak / 2**30})
        except torch.OutOfMemoryError as e:
            rows.append({"contender": name, "op": op, "error": f"out of memory: {str(e).splitlines()[0]}"})
        if device.type == "cuda":
            torch.cuda.empty_cache()
    model.disable_tiling()
    for r in rows:
        if "median_s" in r and tflop:
            r["tflops"] = tflop / r["median_s"]
    return rows


def vaecodec_row(args, weights, op):
    cmd = [args.cli, "bench", "--weights", str(weights), "--op", op, "--size", args.size, "--frames",
           str(args.frames), "--dtype", args.dtype, "--runs", str(args.runs), "--warmup", str(args.warmup),
           "--device", args.device, "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    if done.returncode != 0:
        return {"contender": "vaecodec", "op": op, "error": done.stderr.strip().splitlines()[-1:]}
    j = json.loads(done.stdout.strip().splitlines()[-1])
    row = {"contender": "vaecodec", "op": op, "median_s": j["median_s"], "model_tflop": j.get("model_tflop"),
           "peak_allocated_gib": j.get("peak_allocated_gib", 0), "plan": j.get("plan", {}).get("split")}
    if j.get("model_tflop"):
        row["tflops"] = j["model_tflop"] / j["median_s"]
    return row


def accuracy_rows(weights, model, state, size):
    """vaecodec's Python package against diffusers, both float32 on the CPU, the same weights."""
    try:
        import vaecodec
    except ImportError:
        return [{"contender": "accuracy", "error": "the vaecodec package is not importable: not run"}]
    width, height, frames = (int(v) for v in size.split("x"))
    cpu = torch.device("cpu")
    model = model.to(cpu, torch.float32)
    model.load_state_dict({k: v.float() for k, v in state.items()})  # as written, whatever --dtype did to it
    c = model.config.latent_channels
    mean, std = model.latents_mean.view(1, c, 1, 1, 1), model.latents_std.view(1, c, 1, 1, 1)
    mine = vaecodec.load(str(weights), device="cpu", dtype="fp32")
    rows = []
    with torch.no_grad():
        video = inputs(model, "encode", frames, height, width, cpu, torch.float32)
        reference = (model.encode(video).latent_dist.mean - mean) / std
        latents = mine.encode(video)
        rows.append({"contender": "accuracy", "op": "encode",
                     "relative_l2": float((latents - reference).norm() / reference.norm())})
        z = inputs(model, "decode", frames, height, width, cpu, torch.float32)
        reference = model.decode(z * std + mean).sample
        decoded = mine.decode(z, clamp=False)  # diffusers does not clamp
        rows.append({"contender": "accuracy", "op": "decode",
                     "relative_l2": float((decoded - reference).norm() / reference.norm())})
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cli", default=str(ROOT / "build" / "vaecodec"))
    p.add_argument("--version", choices=["23", "20"], default="23", help="LTX-2.3/2.5 (default) or 2.0")
    p.add_argument("--tiny", action="store_true", help="the golden data's tiny config instead of the released")
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", choices=list(DTYPES), default="bf16")
    p.add_argument("--size", default="1280x704", help="WIDTHxHEIGHT, multiples of 32")
    p.add_argument("--frames", type=int, default=121, help="1 + 8k")
    p.add_argument("--ops", default="decode,encode")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--weights", default="/tmp/ltx2_random", help="folder for the random weights file")
    p.add_argument("--accuracy-size", default="128x64x17", help="WIDTHxHEIGHTxFRAMES; empty: none")
    p.add_argument("--out", help="JSON lines")
    args = p.parse_args()
    args.wh = tuple(int(v) for v in args.size.split("x"))
    if (args.frames - 1) % 8:
        p.error(f"--frames {args.frames}: LTX-2 takes 1 + 8k frames")
    from diffusers.utils import logging as diffusers_logging

    diffusers_logging.set_verbosity_error()  # its note on casting with .to(dtype), once per model
    config = (golden.TINY if args.tiny else golden.RELEASED)[args.version]
    folder = pathlib.Path(args.weights)
    folder.mkdir(parents=True, exist_ok=True)
    weights = folder / f"ltx2-{args.version}{'-tiny' if args.tiny else ''}-seed{args.seed}.safetensors"
    model, state = make_weights(weights, config, args.seed)
    device, dtype = torch.device(args.device), DTYPES[args.dtype]

    rows = []
    for op in args.ops.split(","):
        mine = vaecodec_row(args, weights, op)  # its own process: before diffusers holds the device
        rows.append(mine)
        model = model.to(device, dtype)
        rows += diffusers_rows(model, op, args, device, dtype, mine.get("model_tflop"))
        model = model.to("cpu")  # the device to the next vaecodec row
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if args.accuracy_size:
        rows += accuracy_rows(weights, model, state, args.accuracy_size)

    common = {"version": args.version, "tiny": args.tiny, "device": args.device,
              "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
              "dtype": args.dtype, "size": args.size, "frames": args.frames, "torch": torch.__version__}
    import diffusers

    common["diffusers"] = diffusers.__version__
    out = open(args.out, "a") if args.out else None
    for r in rows:
        r.update(common)
        if out:
            out.write(json.dumps(r) + "\n")
        if "error" in r:
            print(f"{r['contender']:16} {r.get('op', ''):7} {r['error']}")
        elif r["contender"] == "accuracy":
            print(f"{'accuracy':16} {r['op']:7} vaecodec against diffusers, float32 CPU: {r['relative_l2']:.2e}")
        else:
            print(f"{r['contender']:16} {r['op']:7} {r['median_s']:8.3f} s  peak {r['peak_allocated_gib']:6.2f} GiB"
                  + (f"  {r['tflops']:6.1f} TFLOP/s" if r.get("tflops") else ""))
    if out:
        out.close()


if __name__ == "__main__":
    main()
