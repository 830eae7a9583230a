# The model calls musubi-tuner's wan_cache_latents.py pays for a dataset: every window `encode
# --dataset-config --dry-run --json` lists, encoded in one PyTorch process by the plain eager Wan2.1 encoder
# (scripts/dev/reference_encoder.py), bf16 on the GPU, one window per call as the trainer's default batch of one
# bucket. The frames are those vaecodec encodes (ffmpeg with the item's own --vf, to RGB), read before timing:
# only the encoder calls are timed, as the cost of the trainer's VAE, not of its decoding.
#   musubi_reference_cache.py PLAN.jsonl WEIGHTS.pth [--compare]   one JSON line: windows, seconds, windows/s
import argparse
import json
import subprocess
import sys
import time

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from reference_encoder import MEAN, STD, encode, read_safetensors  # noqa: E402


def frames_of(item):
    w, h = item["bucket"]
    args = ["ffmpeg", "-v", "error", "-i", item["input"]]
    if item["vf"]:
        args += ["-vf", item["vf"]]
    raw = subprocess.run(args + ["-f", "rawvideo", "-pix_fmt", "rgb24", "-"], check=True, capture_output=True).stdout
    video = torch.frombuffer(bytearray(raw), dtype=torch.uint8).reshape(-1, h, w, 3)
    assert video.shape[0] == item["frames"], (item["cache_file"], video.shape)
    return video.permute(3, 0, 1, 2).unsqueeze(0)  # [1, 3, F, H, W]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("plan")
    ap.add_argument("weights")
    ap.add_argument("--compare", action="store_true", help="relative error against vaecodec's cache files")
    a = ap.parse_args()
    items = [j for j in map(json.loads, open(a.plan)) if "cache_file" in j]
    p = {k: v.to("cuda", torch.bfloat16) for k, v in torch.load(a.weights).items()}
    mean = torch.tensor(MEAN, device="cuda", dtype=torch.bfloat16)
    std = torch.tensor(STD, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        encode(frames_of(items[0]).cuda().to(torch.bfloat16) / 127.5 - 1, p, mean, std)  # warm-up, not timed
        torch.cuda.synchronize()
        model_s, errors = 0.0, []
        for item in items:
            video = frames_of(item).cuda()
            torch.cuda.synchronize()
            start = time.perf_counter()
            z = encode(video.to(torch.bfloat16) / 127.5 - 1, p, mean, std)
            torch.cuda.synchronize()
            model_s += time.perf_counter() - start
            if a.compare and len(errors) < 8:
                ours = next(v for k, v in read_safetensors(item["cache_file"]).items() if k.startswith("latents_"))
                ref = z[0].float().cpu()
                errors.append(((ours.float() - ref).norm() / ref.norm()).item())
    print(json.dumps({"reference": "plain PyTorch eager Wan2.1 encoder, bf16, one window per call",
                      "windows": len(items), "model_seconds": model_s, "windows_per_s": len(items) / model_s,
                      "relative_l2_vs_vaecodec": errors, "gpu": torch.cuda.get_device_name()}))


if __name__ == "__main__":
    main()
