"""The training data of scripts/train_tiny.py as a small pack, for a GPU machine without FFmpeg.

A device call carries at most 64 MiB with the working tree, and a static FFmpeg alone is about 48 MB xz'd. So
the pack holds what FFmpeg is needed for, made here, and leaves the rest to the GPU machine's own libraries:
  - the three mp4s as they are (2.2 MB), decoded there by OpenCV's bundled FFmpeg and scaled by area averaging
    (every training size is the clip's size divided by 1, 2 or 4, where area averaging is a box filter);
  - each texture as raw RGB, xz'd, rendered by FFmpeg without its last steps: a trailing temporal `noise` filter
    is added there (uniform integers in [-strength, strength], per pixel and frame, from a seeded generator) and
    a trailing bicubic `scale` there too (PyTorch's bicubic), since upscaled changing frames compress badly.
The arrays it gives differ from `prepare --clips`'s by rounding (the clips: +-2 levels) and in the noise's
draws; the meta.json of a run says which way its data was made.

  scripts/train_tiny.py pack --clips DIR --out PACK [--ffmpeg BIN]       here, with FFmpeg
  scripts/train_tiny.py prepare --pack PACK --out DATA                   there, with OpenCV and PyTorch
"""

import json
import lzma
import os
import re
import shutil
import subprocess
import time

import numpy as np

NOISE = re.compile(r",noise=alls=(\d+):allf=t$")
SCALE = re.compile(r",scale=(\d+):(\d+):flags=bicubic$")


def split_graph(graph):
    """(graph FFmpeg renders here, noise strength or 0, (w, h) of a trailing bicubic scale or None)."""
    strength = 0
    m = NOISE.search(graph)
    if m:
        strength, graph = int(m.group(1)), graph[: m.start()]
    scale = None
    m = SCALE.search(graph)
    if m:
        scale, graph = (int(m.group(1)), int(m.group(2))), graph[: m.start()]
    return graph, strength, scale


def graph_size(graph):
    w, h = (int(v) for v in graph.split("size=")[1].split(":")[0].split("x"))
    m = re.search(r"scale=(\d+):(\d+)", graph)
    return (int(m.group(1)), int(m.group(2))) if m else (w, h)


def pack(clips, out, ffmpeg, textures, frames, clip_names):
    os.makedirs(out, exist_ok=True)
    for name in clip_names:
        shutil.copyfile(os.path.join(clips, name), os.path.join(out, name))
    index = {}
    for name, full in textures.items():
        graph, strength, scale = split_graph(full)
        w, h = graph_size(graph)
        cmd = [ffmpeg, "-v", "error", "-nostdin", "-f", "lavfi", "-i", graph, "-frames:v", str(frames),
               "-f", "rawvideo", "-pix_fmt", "rgb24", "-"]
        raw = subprocess.run(cmd, check=True, stdout=subprocess.PIPE).stdout
        if len(raw) != frames * w * h * 3:
            raise SystemExit(f"tiny_pack.py: {name}: {len(raw)} bytes from FFmpeg, expected {frames}x{w}x{h}x3")
        with lzma.open(os.path.join(out, f"tex_{name}.rgb.xz"), "wb", preset=9) as f:
            f.write(raw)
        index[name] = {"graph": graph, "size": [w, h], "frames": frames, "noise": strength, "scale": scale,
                       "full_graph": full}
    with open(os.path.join(out, "pack.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")


def decode_clip_cv2(path, first, end, width, height):
    """Frames [first, end) of an mp4 scaled to width x height by area averaging, cropped to multiples of 8
    (centred), as uint8 RGB [T, H, W, 3]."""
    import cv2

    cap = cv2.VideoCapture(path)
    if not cap.isOpened():
        raise SystemExit(f"tiny_pack.py: OpenCV cannot open {path}")
    out = []
    i = 0
    while i < end:
        ok, bgr = cap.read()
        if not ok:
            break
        if i >= first:
            img = cv2.resize(bgr, (width, height), interpolation=cv2.INTER_AREA)
            out.append(img[:, :, ::-1])
        i += 1
    cap.release()
    if not out:
        raise SystemExit(f"tiny_pack.py: no frames [{first}, {end}) in {path}")
    w8, h8 = width // 8 * 8, height // 8 * 8
    y0, x0 = (height - h8) // 2, (width - w8) // 2
    return np.ascontiguousarray(np.stack(out)[:, y0:y0 + h8, x0:x0 + w8])


def texture(pack_dir, name, entry, seed):
    import torch
    import torch.nn.functional as F

    w, h = entry["size"]
    with lzma.open(os.path.join(pack_dir, f"tex_{name}.rgb.xz")) as f:
        arr = np.frombuffer(f.read(), np.uint8).reshape(entry["frames"], h, w, 3)
    x = torch.from_numpy(arr.copy())
    if entry["scale"]:
        sw, sh = entry["scale"]
        y = F.interpolate(x.permute(0, 3, 1, 2).float(), size=(sh, sw), mode="bicubic", align_corners=False)
        x = y.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1)
    if entry["noise"]:
        s = entry["noise"]
        g = torch.Generator().manual_seed(seed)
        noise = torch.randint(-s, s + 1, x.shape, generator=g, dtype=torch.int16)
        x = (x.to(torch.int16) + noise).clamp(0, 255).to(torch.uint8)
    return x.contiguous().numpy()


def prepare_from_pack(pack_dir, out, real_train, held_out, log):
    t0 = time.time()
    os.makedirs(out, exist_ok=True)
    for name, (file, first, end, sizes) in real_train.items():
        for w, h in sizes:
            frames = decode_clip_cv2(os.path.join(pack_dir, file), first, end, w, h)
            np.save(os.path.join(out, f"train_{name}_{w}x{h}.npy"), frames)
            log(f"train_{name}_{w}x{h}: {frames.shape}")
    with open(os.path.join(pack_dir, "pack.json")) as f:
        index = json.load(f)
    for i, (name, entry) in enumerate(sorted(index.items())):
        frames = texture(pack_dir, name, entry, seed=1000 + i)
        t, h, w, _ = frames.shape
        np.save(os.path.join(out, f"train_tex_{name}_{w}x{h}.npy"), frames)
        log(f"train_tex_{name}: {frames.shape}")
    for name, (file, first, end, w, h) in held_out.items():
        frames = decode_clip_cv2(os.path.join(pack_dir, file), first, end, w, h)
        np.save(os.path.join(out, f"heldout_{name}.npy"), frames)
        log(f"heldout_{name}: {frames.shape}")
    with open(os.path.join(out, "prepared.json"), "w") as f:
        json.dump({"from": "pack (scripts/tiny_pack.py): clips decoded by OpenCV, textures' last noise and "
                           "bicubic scale by PyTorch"}, f)
    log(f"prepared from the pack in {time.time() - t0:.1f} s")
