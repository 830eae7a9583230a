# The Wan2.1 encoder written plainly in PyTorch, eager, from the model's specification: every operation in the
# model's dtype, the whole clip at once (equal to the causal chunked run: Note [Causal cache]). It answers one
# question: how far does a plain bf16 run of the same weights land from its own fp32 run? That is the bar for
# vaecodec's bf16 encode (`bench --accuracy`), measured on the same weights and the same input.
#   reference_encoder.py --golden tests/data/wan21-tiny          checks the code against the golden float64 case
#   reference_encoder.py --weights W.pth --size 256x256 --frames 17   bf16 vs fp32 on the GPU, bench's input
import argparse
import json
import math
import struct

import torch
import torch.nn.functional as F


def causal_conv(x, w, b, pad):
    # Spatial padding `pad` on both sides; 2 * pad frames of zeros before frame 0 when the kernel looks back.
    x = F.pad(x, (pad, pad, pad, pad, 2 * pad, 0))
    return F.conv3d(x, w, b)


def rms_norm(x, gamma):
    return F.normalize(x, dim=1) * math.sqrt(x.shape[1]) * gamma


def residual_block(x, p, name):
    h = F.silu(rms_norm(x, p[name + ".residual.0.gamma"]))
    h = causal_conv(h, p[name + ".residual.2.weight"], p[name + ".residual.2.bias"], 1)
    h = F.silu(rms_norm(h, p[name + ".residual.3.gamma"]))
    h = causal_conv(h, p[name + ".residual.6.weight"], p[name + ".residual.6.bias"], 1)
    shortcut = x
    if name + ".shortcut.weight" in p:
        shortcut = F.conv3d(x, p[name + ".shortcut.weight"], p[name + ".shortcut.bias"])
    return h + shortcut


def downsample(x, p, name, temporal):
    w = p[name + ".resample.1.weight"].unsqueeze(2)  # per frame: [C, C, 1, 3, 3]
    x = F.conv3d(F.pad(x, (0, 1, 0, 1)), w, p[name + ".resample.1.bias"], stride=(1, 2, 2))
    if not temporal:
        return x
    # Frame 0 passes untouched; frame j >= 1 is the conv over frames 2j-2, 2j-1, 2j.
    if x.shape[2] == 1:
        return x
    rest = F.conv3d(x, p[name + ".time_conv.weight"], p[name + ".time_conv.bias"], stride=(2, 1, 1))
    return torch.cat([x[:, :, :1], rest], dim=2)


def attention(x, p, name):
    b, c, t, h, w = x.shape
    frames = x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w)
    y = F.normalize(frames, dim=1) * math.sqrt(c) * p[name + ".norm.gamma"]
    qkv = F.conv2d(y, p[name + ".to_qkv.weight"], p[name + ".to_qkv.bias"])
    q, k, v = qkv.reshape(b * t, 1, 3 * c, h * w).permute(0, 1, 3, 2).chunk(3, dim=-1)
    y = F.scaled_dot_product_attention(q, k, v).squeeze(1).permute(0, 2, 1).reshape(b * t, c, h, w)
    y = F.conv2d(y, p[name + ".proj.weight"], p[name + ".proj.bias"])
    return x + y.reshape(b, t, c, h, w).permute(0, 2, 1, 3, 4)


def encode(video, p, mean, std):
    """Normalized mean latents of `video` [B, 3, 1 + 4k, H, W]; p: the weights in the run's dtype."""
    dims = p["encoder.conv1.weight"].shape[0] * torch.tensor([1, 1, 2, 4, 4])
    x = causal_conv(video, p["encoder.conv1.weight"], p["encoder.conv1.bias"], 1)
    i = 0
    for stage in range(4):
        for _ in range(2):
            x = residual_block(x, p, f"encoder.downsamples.{i}")
            i += 1
        if stage < 3:
            x = downsample(x, p, f"encoder.downsamples.{i}", temporal=stage > 0)
            i += 1
    assert x.shape[1] == dims[-1]
    x = residual_block(x, p, "encoder.middle.0")
    x = attention(x, p, "encoder.middle.1")
    x = residual_block(x, p, "encoder.middle.2")
    x = F.silu(rms_norm(x, p["encoder.head.0.gamma"]))
    x = causal_conv(x, p["encoder.head.2.weight"], p["encoder.head.2.bias"], 1)
    x = F.conv3d(x, p["conv1.weight"], p["conv1.bias"])
    z = x.shape[1] // 2
    return (x[:, :z] - mean.view(1, -1, 1, 1, 1)) / std.view(1, -1, 1, 1, 1)


def read_safetensors(path):
    dtypes = {"F64": torch.float64, "F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        start, end = e["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[start:end]), dtype=dtypes[e["dtype"]]).reshape(e["shape"])
    return out


# The published latent statistics of Wan2.1 (16 channels).
MEAN = [-0.7571, -0.7089, -0.9113, 0.1075, -0.1745, 0.9653, -0.1517, 1.5508,
        0.4134, -0.0715, 0.5517, -0.3632, -0.1922, -0.9497, 0.2503, -0.2921]
STD = [2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743,
       3.2687, 2.1526, 2.8652, 1.5579, 1.6382, 1.1253, 2.8251, 1.9160]


def bench_input(width, height, frames):
    """The clip `vaecodec bench` makes (app/cmd_bench.cpp): smooth random content plus a little noise."""
    torch.manual_seed(1)
    coarse = torch.rand(1, 3, frames, height // 8, width // 8) * 2 - 1
    video = F.interpolate(coarse, size=(frames, height, width), mode="trilinear", align_corners=False)
    return video.add_(torch.randn(1, 3, frames, height, width) * 0.05).clamp_(-1, 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--golden")
    ap.add_argument("--weights")
    ap.add_argument("--size", default="256x256")
    ap.add_argument("--frames", type=int, default=17)
    a = ap.parse_args()
    torch.backends.cudnn.allow_tf32 = False  # float32 means float32 (TF32 would blur the bar)
    torch.backends.cuda.matmul.allow_tf32 = False
    with torch.no_grad():
        if a.golden:
            meta = json.load(open(f"{a.golden}/meta.json"))
            p = {k: v.double() for k, v in torch.load(f"{a.golden}/weights.pth").items()}
            cases = read_safetensors(f"{a.golden}/cases.safetensors")
            got = encode(cases["video"].double(), p, torch.tensor(meta["latent_mean"]).double(),
                         torch.tensor(meta["latent_std"]).double())
            want = cases["video_mu"].double()
            print(f"golden video_mu, float64: relative error {((got - want).norm() / want.norm()).item():.3e}")
            return
        width, height = map(int, a.size.split("x"))
        video = bench_input(width, height, a.frames).cuda()
        weights = torch.load(a.weights)
        runs = {}
        for dtype in (torch.float32, torch.bfloat16):
            p = {k: v.to("cuda", dtype) for k, v in weights.items()}
            mean = torch.tensor(MEAN, device="cuda", dtype=dtype)
            std = torch.tensor(STD, device="cuda", dtype=dtype)
            runs[dtype] = encode(video.to(dtype), p, mean, std).double()
        ref = runs[torch.float32]
        err = ((runs[torch.bfloat16] - ref).norm() / ref.norm()).item()
        print(json.dumps({"reference": "plain PyTorch eager", "op": "encode", "size": a.size, "frames": a.frames,
                          "weights": a.weights, "relative_l2_bf16_vs_fp32": err,
                          "torch": torch.__version__, "gpu": torch.cuda.get_device_name()}))


if __name__ == "__main__":
    main()
