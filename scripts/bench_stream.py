#!/usr/bin/env python3
"""Times vaecodec's streaming sessions (Note [Streaming sessions] in core/session.h) on one GPU, beside what a
realtime generator runs today: the official Wan2.1 decoder (diffusers' AutoencoderKLWan, a port of it) with
its cache carried from block to block, decoding one latent frame per call as its own decode loop does.

Wan2.1 VAE, the released architecture with random weights (a diffusers folder both load), bf16. Rows, one
JSON line each to --out and a table on stdout:
  decode_block   per-block latency (median over the blocks after the first) for blocks of 1, 3, 5 latent
                 frames at each --sizes, against the whole-clip decode's time per frame times the block's
                 frames (ratio <= 1.2 is the target) and the official loop's latency on the same blocks
                 (>= 3x is the target); the first push of a new size against a later one (<= 2x)
  state          the session's state_bytes and the official cache's bytes after the same blocks
  encode_block   per-push latency for 1, 4 and 8 frames pushed at a time, against the whole-clip encode
  threads        --threads sessions from as many threads (a stream each), blocks of 3, against one session:
                 aggregate frames per second; each thread's frames bit-identical to a single session's
  overlap        a block pushed while a bf16 matmul load runs on another stream, against the two apart
  first_frame    a fresh process: import, load from disk, first pushed block of 832x480 ready

  python3 scripts/bench_stream.py --cli build-gpu/vaecodec --out out/gpu/stream_bench.jsonl
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_python import make_weights  # noqa: E402  (the same random released-architecture weights)

import vaecodec  # noqa: E402

DEVICE = torch.device("cuda")


def sync_time(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0, out


def median(values):
    return statistics.median(values) if values else float("nan")


class Official:
    """diffusers' AutoencoderKLWan decoding blocks with its cache carried between them (feat_cache kept), one
    latent frame per decoder call as its own _decode loop does: the loop realtime generators run."""

    def __init__(self, vae):
        self.vae = vae
        self.first = True
        vae.clear_cache()

    @torch.no_grad()
    def push(self, raw):
        x = self.vae.post_quant_conv(raw)
        outs = []
        for i in range(x.shape[2]):
            self.vae._conv_idx = [0]
            outs.append(self.vae.decoder(x[:, :, i:i + 1], feat_cache=self.vae._feat_map,
                                         feat_idx=self.vae._conv_idx, first_chunk=self.first and i == 0))
        self.first = False
        return torch.cat(outs, 2).clamp(-1, 1)

    def cache_bytes(self):
        return sum(t.numel() * t.element_size() for t in self.vae._feat_map if torch.is_tensor(t))


def cli_tflop_per_frame(cli, folder, op, width, height):
    """The model's FLOPs per frame from the CLI's bench (the engine's own count), 81 frames."""
    if not cli:
        return None
    done = subprocess.run([cli, "bench", "--weights", folder, "--op", op, "--size", f"{width}x{height}",
                           "--frames", "81", "--dtype", "bf16", "--runs", "1", "--warmup", "1", "--json"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        return None
    j = json.loads(done.stdout)
    return {"tflop_per_frame": j["model_tflop"] / 81, "bench_median_s": j["median_s"]}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weights", default=os.path.join(tempfile.gettempdir(), "vaecodec-wan21-random"))
    p.add_argument("--cli", default="")
    p.add_argument("--sizes", default="832x480,1280x720")
    p.add_argument("--blocks", default="1,3,5")
    p.add_argument("--pushes", type=int, default=6, help="timed blocks after the first")
    p.add_argument("--official-pushes", type=int, default=3)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--out", default="stream_bench.jsonl")
    args = p.parse_args()

    make_weights(args.weights)
    rows = []

    def record(row):
        rows.append(row)
        print(json.dumps(row), flush=True)

    # The first frame from a fresh process: interpreter, import, load from disk, one block of 832x480.
    child = (
        "import time; t0 = time.perf_counter(); import torch, vaecodec; t1 = time.perf_counter();"
        f"m = vaecodec.load({args.weights!r}, device='cuda', dtype='bf16'); torch.cuda.synchronize();"
        "t2 = time.perf_counter(); z = torch.randn(1, 16, 3, 60, 104, device='cuda');"
        "s = m.decode_stream(); f = s.push(z); torch.cuda.synchronize(); t3 = time.perf_counter();"
        "f2 = s.push(z); torch.cuda.synchronize(); t4 = time.perf_counter();"
        "print(t1 - t0, t2 - t1, t3 - t2, t4 - t3)")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode == 0:
        imp, load, first, second = map(float, done.stdout.split())
        record({"row": "first_frame", "size": "832x480", "block": 3, "process_wall_s": wall, "import_s": imp,
                "load_s": load, "first_push_s": first, "second_push_s": second})
    else:
        record({"row": "first_frame", "error": done.stderr.strip().splitlines()[-1:]})

    from diffusers import AutoencoderKLWan

    m = vaecodec.load(args.weights, device="cuda", dtype="bf16")
    ref = AutoencoderKLWan.from_pretrained(args.weights, torch_dtype=torch.bfloat16).to(DEVICE).eval()
    mean = m.latent_mean.to(DEVICE).view(1, -1, 1, 1, 1)
    std = m.latent_std.to(DEVICE).view(1, -1, 1, 1, 1)
    blocks = [int(b) for b in args.blocks.split(",")]
    g = torch.Generator(device=DEVICE).manual_seed(0)

    for size in args.sizes.split(","):
        width, height = map(int, size.split("x"))
        h, w = height // 8, width // 8
        flops = cli_tflop_per_frame(args.cli, args.weights, "decode", width, height)
        for block in blocks:
            t_latent = 1 + block * (args.pushes + 1)
            z = torch.randn(1, 16, t_latent, h, w, device=DEVICE, generator=g)
            # A new size's first push comes first: no warm-up is hidden before it.
            s = m.decode_stream()
            first_s, _ = sync_time(lambda: s.push(z[:, :, :1]))
            times = []
            for k in range(args.pushes + 1):
                dt, frames = sync_time(lambda: s.push(z[:, :, 1 + k * block:1 + (k + 1) * block]))
                times.append(dt)
            later = times[1:]  # the first block of this length is a new shape too
            state = s.state_bytes
            s.close()
            # The whole clip of 81 frames at this size, per frame.
            zw = torch.randn(1, 16, 21, h, w, device=DEVICE, generator=g)
            m.decode(zw)
            whole = median([sync_time(lambda: m.decode(zw))[0] for _ in range(3)]) / 81
            # The official loop on the same blocks.
            o = Official(ref)
            raw = (z * std + mean).to(torch.bfloat16)
            sync_time(lambda: o.push(raw[:, :, :1]))
            official = []
            for k in range(min(args.official_pushes, args.pushes) + 1):
                dt, _ = sync_time(lambda: o.push(raw[:, :, 1 + k * block:1 + (k + 1) * block]))
                official.append(dt)
            official_bytes = o.cache_bytes()
            ref.clear_cache()
            lat = median(later)
            frames = 4 * block
            row = {"row": "decode_block", "size": size, "block_latents": block, "block_frames": frames,
                   "latency_s": lat, "min_s": min(later), "max_s": max(later),
                   "first_push_s": first_s, "first_block_push_s": times[0],
                   "first_vs_later": times[0] / lat, "whole_per_frame_s": whole,
                   "vs_whole": lat / (whole * frames), "official_s": median(official[1:]),
                   "speedup_vs_official": median(official[1:]) / lat, "state_bytes": state,
                   "official_cache_bytes": official_bytes}
            if flops:
                row["tflops"] = flops["tflop_per_frame"] * frames / lat
                row["tflop_per_frame"] = flops["tflop_per_frame"]
            record(row)

        # Encode: 1, 4 and 8 frames at a time.
        for push in (1, 4, 8):
            video = torch.rand(1, 3, 1 + push * (args.pushes + 1), height, width, device=DEVICE,
                               generator=g).mul_(2).sub_(1).to(torch.bfloat16)
            s = m.encode_stream()
            sync_time(lambda: s.push(video[:, :, :1]))
            times = []
            for k in range(args.pushes + 1):
                dt, _ = sync_time(lambda: s.push(video[:, :, 1 + k * push:1 + (k + 1) * push]))
                times.append(dt)
            s.close()
            vw = torch.rand(1, 3, 81, height, width, device=DEVICE, generator=g).mul_(2).sub_(1).to(torch.bfloat16)
            m.encode(vw)
            whole = median([sync_time(lambda: m.encode(vw))[0] for _ in range(3)]) / 81
            # With fewer than 4 frames a push, most pushes only wait: the mean over the pushes is the cost per
            # push, the slowest one the latency of a push that completes a group.
            lat = median(times[1:])
            mean = sum(times[1:]) / len(times[1:])
            record({"row": "encode_block", "size": size, "frames_per_push": push, "latency_s": lat,
                    "mean_s": mean, "max_s": max(times[1:]), "per_frame_s": mean / push, "whole_per_frame_s": whole,
                    "vs_whole": mean / (whole * push)})

    # Threads: sessions of 832x480 with blocks of 3, one stream each, against one session.
    h, w, block, n = 60, 104, 3, args.pushes
    clips = [torch.randn(1, 16, 1 + block * n, h, w, device=DEVICE, generator=g) for _ in range(args.threads)]

    def stream_clip(k, stream):
        with torch.cuda.stream(stream):
            s = m.decode_stream()
            out = [s.push(clips[k][:, :, :1])]
            out += [s.push(clips[k][:, :, 1 + i * block:1 + (i + 1) * block]) for i in range(n)]
            return torch.cat(out, 2)

    refs = [stream_clip(k, torch.cuda.current_stream()) for k in range(args.threads)]
    torch.cuda.synchronize()
    one_s, _ = sync_time(lambda: stream_clip(0, torch.cuda.current_stream()))
    frames_per_clip = refs[0].shape[2]
    results = [None] * args.threads

    def worker(k):
        stream = torch.cuda.Stream()
        results[k] = stream_clip(k, stream)
        stream.synchronize()

    def all_threads():
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(args.threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    all_threads()  # each thread's streams warm
    many_s, _ = sync_time(all_threads)
    exact = all(torch.equal(results[k], refs[k]) for k in range(args.threads))
    record({"row": "threads", "size": "832x480", "block_latents": block, "sessions": args.threads,
            "one_session_fps": frames_per_clip / one_s, "aggregate_fps": args.threads * frames_per_clip / many_s,
            "gain": (args.threads * frames_per_clip / many_s) / (frames_per_clip / one_s),
            "bit_identical": exact})

    # Overlap: a block pushed while a matmul load runs on another stream, for a load of large products (which
    # fill the GPU alone) and of small ones (which leave room). The push returns to the host before its work
    # is done: push_host_s is the time to return.
    load = torch.cuda.Stream()
    z = torch.randn(1, 16, 4, h, w, device=DEVICE, generator=g)
    s = m.decode_stream()
    for n_mm, count in ((8192, 20), (2048, 600)):
        a = torch.randn(n_mm, n_mm, device=DEVICE, dtype=torch.bfloat16)

        def matmuls():
            with torch.cuda.stream(load):
                for _ in range(count):
                    a @ a

        def fresh():
            s.reset()
            s.push(z[:, :, :1])
            torch.cuda.synchronize()

        def decode_block():
            return s.push(z[:, :, 1:4])

        matmuls()
        fresh()
        decode_block()
        t_mm = median([sync_time(matmuls)[0] for _ in range(3)])
        t_dec, host, both = [], [], []
        for _ in range(3):
            fresh()
            t_dec.append(sync_time(decode_block)[0])
            fresh()
            t0 = time.perf_counter()
            decode_block()
            host.append(time.perf_counter() - t0)
            torch.cuda.synchronize()
            fresh()
            both.append(sync_time(lambda: (matmuls(), decode_block()))[0])
        record({"row": "overlap", "size": "832x480", "block_latents": 3, "matmul": f"{count}x {n_mm}^2",
                "matmul_s": t_mm, "decode_s": median(t_dec), "push_host_s": median(host),
                "together_s": median(both), "sum_apart_s": t_mm + median(t_dec)})

    with open(args.out, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    print("\n| size | block | latency | vs whole per frame | official loop | speedup | first/later | state | official cache |")
    for r in rows:
        if r["row"] == "decode_block":
            print(f"| {r['size']} | {r['block_latents']} ({r['block_frames']} frames) | {r['latency_s'] * 1e3:.1f} ms | "
                  f"{r['vs_whole']:.2f}x | {r['official_s'] * 1e3:.1f} ms | {r['speedup_vs_official']:.2f}x | "
                  f"{r['first_vs_later']:.2f} | {r['state_bytes'] / 2**20:.0f} MiB | {r['official_cache_bytes'] / 2**20:.0f} MiB |")


if __name__ == "__main__":
    main()
