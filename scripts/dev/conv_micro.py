# Micro-benchmark of the Wan decoder's big convolutions in several formulations (bf16, H100).
import torch
from gpu_timing import seconds_per_call
torch.backends.cudnn.benchmark = True
torch.backends.cuda.matmul.allow_tf32 = False
dev = "cuda"

def case(cin, cout, H, W, tout, label):
    x = torch.randn(1, cin, tout + 2, H, W, device=dev, dtype=torch.bfloat16)
    w = torch.randn(cout, cin, 3, 3, 3, device=dev, dtype=torch.bfloat16) * 0.05
    b = torch.zeros(cout, device=dev, dtype=torch.bfloat16)
    flops = 2 * cout * cin * 27 * tout * H * W
    res = {}
    res["ncdhw"] = seconds_per_call(lambda: torch.nn.functional.conv3d(x, w, b, padding=(0, 1, 1)))
    xc = x.contiguous(memory_format=torch.channels_last_3d)
    wc = w.contiguous(memory_format=torch.channels_last_3d)
    res["cl3d"] = seconds_per_call(lambda: torch.nn.functional.conv3d(xc, wc, b, padding=(0, 1, 1)))
    # 2-D conv per input frame producing 3 temporal taps, then shifted sum.
    x2 = xc.permute(0, 2, 1, 3, 4).reshape(tout + 2, cin, H, W).contiguous(memory_format=torch.channels_last)
    w2 = w.permute(2, 0, 1, 3, 4).reshape(3 * cout, cin, 3, 3).contiguous(memory_format=torch.channels_last)
    def taps():
        y = torch.nn.functional.conv2d(x2, w2, None, padding=1)  # [T+2, 3*cout, H, W]
        y = y.view(tout + 2, 3, cout, H, W)
        return y[0:tout, 0] + y[1:tout + 1, 1] + y[2:tout + 2, 2]
    res["taps2d"] = seconds_per_call(taps)
    # Three conv2d over time-batched frames, accumulated.
    ws = [w[:, :, k].contiguous(memory_format=torch.channels_last) for k in range(3)]
    def three():
        acc = torch.nn.functional.conv2d(x2[0:tout], ws[0], b, padding=1)
        acc += torch.nn.functional.conv2d(x2[1:tout + 1], ws[1], None, padding=1)
        acc += torch.nn.functional.conv2d(x2[2:tout + 2], ws[2], None, padding=1)
        return acc
    res["three2d"] = seconds_per_call(three)
    # im2col over time only: stack 3 frames along channels, one conv2d with 3*cin inputs.
    def stacked():
        xs = torch.cat([x2[0:tout], x2[1:tout + 1], x2[2:tout + 2]], 1)
        return torch.nn.functional.conv2d(xs, w.permute(0, 2, 1, 3, 4).reshape(cout, 3 * cin, 3, 3), b, padding=1)
    res["stack2d"] = seconds_per_call(stacked)
    print(label, " ".join(f"{k}={v*1e3:.2f}ms/{flops/v/1e12:.0f}TF" for k, v in res.items()), flush=True)

print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), torch.cuda.get_device_name())
for tout in (4, 8):
    case(96, 96, 720, 1280, tout, f"96->96 720p t={tout}")
    case(192, 192, 360, 640, tout, f"192->192 360p t={tout}")
    case(384, 384, 180, 320, tout, f"384->384 180p t={tout}")
    case(384, 384, 90, 160, tout, f"384->384 90p t={tout}")
case(96, 3, 720, 1280, 4, "96->3 head 720p t=4")
# elementwise bandwidth reference
x = torch.randn(1, 96, 4, 720, 1280, device=dev, dtype=torch.bfloat16)
t = seconds_per_call(lambda: x * 2)
print(f"copy-like op 96x4x720p: {t*1e3:.2f} ms = {2*x.numel()*2/t/1e9:.0f} GB/s")
xc = x.contiguous(memory_format=torch.channels_last_3d)
t = seconds_per_call(lambda: xc.contiguous())
print(f"cl3d->ncdhw transpose: {t*1e3:.2f} ms")
