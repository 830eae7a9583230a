"""Seed corpora for the fuzz targets, made from tests/data: small files of each format that load.

usage: make_seeds.py OUT_DIR   (writes OUT_DIR/{safetensors,pth,latent,detect}/*)
Needs torch (the project's .venv) for the .pth seeds; the rest is the standard library.
"""

import io
import json
import pathlib
import struct
import sys
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
MODELS = ["wan21-tiny", "wan22-tiny", "seedvr2-tiny"]


def read_safetensors(path):
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    return header, raw[8 + n :]


def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: (dtype, shape, bytes)}"""
    header, data = {}, b""
    for name, (dtype, shape, payload) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def small_tensors(model, limit_bytes=256, count=12):
    """The smallest tensors of a tiny model's weights, with their bytes."""
    header, data = read_safetensors(DATA / model / "weights.safetensors")
    entries = [(k, v) for k, v in header.items() if k != "__metadata__"]
    entries.sort(key=lambda kv: kv[1]["data_offsets"][1] - kv[1]["data_offsets"][0])
    out = {}
    for name, spec in entries[:count]:
        b, e = spec["data_offsets"]
        if e - b <= limit_bytes:
            out[name] = (spec["dtype"], spec["shape"], data[b:e])
    return out, header


def latent_record(family, channels, frames):
    return {
        "format_version": 1, "vaecodec_version": "0.1.0",
        "model": {"family": family, "config": {"z_dim": channels}},
        "latent_channels": channels, "latent_scale": {"factor": 1.0, "applied": False},
        "width": 16, "height": 16, "padded_width": 16, "padded_height": 16,
        "frames": frames, "padded_frames": frames,
        "frame_rate": {"num": 24, "den": 1}, "time_base": {"num": 1, "den": 24}, "pts": list(range(frames)),
        "colour": {"primaries": "bt709", "transfer": "bt709", "matrix": "bt709", "range": "tv",
                   "chroma_location": "left"},
        "pixel_format": "yuv420p", "has_audio": False, "source": "clip.mp4",
    }


def main():
    out = pathlib.Path(sys.argv[1])
    for sub in ["safetensors", "pth", "latent", "detect"]:
        (out / sub).mkdir(parents=True, exist_ok=True)

    for model in MODELS:
        tensors, header = small_tensors(model)
        write_safetensors(out / "safetensors" / f"{model}.safetensors", tensors)
        write_safetensors(out / "safetensors" / f"{model}-meta.safetensors", tensors,
                          {"format": "pt", "vaecodec_config": json.dumps({"norm_num_groups": 8})})
        # Shapes only, for detection: the whole tiny model.
        shapes = {k: v["shape"] for k, v in header.items() if k != "__metadata__"}
        (out / "detect" / f"{model}.json").write_text(json.dumps(shapes))
    for keys in DATA.glob("*-released-keys.json"):
        (out / "detect" / keys.name).write_bytes(keys.read_bytes())

    # Latents: vaecodec's own file with its record, ComfyUI's .latent, a bare 5-D tensor.
    for channels, frames in [(16, 3), (48, 1)]:
        shape = [1, channels, 1, 2, 2]
        payload = struct.pack(f"<{channels * 4}f", *[0.25 * (i % 7) for i in range(channels * 4)])
        record = json.dumps(latent_record("wan2.1-vae" if channels == 16 else "wan2.2-vae", channels, frames))
        write_safetensors(out / "latent" / f"vaecodec-{channels}.safetensors",
                          {"latents": ("F32", shape, payload)}, {"vaecodec": record})
        write_safetensors(out / "latent" / f"comfy-{channels}.latent",
                          {"latent_tensor": ("F32", shape, payload), "latent_format_version_0": ("F32", [0], b"")},
                          {"vaecodec": record})
        write_safetensors(out / "latent" / f"bare-{channels}.safetensors", {"z": ("F32", shape, payload)})
    half = struct.pack("<8e", *[0.5] * 8)
    write_safetensors(out / "latent" / "f16.safetensors", {"latents": ("F16", [1, 2, 1, 2, 2], half)})

    # .pth: the real tiny checkpoint's pickle (the target wraps it in a zip), and small torch.save files of
    # the smallest tensors (whole zips, and their pickles).
    with zipfile.ZipFile(DATA / "wan21-tiny" / "weights.pth") as z:
        pickle = next(n for n in z.namelist() if n.endswith("/data.pkl"))
        (out / "pth" / "wan21-tiny.pkl").write_bytes(z.read(pickle))
    import torch

    tensors, _ = small_tensors("wan21-tiny", count=6)
    state = {name: torch.frombuffer(bytearray(payload), dtype=torch.float32).reshape(shape).clone()
             for name, (_, shape, payload) in tensors.items()}
    first = next(iter(state.values()))
    for label, obj in [("flat", state), ("nested", {"state_dict": state, "epoch": 3, "lr": 0.5}),
                       ("view", {"w": first.flatten()[1:], "t": first.reshape(-1, 1).t()}),
                       ("half", {k: v.half() for k, v in state.items()})]:
        buffer = io.BytesIO()
        torch.save(obj, buffer)
        (out / "pth" / f"{label}.pth").write_bytes(buffer.getvalue())
        with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as z:
            pickle = next(n for n in z.namelist() if n.endswith("/data.pkl"))
            (out / "pth" / f"{label}.pkl").write_bytes(z.read(pickle))


if __name__ == "__main__":
    main()
