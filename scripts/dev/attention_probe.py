#!/usr/bin/env python3
"""Times single-head attention at SeedVR2's width (512 channels) over one frame's latent pixels, the mid-block
attention of its encoder and decoder, on the GPU: PyTorch's scaled_dot_product_attention under each backend that
takes it, and a blockwise form over blocks of queries (scores by a GEMM, a softmax, a second GEMM), with the
error of each against a float64 reference on a sample of queries. Prints one line per row.

usage: attention_probe.py [--tokens 32400,129600] [--block 2048,4096] [--runs 3]
"""
import argparse
import math
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def timed(fn, runs):
    fn()
    torch.cuda.synchronize()
    best = []
    for _ in range(runs):
        start = time.perf_counter()
        out = fn()
        torch.cuda.synchronize()
        best.append(time.perf_counter() - start)
    return out, sorted(best)[len(best) // 2]


def blockwise(q, k, v, block, scores_dtype):
    # q, k, v: (tokens, C). Scores of a block of queries in scores_dtype, softmax in float32, weights in q's dtype.
    out = torch.empty_like(q)
    scale = 1.0 / math.sqrt(q.shape[1])
    kt = k.t()
    for start in range(0, q.shape[0], block):
        qb = q[start:start + block] * scale
        if scores_dtype == torch.float32:
            s = torch.mm(qb, kt, out_dtype=torch.float32)
            p = torch.softmax(s, dim=-1).to(q.dtype)
        else:
            s = torch.mm(qb, kt)
            p = torch.softmax(s, dim=-1, dtype=torch.float32).to(q.dtype)
        out[start:start + block] = torch.mm(p, v)
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", default="32400,129600")
    parser.add_argument("--block", default="2048,4096,8192")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    torch.manual_seed(0)
    channels = 512
    print(torch.__version__, torch.cuda.get_device_name(), "cudnn", torch.backends.cudnn.version())
    for tokens in [int(t) for t in args.tokens.split(",")]:
        q, k, v = (torch.randn(tokens, channels, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        flop = 4.0 * tokens * tokens * channels
        rows = torch.randperm(tokens, device="cuda")[:256]
        ref = torch.softmax(q[rows].double() @ k.double().t() / math.sqrt(channels), -1) @ v.double()

        def report(name, fn):
            try:
                torch.cuda.reset_peak_memory_stats()
                out, seconds = timed(fn, args.runs)
                err = ((out[rows].double() - ref).norm() / ref.norm()).item()
                peak = torch.cuda.max_memory_allocated() / 2**30
                print(f"tokens {tokens} {name}: {seconds * 1e3:.1f} ms, {flop / seconds / 1e12:.0f} TFLOP/s, "
                      f"rel err {err:.2e}, peak {peak:.2f} GiB", flush=True)
            except Exception as e:  # a backend that does not take this shape
                print(f"tokens {tokens} {name}: not run ({str(e).splitlines()[0][:120]})", flush=True)

        q4, k4, v4 = (t.view(1, 1, tokens, channels) for t in (q, k, v))
        report("sdpa default", lambda: F.scaled_dot_product_attention(q4, k4, v4).view(tokens, channels))
        for backend in (SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION):
            def run(backend=backend):
                with sdpa_kernel([backend]):
                    return F.scaled_dot_product_attention(q4, k4, v4).view(tokens, channels)
            report(f"sdpa {backend.name}", run)
        for block in [int(b) for b in args.block.split(",")]:
            report(f"blockwise {block} fp32 scores", lambda block=block: blockwise(q, k, v, block, torch.float32))
            report(f"blockwise {block} bf16 scores", lambda block=block: blockwise(q, k, v, block, torch.bfloat16))
        del q, k, v, q4, k4, v4
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
