"""The timing the micro-benchmarks here share: GPU seconds per call after a warm-up."""
import time

import torch


def seconds_per_call(fn, n=10, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / n
