#!/usr/bin/env python3
"""Times vaecodec from Python against the alternatives a Python user has, on one GPU, same weights, same input.

For each op (decode, encode) of a Wan2.1 VAE (released architecture, random weights written once as a
diffusers folder that every contender loads), at --size x --frames in --dtype:
  vaecodec        vaecodec.load(folder).decode(z) / .encode(video)
  accelerated     diffusers' AutoencoderKLWan after vaecodec.diffusers.accelerate(vae) (what a pipeline runs)
  diffusers       AutoencoderKLWan itself, plain and with enable_tiling()
  fastvae         FastVAEDecoder.from_vae(vae).decode(z), where the fastvae package is installed (decode only)
  cli-bench       `vaecodec bench --weights folder` (the engine's own timing, in its own process)
Each: the median of --runs timed runs after --warmup, and the peak memory allocated by torch's caching
allocator during the timed runs (weights and the input clip included). Then the accuracy of the accelerated
pipeline's decode against diffusers in float32, beside diffusers' own in --dtype (a smaller clip).
One JSON line per row to --out; a table on stdout.

  python3 scripts/bench_python.py --cli build/vaecodec --out out/gpu/python_bench.jsonl
  python3 scripts/bench_python.py --device cpu --dtype fp32 --size 64x64 --frames 5 --runs 1 --warmup 0 \
      --accuracy-size 64x64x5      # a quick check of the script without a GPU
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

import torch

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
DEVICE = torch.device("cuda")


def make_weights(folder: str) -> None:
    """The released Wan2.1 VAE architecture with random weights of unit-variance activations, saved by
    diffusers (so that diffusers, fastvae, vaecodec and the CLI all read the same tensors)."""
    from diffusers import AutoencoderKLWan

    if os.path.exists(os.path.join(folder, "config.json")):
        return
    vae = AutoencoderKLWan()
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, p in vae.named_parameters():
            if name.endswith("gamma"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            elif p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p[0].numel()))
            else:
                p.copy_(0.01 * torch.randn(p.shape, generator=g))
    vae.save_pretrained(folder)


def smooth_video(frames, height, width, device, dtype, seed=1):
    g = torch.Generator().manual_seed(seed)
    coarse = torch.rand(1, 3, frames, height // 8, width // 8, generator=g) * 2 - 1
    video = torch.nn.functional.interpolate(coarse, size=(frames, height, width), mode="trilinear")
    return video.add_(0.05 * torch.randn(video.shape, generator=g)).clamp_(-1, 1).to(device, dtype)


def timed(fn, runs, warmup):
    cuda = torch.cuda.is_available() and DEVICE.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    with torch.no_grad():
        for _ in range(warmup):
            fn()
        sync()
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        seconds = []
        for _ in range(runs):
            start = time.perf_counter()
            out = fn()
            sync()
            seconds.append(time.perf_counter() - start)
            del out
    return {"runs": seconds, "median_s": statistics.median(seconds), "peak_allocated_bytes":
            torch.cuda.max_memory_allocated() if cuda else 0}


def cli_bench(cli, folder, op, args):
    command = [cli, "bench", "--weights", folder, "--op", op, "--size", args.size, "--frames", str(args.frames),
               "--device", args.device, "--dtype", args.dtype, "--runs", str(args.runs), "--warmup", str(args.warmup), "--json"]
    if not args.autotune:
        command.append("--no-autotune")
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "bench failed")
    j = json.loads(done.stdout)
    return {"runs": j["runs"], "median_s": j["median_s"], "peak_allocated_bytes": j.get("peak_allocated_bytes", 0)}


def relative_l2(got, want):
    got, want = got.double(), want.double()
    return ((got - want).norm() / want.norm()).item()


def psnr(got, want):
    mse = ((got.double().clamp(-1, 1) - want.double().clamp(-1, 1)) / 2).pow(2).mean().item()
    return 10 * math.log10(1 / max(mse, 1e-20))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cli", default="build/vaecodec")
    parser.add_argument("--weights", default="/tmp/wan21_diffusers", help="diffusers folder (made if missing)")
    parser.add_argument("--size", default="1280x720")
    parser.add_argument("--frames", type=int, default=81)
    parser.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    parser.add_argument("--device", default="cuda", help="cuda, cuda:N, or cpu (a quick check of the script)")
    parser.add_argument("--ops", default="decode,encode")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--autotune", action=argparse.BooleanOptionalAction, default=True,
                        help="cuDNN timing for vaecodec and the CLI (bench's default: on)")
    parser.add_argument("--skip", default="", help="comma-separated contenders to leave out")
    parser.add_argument("--accuracy-size", default="256x256x17", help="WxHxT of the accuracy clip ('' : none)")
    parser.add_argument("--out", default="out/gpu/python_bench.jsonl")
    args = parser.parse_args()

    import vaecodec
    import vaecodec.diffusers
    from diffusers import AutoencoderKLWan

    global DEVICE
    DEVICE = torch.device(args.device)
    width, height = map(int, args.size.split("x"))
    dtype = DTYPES[args.dtype]
    skip = set(filter(None, args.skip.split(",")))
    make_weights(args.weights)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    gpu = torch.cuda.get_device_name(DEVICE) if DEVICE.type == "cuda" else "cpu"
    vae = AutoencoderKLWan.from_pretrained(args.weights, torch_dtype=dtype).to(DEVICE).eval()
    mean = torch.tensor(vae.config.latents_mean, device=DEVICE).view(1, -1, 1, 1, 1)
    std = torch.tensor(vae.config.latents_std, device=DEVICE).view(1, -1, 1, 1, 1)
    t = 1 + (args.frames - 1) // 4
    z = torch.randn(1, 16, t, height // 8, width // 8, generator=torch.Generator().manual_seed(2)).to(DEVICE)
    z_raw = (z * std + mean).to(dtype)
    video = smooth_video(args.frames, height, width, DEVICE, dtype)
    model = vaecodec.load(args.weights, device=DEVICE, dtype=args.dtype, autotune=args.autotune)

    rows = []

    def record(op, who, run):
        if who in skip:
            return
        if DEVICE.type == "cuda":
            torch.cuda.empty_cache()
        try:
            result = run()
        except Exception as e:  # noqa: BLE001 - a contender that fails is a row that says so
            result = {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
        row = {"op": op, "who": who, "size": args.size, "frames": args.frames, "dtype": args.dtype, "gpu": gpu,
               "autotune": args.autotune, **result}
        rows.append(row)
        with open(args.out, "a") as f:
            f.write(json.dumps(row) + "\n")
        if "error" in row:
            print(f"{op:7} {who:18} FAILED {row['error']}", flush=True)
        else:
            print(f"{op:7} {who:18} {row['median_s']:8.3f} s  peak {row['peak_allocated_bytes'] / 2**30:6.2f} GiB",
                  flush=True)

    for op in args.ops.split(","):
        if op == "decode":
            record(op, "vaecodec", lambda: timed(lambda: model.decode(z), args.runs, args.warmup))
        else:
            record(op, "vaecodec", lambda: timed(lambda: model.encode(video), args.runs, args.warmup))
        record(op, "cli-bench", lambda: cli_bench(args.cli, args.weights, op, args))

        def diffusers_call():
            if op == "decode":
                return vae.decode(z_raw).sample
            return vae.encode(video).latent_dist.mean

        def accelerated():
            with vaecodec.diffusers.accelerate(vae, autotune=args.autotune):
                return timed(diffusers_call, args.runs, args.warmup)

        record(op, "accelerated", accelerated)
        record(op, "diffusers", lambda: timed(diffusers_call, args.runs, args.warmup))

        def tiled():
            vae.enable_tiling()
            try:
                return timed(diffusers_call, args.runs, args.warmup)
            finally:
                vae.disable_tiling()

        record(op, "diffusers-tiled", tiled)
        if op == "decode":
            def fast():
                import fastvae

                decoder = fastvae.FastVAEDecoder.from_vae(vae).to(DEVICE)
                return timed(lambda: decoder.decode(z_raw), args.runs, args.warmup)

            record(op, "fastvae", fast)

    print()
    for op in args.ops.split(","):
        mine = {r["who"]: r for r in rows if r["op"] == op and "error" not in r}
        if "vaecodec" not in mine:
            continue
        ours = mine["vaecodec"]["median_s"]
        for who, r in sorted(mine.items()):
            print(f"{op:7} {who:18} {r['median_s'] / ours:6.2f}x vaecodec's time")

    if args.accuracy_size and "decode" in args.ops:
        aw, ah, at = map(int, args.accuracy_size.split("x"))
        small = torch.randn(1, 16, 1 + (at - 1) // 4, ah // 8, aw // 8, generator=torch.Generator().manual_seed(3))
        small_raw = small.to(DEVICE) * std + mean
        reference_vae = AutoencoderKLWan.from_pretrained(args.weights, torch_dtype=torch.float32).to(DEVICE).eval()
        with torch.no_grad():
            reference = reference_vae.decode(small_raw).sample
            own = vae.decode(small_raw.to(dtype)).sample
            with vaecodec.diffusers.accelerate(vae):
                fast = vae.decode(small_raw.to(dtype)).sample
        row = {"op": "decode", "who": "accuracy", "size": f"{aw}x{ah}", "frames": at, "dtype": args.dtype,
               "gpu": gpu, "diffusers_relative_l2_vs_fp32": relative_l2(own, reference),
               "diffusers_psnr_vs_fp32_db": psnr(own, reference),
               "accelerated_relative_l2_vs_fp32": relative_l2(fast, reference),
               "accelerated_psnr_vs_fp32_db": psnr(fast, reference)}
        with open(args.out, "a") as f:
            f.write(json.dumps(row) + "\n")
        print(f"\naccuracy {aw}x{ah}x{at} {args.dtype} against diffusers in float32: diffusers "
              f"{row['diffusers_relative_l2_vs_fp32']:.2e} ({row['diffusers_psnr_vs_fp32_db']:.1f} dB), accelerated "
              f"{row['accelerated_relative_l2_vs_fp32']:.2e} ({row['accelerated_psnr_vs_fp32_db']:.1f} dB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
