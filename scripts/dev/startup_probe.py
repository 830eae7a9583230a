# What does the first call of a convolution shape cost in a fresh process (cuDNN plan from its heuristics, the
# kernels' module loading), against the same call once warm? bf16 channels-last 3-D convolutions of the Wan2.1
# decoder at 1280x720, first chunk (1 latent frame) and steady chunks, cudnn.benchmark off as in short file runs.
import time

import torch
import torch.nn.functional as F

torch.backends.cudnn.benchmark = False
dev = "cuda"
bf = torch.bfloat16
cl = torch.channels_last_3d

t0 = time.perf_counter()
torch.zeros(1, device=dev)
torch.cuda.synchronize()
print(f"CUDA context: {(time.perf_counter() - t0) * 1e3:.0f} ms", flush=True)

# (in, out, kernel, frames in, H, W)
shapes = [
    (16, 384, (3, 3, 3), 3, 90, 160), (384, 384, (3, 3, 3), 3, 90, 160), (384, 384, (3, 3, 3), 4, 180, 320),
    (384, 768, (3, 1, 1), 4, 180, 320), (192, 192, (3, 3, 3), 6, 360, 640), (96, 96, (3, 3, 3), 6, 720, 1280),
    (96, 3, (3, 3, 3), 6, 720, 1280), (384, 384, (3, 3, 3), 5, 90, 160), (96, 96, (3, 3, 3), 3, 720, 1280),
    (192, 384, (1, 2, 2), 4, 360, 640),
]
total_first = total_warm = 0.0
for cin, cout, k, t, h, w in shapes:
    x = torch.randn(1, cin, t, h, w, device=dev, dtype=bf).contiguous(memory_format=cl)
    wt = torch.randn(cout, cin, *k, device=dev, dtype=bf).contiguous(memory_format=cl) * 0.05
    pad = (0, k[1] // 2, k[2] // 2)
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    F.conv3d(x, wt, None, padding=pad)
    torch.cuda.synchronize()
    first = time.perf_counter() - t1
    t1 = time.perf_counter()
    F.conv3d(x, wt, None, padding=pad)
    torch.cuda.synchronize()
    warm = time.perf_counter() - t1
    total_first += first
    total_warm += warm
    print(f"conv {cin}->{cout} k{k} {t}x{h}x{w}: first {first * 1e3:.1f} ms, warm {warm * 1e3:.2f} ms", flush=True)
print(f"{len(shapes)} shapes: first calls {total_first * 1e3:.0f} ms, warm {total_warm * 1e3:.0f} ms", flush=True)
