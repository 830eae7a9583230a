"""Host-device copy rates and pinned allocation times on this GPU, for the streamed cache's cost model
(Note [Caches streamed slot by slot] in core/split/cache_stream.h). Prints one line per measurement."""
import time

import torch

from gpu_timing import seconds_per_call

dev = torch.device("cuda")
gib = 1 << 30


shape = (1, 128, 2, 1080, 1920)  # a full-resolution 1080p history in bf16: 1.06 GB
d = torch.randn(shape, device=dev, dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last_3d)
nbytes = d.numel() * d.element_size()
t = time.perf_counter()
h = torch.empty_strided(d.size(), d.stride(), dtype=d.dtype, pin_memory=True)
print(f"pinned allocation of {nbytes / gib:.2f} GiB: {time.perf_counter() - t:.3f} s")
up, down = torch.cuda.Stream(), torch.cuda.Stream()
d2 = torch.empty_like(d)
h2 = torch.empty_strided(d.size(), d.stride(), dtype=d.dtype, pin_memory=True)
h2.copy_(h)


def d2h():
    with torch.cuda.stream(down):
        h.copy_(d, non_blocking=True)


def h2d():
    with torch.cuda.stream(up):
        d2.copy_(h2, non_blocking=True)


for name, fn in [("device to host", d2h), ("host to device", h2d), ("both at once", lambda: (d2h(), h2d()))]:
    s = seconds_per_call(fn, n=5, warmup=1)
    print(f"{name}: {nbytes / s / 1e9:.1f} GB/s each way ({s * 1e3:.1f} ms per {nbytes / gib:.2f} GiB)")
# Copies beside a compute-bound kernel, as the streamed cache runs them.
a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)


def gemms():
    for _ in range(20):
        a @ a


g = seconds_per_call(gemms, n=2, warmup=1)
s = seconds_per_call(lambda: (d2h(), h2d(), gemms()), n=2, warmup=1)
print(f"20 GEMMs {g * 1e3:.1f} ms alone, {s * 1e3:.1f} ms with a copy each way beside them")
