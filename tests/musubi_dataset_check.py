"""Derives the latent caches musubi-tuner's wan_cache_latents.py makes for a dataset config, and checks a run's.

usage: musubi_dataset_check.py CONFIG.toml FACTS.json [DTYPE]

FACTS.json gives what the test generated, by path as the config's inputs name them:
{"clips/a.mp4": {"frames": 40, "width": 80, "height": 48}, "clips/broken.mp4": {"broken": true}, ...}.
The expected files follow the trainer's own rules (kohya-ss/musubi-tuner at commit 30c658c:
dataset/config_utils.py, image_video_dataset.py, datasources.py, media_utils.py, bucket.py, cache_io.py),
written here from those rules, apart from vaecodec's implementation. Every cache_directory must hold exactly
those files (a broken input makes none); each file must hold the tensors the trainer writes ("latents_" and,
with a control, "latents_control_", [16, F, H/8, W/8] in DTYPE) and its metadata. Prints one JSON line per file;
exits 1 with the reason at the first mismatch.
"""

import glob
import json
import math
import os
import sys
import tomllib

from safetensors import safe_open

VIDEO_EXTS = [".mp4", ".webm", ".avi", ".mkv", ".mov", ".flv", ".wmv", ".m4v", ".mpg", ".mpeg"]
VIDEO_EXTS += [e.upper() for e in VIDEO_EXTS]
IMAGE_EXTS = [".png", ".jpg", ".jpeg", ".webp", ".bmp", ".avif"]
IMAGE_EXTS += [e.upper() for e in IMAGE_EXTS]


def fail(why):
    print(why, file=sys.stderr)
    sys.exit(1)


def glob_ext(directory, exts):
    found = set()
    for ext in exts:
        found.update(glob.glob(os.path.join(glob.escape(directory), "*" + ext)))
    return sorted(found)


def buckets(resolution, enable_bucket, no_upscale):
    if not enable_bucket:
        return [tuple(resolution)], False
    area = resolution[0] * resolution[1]
    side = int(math.sqrt(area))
    smallest = (side // 2) - (side // 2) % 16
    sizes = set()
    for w in range(smallest, side + 16, 16):
        h = area // w - (area // w) % 16
        sizes.add((w, h))
        sizes.add((h, w))
    return sorted(sizes), no_upscale


def select_bucket(candidates, no_upscale, resolution, size):
    if no_upscale and size[0] * size[1] <= resolution[0] * resolution[1]:
        return size[0] - size[0] % 16, size[1] - size[1] % 16
    aspect = size[0] / size[1]
    errors = [abs(w / h - aspect) for w, h in candidates]
    return candidates[errors.index(min(errors))]


def converted(frames, source_fps, bound):
    if source_fps is None:
        return min(frames, bound) if bound is not None else frames
    step = 16.0 / source_fps
    total, previous, kept = 0.0, -1, 0
    for _ in range(frames):
        index = int(total)
        total += step
        if index == previous:
            continue
        previous = index
        if bound is not None and index >= bound:
            break
        kept += 1
    return kept


def linspace_ints(stop, num):
    if num == 1:
        return [0]
    step = stop / (num - 1)
    return [int(stop if k == num - 1 else k * step) for k in range(num)]


def windows(d, frames):
    mode = d["frame_extraction"]
    targets = sorted(set((f - 1) // 4 * 4 + 1 for f in set(d["target_frames"])))
    if mode == "uniform" and d["frame_sample"] == 1:
        mode = "head"
    out = []
    if mode == "full":
        t = min(frames, d["max_frames"])
        return [(0, (t - 1) // 4 * 4 + 1)]
    for t in targets:
        if mode == "head" and frames >= t:
            out.append((0, t))
        elif mode == "chunk":
            out += [(i, t) for i in range(0, frames, t) if i + t <= frames]
        elif mode == "slide" and frames >= t:
            out += [(i, t) for i in range(0, frames - t + 1, d["frame_stride"])]
        elif mode == "uniform" and frames >= t:
            out += [(i, t) for i in linspace_ints(frames - t, d["frame_sample"])]
    return out


def expected_files(config, facts):
    general = config.get("general", {})
    expected = {}  # cache directory -> {file name: (latent shape, metadata, has control)}
    for entry in config["datasets"]:
        d = {"resolution": (960, 544), "enable_bucket": False, "bucket_no_upscale": False,
             "caption_extension": None, "target_frames": [1], "frame_extraction": "head", "frame_stride": 1,
             "frame_sample": 1, "max_frames": 129, "source_fps": None}
        for source in (general, entry):
            d.update({k: v for k, v in source.items()})
        if isinstance(d["resolution"], int):
            d["resolution"] = (d["resolution"], d["resolution"])
        if entry.get("multiple_target") or entry.get("no_resize_control") or "control_resolution" in entry:
            continue  # caches vaecodec does not make: it leaves these datasets out (and says so)
        image = "video_directory" not in entry and "video_jsonl_file" not in entry
        directory = entry.get("image_directory" if image else "video_directory")
        cache = entry.get("cache_directory", directory)
        files = expected.setdefault(cache, {})
        if image:
            candidates, no_upscale = buckets(d["resolution"], d["enable_bucket"], d["bucket_no_upscale"])
        else:  # the cache step buckets clips by aspect ratio whatever the config says
            candidates, no_upscale = buckets(d["resolution"], True, False)
        if directory:
            inputs = glob_ext(directory, IMAGE_EXTS if image else VIDEO_EXTS)
            if image and d["caption_extension"]:
                inputs = [p for p in inputs if os.path.exists(os.path.splitext(p)[0] + d["caption_extension"])]
        else:
            with open(entry["image_jsonl_file" if image else "video_jsonl_file"]) as f:
                inputs = [json.loads(line)["image_path" if image else "video_path"] for line in f if line.strip()]
        for path in inputs:
            fact = facts[path]
            if fact.get("broken"):
                continue
            stem = os.path.splitext(os.path.basename(path))[0]
            size = (fact["width"], fact["height"])
            bucket = select_bucket(candidates, no_upscale, d["resolution"], size)
            control = "control_directory" in entry or "control" in fact
            if image:
                name = f"{stem}_{size[0]:04d}x{size[1]:04d}_wan.safetensors"
                files[name] = ([16, 1, bucket[1] // 8, bucket[0] // 8],
                               {"width": str(size[0]), "height": str(size[1])}, control)
                continue
            mode = d["frame_extraction"]
            head = mode == "head" or (mode == "uniform" and d["frame_sample"] == 1)
            bound = max((f - 1) // 4 * 4 + 1 for f in d["target_frames"]) if head else None
            frames = converted(fact["frames"], d["source_fps"], bound)
            for start, t in windows(d, frames):
                name = f"{stem}_{start:05d}-{t:03d}_{bucket[0]:04d}x{bucket[1]:04d}_wan.safetensors"
                files[name] = ([16, (t - 1) // 4 + 1, bucket[1] // 8, bucket[0] // 8],
                               {"width": str(bucket[0]), "height": str(bucket[1]), "frame_count": str(t)},
                               control)
    return expected


def main():
    with open(sys.argv[1], "rb") as f:
        config = tomllib.load(f)
    with open(sys.argv[2]) as f:
        facts = json.load(f)
    dtype = sys.argv[3] if len(sys.argv) > 3 else "bfloat16"
    for cache, files in expected_files(config, facts).items():
        found = sorted(os.path.basename(p) for p in glob.glob(os.path.join(cache, "*_wan.safetensors")))
        if found != sorted(files):
            fail(f"{cache}: files {found}, expected {sorted(files)}")
        for name, (shape, want_meta, control) in sorted(files.items()):
            path = os.path.join(cache, name)
            with safe_open(path, framework="pt") as f:
                meta = f.metadata() or {}
                tensors = {k: f.get_tensor(k) for k in f.keys()}
            want_keys = {"latents_" + "x".join(map(str, shape[1:])) + "_" + dtype}
            if control:
                want_keys.add("latents_control_" + "x".join(map(str, shape[1:])) + "_" + dtype)
            if set(tensors) != want_keys:
                fail(f"{name}: tensors {sorted(tensors)}, expected {sorted(want_keys)}")
            for key, t in tensors.items():
                if list(t.shape) != shape or str(t.dtype) != "torch." + dtype:
                    fail(f"{name}: {key} is {list(t.shape)} {t.dtype}, expected {shape} {dtype}")
                if not bool(t.float().isfinite().all()):
                    fail(f"{name}: {key} is not finite")
            want_meta = dict(want_meta, architecture="wan", format_version="1.0.1")
            got = {k: v for k, v in meta.items() if k != "vaecodec"}
            if got != want_meta:
                fail(f"{name}: metadata {got}, expected {want_meta}")
            print(json.dumps({"file": os.path.join(cache, name), "tensors": sorted(tensors), "shape": shape}))


if __name__ == "__main__":
    main()
