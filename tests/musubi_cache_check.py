"""Reads a musubi-tuner Wan latent cache folder the way the trainer does and checks what it expects.

usage: musubi_cache_check.py FOLDER [EXPECTED_FILE_NAME ...]

The trainer (kohya-ss/musubi-tuner, dataset/image_video_dataset.py and dataset/bucket.py) finds its latent
files by globbing "*_wan.safetensors", splits each name at "_" (the size is the second-to-last part, "start-count"
the third-to-last, the item key what precedes), looks for the text-encoder cache "{key}_wan_te.safetensors",
loads the tensors with safetensors.torch.load_file, strips the dtype and the FxHxW suffix from a "latents_" key
and stacks the tensors of a bucket. Prints one JSON line per file with what it read; exits 1 with the reason on
the first mismatch.
"""

import glob
import json
import os
import sys

import torch
from safetensors import safe_open
from safetensors.torch import load_file

DTYPES = {"bfloat16", "float16", "float32"}


def fail(path, why):
    print(f"{os.path.basename(path)}: {why}", file=sys.stderr)
    sys.exit(1)


def check(path):
    tokens = os.path.basename(path).split("_")
    if len(tokens) < 4 or tokens[-1] != "wan.safetensors":
        fail(path, "name does not end in _{start}-{frames}_{W}x{H}_wan.safetensors")
    width, height = (int(v) for v in tokens[-2].split("x"))
    start, frames = (int(v) for v in tokens[-3].split("-")[:2])
    if len(tokens[-2].split("x")[0]) < 4 or len(tokens[-3].split("-")[0]) != 5:
        fail(path, "start must be written with 5 digits and the size with 4 each")
    key = "_".join(tokens[:-3])

    with safe_open(path, framework="pt") as f:
        meta = f.metadata() or {}
    for name, want in (("architecture", "wan"), ("width", str(width)), ("height", str(height)),
                       ("frame_count", str(frames)), ("format_version", "1.0.1")):
        if meta.get(name) != want:
            fail(path, f"metadata {name} is {meta.get(name)!r}, expected {want!r}")

    tensors = load_file(path)
    latents = [k for k in tensors if k.startswith("latents_")]
    if len(latents) != 1 or len(tensors) != 1:
        fail(path, f"expected one latents_ tensor, found {sorted(tensors)}")
    name = latents[0]
    body, dtype = name.rsplit("_", 1)
    if dtype not in DTYPES:
        fail(path, f"dtype suffix {dtype!r}")
    content, fhw = body.rsplit("_", 1)
    if content != "latents":
        fail(path, f"key {name!r} does not strip to 'latents'")
    f_, h_, w_ = (int(v) for v in fhw.split("x"))
    t = tensors[name]
    if str(t.dtype) != "torch." + dtype:
        fail(path, f"tensor is {t.dtype}, its key says {dtype}")
    if list(t.shape) != [16, f_, h_, w_]:
        fail(path, f"shape {list(t.shape)}, expected [16, {f_}, {h_}, {w_}] (C, F, H, W)")
    if f_ != (frames - 1) // 4 + 1 or (frames - 1) % 4 != 0:
        fail(path, f"{frames} frames (1 + 4k) need {(frames - 1) // 4 + 1} latent frames, found {f_}")
    if h_ * 8 != height or w_ * 8 != width or width % 16 or height % 16:
        fail(path, f"latents {h_}x{w_} do not match {width}x{height} (multiples of 16, /8)")
    if not bool(t.float().isfinite().all()):
        fail(path, "latents are not finite")
    return {"file": os.path.basename(path), "key": key, "start": start, "frames": frames, "width": width,
            "height": height, "tensor": name, "shape": list(t.shape), "dtype": dtype,
            "text_encoder_cache": f"{key}_wan_te.safetensors"}


def main():
    folder = sys.argv[1]
    expected = sorted(sys.argv[2:])
    found = sorted(glob.glob(os.path.join(folder, "*_wan.safetensors")))
    names = [os.path.basename(p) for p in found]
    if expected and names != expected:
        fail(folder, f"files {names}, expected {expected}")
    buckets = {}
    for path in found:
        item = check(path)
        print(json.dumps(item))
        buckets.setdefault((item["width"], item["height"], item["frames"]), []).append(path)
    for paths in buckets.values():  # the trainer stacks a bucket's latents into one batch
        torch.stack([next(iter(load_file(p).values())) for p in paths])


if __name__ == "__main__":
    main()
