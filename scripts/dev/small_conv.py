# Micro-benchmark of the convolutions with few channels (the decoders' RGB heads, the encoders' first conv) and
# of single-head attention with a wide head, bf16, channels-last, as the engine runs them: do zero-padded
# channels reach faster kernels?
import time

import torch
import torch.nn.functional as F

from gpu_timing import seconds_per_call

torch.backends.cudnn.benchmark = True
dev = "cuda"
bf = torch.bfloat16
cl = torch.channels_last_3d


def conv_case(cin, cout, pad_in, pad_out, H=720, W=1280, tout=4):
    x = torch.randn(1, cin, tout + 2, H, W, device=dev, dtype=bf).contiguous(memory_format=cl)
    w = (torch.randn(cout, cin, 3, 3, 3, device=dev, dtype=bf) * 0.05).contiguous(memory_format=cl)
    b = torch.zeros(cout, device=dev, dtype=bf)
    base = seconds_per_call(lambda: F.conv3d(x, w, b, padding=(0, 1, 1)))
    ci, co = max(cin, pad_in), max(cout, pad_out)
    wp = torch.zeros(co, ci, 3, 3, 3, device=dev, dtype=bf)
    wp[:cout, :cin] = w
    wp = wp.contiguous(memory_format=cl)
    bp = torch.zeros(co, device=dev, dtype=bf)

    def padded():
        xi = x
        if ci > cin:
            xi = torch.zeros(1, ci, tout + 2, H, W, device=dev, dtype=bf).contiguous(memory_format=cl)
            xi[:, :cin] = x
        y = F.conv3d(xi, wp, bp, padding=(0, 1, 1))
        return y[:, :cout].contiguous(memory_format=cl) if co > cout else y

    t = seconds_per_call(padded)
    print(f"conv {cin}->{cout} 720p t={tout}: {base*1e3:.2f} ms; padded {ci}->{co}: {t*1e3:.2f} ms", flush=True)


print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), torch.cuda.get_device_name())
for cout_pad in (8, 16, 32):
    conv_case(96, 3, 0, cout_pad)
    conv_case(128, 3, 0, cout_pad)
for cin_pad in (8, 16):
    conv_case(3, 96, cin_pad, 0)
    conv_case(3, 128, cin_pad, 0)

# SeedVR2's mid-block attention: 4 frames of 160x90 tokens, one head of 512.
for c in (512, 384):
    q = torch.randn(4, 1, 14400, c, device=dev, dtype=bf)
    t = seconds_per_call(lambda: F.scaled_dot_product_attention(q, q, q))
    flops = 4 * 4 * 14400 * 14400 * c
    print(f"sdpa 4x14400 tokens head {c}: {t*1e3:.2f} ms, {flops/t/1e12:.0f} TFLOP/s", flush=True)
    for backend in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH"):
        try:
            with torch.nn.attention.sdpa_kernel(getattr(torch.nn.attention.SDPBackend, backend)):
                t = seconds_per_call(lambda: F.scaled_dot_product_attention(q, q, q), n=3)
            print(f"   {backend}: {t*1e3:.2f} ms", flush=True)
        except Exception as e:
            print(f"   {backend}: not available ({str(e).splitlines()[0][:80]})", flush=True)
