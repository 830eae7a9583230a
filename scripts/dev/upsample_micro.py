# Micro-benchmark of the Wan decoders' spatial upsampling (nearest 2x, then a 3x3 convolution), bf16,
# channels-last, on the GPU: as the reference writes it, against the same function computed on the low-resolution
# input - each of the four output phases is a 2x2 convolution of the input (the 3x3 taps that land on the same
# input pixel summed), so one 2x2 convolution with 4x the output channels and an interleave give the result with
# 16 instead of 36 multiply-adds per input pixel and output channel.
import time

import torch
import torch.nn.functional as F

from gpu_timing import seconds_per_call

torch.backends.cudnn.benchmark = True
dev = "cuda"
bf = torch.bfloat16
cl = torch.channels_last


def phase_weights(w):
    # w: [O, I, 3, 3] -> [4 * O, I, 2, 2], phases (a, b) in order 00, 01, 10, 11.
    rows = [
        [w[:, :, 0], w[:, :, 1] + w[:, :, 2]],  # a = 0: input rows i-1, i
        [w[:, :, 0] + w[:, :, 1], w[:, :, 2]],  # a = 1: input rows i, i+1
    ]
    out = []
    for a in range(2):
        r = torch.stack(rows[a], 2)  # [O, I, 2, 3]
        cols = [
            [r[..., 0], r[..., 1] + r[..., 2]],
            [r[..., 0] + r[..., 1], r[..., 2]],
        ]
        for b in range(2):
            out.append(torch.stack(cols[b], 3))  # [O, I, 2, 2]
    return torch.cat(out, 0)


def subpixel(x, wp, bias):
    n, c, h, w = x.shape
    o = wp.shape[0] // 4
    r = F.conv2d(F.pad(x, (1, 1, 1, 1)), wp, None)  # [N, 4 * O, H + 1, W + 1]
    out = torch.empty(n, o, 2 * h, 2 * w, device=x.device, dtype=x.dtype).contiguous(memory_format=cl)
    view = out.view(n, o, h, 2, w, 2)
    for a in range(2):
        for b in range(2):
            k = 2 * a + b
            view[:, :, :, a, :, b] = r[:, k * o:(k + 1) * o, a:a + h, b:b + w]
    out += bias.view(1, o, 1, 1)
    return out


def case(cin, cout, h, w, frames, label):
    x = torch.randn(frames, cin, h, w, device=dev, dtype=bf).contiguous(memory_format=cl)
    wt = (torch.randn(cout, cin, 3, 3, device=dev, dtype=torch.float32) / (cin * 9) ** 0.5)
    bias = torch.randn(cout, device=dev, dtype=bf) * 0.02
    w16 = wt.to(bf).contiguous(memory_format=cl)
    wp = phase_weights(wt).to(bf).contiguous(memory_format=cl)

    def reference():
        up = F.interpolate(x, scale_factor=2.0, mode="nearest-exact")
        return F.conv2d(up, w16, bias, padding=1)

    ref64 = F.conv2d(F.interpolate(x.double(), scale_factor=2.0, mode="nearest"), wt.double(), bias.double(), padding=1)
    sub64 = subpixel(x.double().contiguous(memory_format=cl), phase_weights(wt.double()), bias.double())
    exact = ((sub64 - ref64).norm() / ref64.norm()).item()
    err_ref = ((reference().double() - ref64).norm() / ref64.norm()).item()
    err_sub = ((subpixel(x, wp, bias).double() - ref64).norm() / ref64.norm()).item()
    t_ref = seconds_per_call(reference)
    t_sub = seconds_per_call(lambda: subpixel(x, wp, bias))
    flops = 2 * frames * cout * cin * 9 * 4 * h * w
    print(f"{label}: reference {t_ref * 1e3:.2f} ms ({flops / t_ref / 1e12:.0f} TFLOP/s of the model's FLOPs), "
          f"phases {t_sub * 1e3:.2f} ms ({flops / t_sub / 1e12:.0f}); float64 difference {exact:.1e}; bf16 against "
          f"float64: reference {err_ref:.2e}, phases {err_sub:.2e}", flush=True)


print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), torch.cuda.get_device_name())
case(384, 192, 90, 160, 2, "upsamples.3  384->192 to 320x180, 2 frames")
case(384, 192, 180, 320, 4, "upsamples.7  384->192 to 640x360, 4 frames")
case(192, 96, 360, 640, 4, "upsamples.11 192->96 to 1280x720, 4 frames")
