#!/usr/bin/env python3
"""SeedVR2 decode tiles on a trained model: what a tile's norms should see.

Two ways to decode a frame tile by tile, each compared with the untiled decode (relative L2), on the same grid
(vaecodec's: tiles of one size spread evenly, the first at 0 and the last at the far edge, blended with
raised-cosine ramps over their overlaps, Note [Tile blending]):
  - vaecodec's frame tiles (vaecodec.load(tile=, tile_overlap=, norm_context=, tile_norms="frame")): the
    latent-resolution blocks on the whole frame, the up path per tile with exact margins, its norms over the
    tile and `context` latent pixels around it (Note [Norms of tiles through time] in core/split/exact_tiles.h);
  - crop tiles: the whole decoder on the tile's latents plus `margin` latent pixels on every side (clipped to the
    frame), every norm over that crop, the margin discarded. Margin 0 is ComfyUI-SeedVR2's way of tiling.
The second is emulated here in PyTorch (scripts/tiny_vaes.py's module), apart from the engine: the engine's
crop tiles (tile_norms="crop", Note [Crop tiles] in core/split/exact_tiles.h) are tested against it
(python/tests/test_seedvr2_tiles.py).

  scripts/dev/seedvr2_crop_tiles.py [--weights W] [--tile 16] [--overlap 4] [--margins 0,4,8] [--contexts 0,4,8]

The clip: tests/data/wan21-trained/demo_bbb.mp4 (Big Buck Bunny frames 103-131, held out from training), its
first 5 frames, 320x176 of its 320x180, decoded by FFmpeg; decode's latents are vaecodec's untiled encode.
"""

import argparse
import os
import sys

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import train_tiny  # noqa: E402
from seedvr2_peer import vaecodec_spans  # noqa: E402
from tiny_data import ffmpeg_frames  # noqa: E402


def clip(frames):
    path = os.path.join(ROOT, "tests", "data", "wan21-trained", "demo_bbb.mp4")
    arr = ffmpeg_frames("ffmpeg", ["-i", path, "-frames:v", str(frames), "-vf", "crop=320:176"], 320, 176)
    return torch.from_numpy(arr.copy()).permute(3, 0, 1, 2).unsqueeze(0).float() / 127.5 - 1


def ramps(extent, starts, tile):
    """Per tile, weights along one side as the engine's (Note [Tile blending]): 1 inside, a raised cosine
    0.5 - 0.5 cos(pi (x + 0.5) / L) over the L pixels it shares with each neighbour (crop_tiles divides by
    their sum)."""
    def rise(n):
        return 0.5 - 0.5 * torch.cos(torch.pi * (torch.arange(n, dtype=torch.float64) + 0.5) / n)
    out = []
    for i, s in enumerate(starts):
        w = torch.zeros(extent, dtype=torch.float64)
        w[s:s + tile] = 1
        if i > 0 and starts[i - 1] + tile > s:
            n = starts[i - 1] + tile - s
            w[s:s + n] = rise(n)
        if i + 1 < len(starts) and starts[i + 1] < s + tile:
            n = s + tile - starts[i + 1]
            w[starts[i + 1]:s + tile] = torch.minimum(w[starts[i + 1]:s + tile], 1 - rise(n))
        out.append(w)
    return out


def crop_tiles(model, z, whole, grid, margin):
    """The crop tiles' decode on `grid` (the engine's plan: rows and columns of tile_height x tile_width)."""
    h, w = z.shape[-2:]
    scale = whole.shape[-1] // w
    th, tw = grid["tile_height"], grid["tile_width"]
    rows = [r0 for r0, _ in vaecodec_spans(h, th, grid["rows"])]
    cols = [c0 for c0, _ in vaecodec_spans(w, tw, grid["cols"])]
    out, total = torch.zeros_like(whole), torch.zeros(whole.shape[-2:])
    # The ramps run over output pixels, as the engine's do.
    row_ramps = ramps(h * scale, [r * scale for r in rows], th * scale)
    col_ramps = ramps(w * scale, [c * scale for c in cols], tw * scale)
    for r, wr in zip(rows, row_ramps):
        for c, wc in zip(cols, col_ramps):
            r0, r1 = max(r - margin, 0), min(r + th + margin, h)
            c0, c1 = max(c - margin, 0), min(c + tw + margin, w)
            with torch.no_grad():
                y = model.decode(z[..., r0:r1, c0:c1])
            placed = torch.zeros_like(whole)
            placed[..., r0 * scale:r1 * scale, c0 * scale:c1 * scale] = y
            weight = torch.outer(wr, wc)
            out += placed * weight
            total += weight
    return out / total


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--weights", default=os.path.join(ROOT, "tests", "data", "seedvr2-trained", "weights.safetensors"))
    p.add_argument("--tile", type=int, default=16, help="latent pixels")
    p.add_argument("--overlap", type=int, default=4, help="latent pixels")
    p.add_argument("--margins", default="0,4,8")
    p.add_argument("--contexts", default="0,4,8")
    a = p.parse_args()
    import vaecodec

    x = clip(5)
    engine = vaecodec.load(a.weights, device="cpu", dtype="fp32")
    latents = engine.encode(x)
    whole = engine._native.decode(latents)
    module = train_tiny.load("seedvr2", a.weights).float().eval()
    with torch.no_grad():
        mu = module.encode(x)[0]
        own = module.decode(mu)
    rel = lambda y, ref: ((y - ref).norm() / ref.norm()).item()  # noqa: E731
    print(f"untiled: vaecodec against the PyTorch module {rel(whole, own):.1e}; latents {tuple(mu.shape)}")
    tiles = lambda context: vaecodec.load(a.weights, device="cpu", dtype="fp32", tile=(a.tile, a.tile),  # noqa: E731
                                          tile_overlap=a.overlap, norm_context=context, tile_norms="frame")
    grid = tiles(0).plan(list(latents.shape), "decode")["tiles"]  # the same grid at every context
    for context in [int(v) for v in a.contexts.split(",") if v]:
        tiled = tiles(context)
        print(f"vaecodec tiles through time, context {context}: {grid['rows']}x{grid['cols']} tiles, "
              f"relative L2 {rel(tiled._native.decode(latents), whole):.4f}")
    for margin in [int(v) for v in a.margins.split(",")]:
        y = crop_tiles(module, mu, own, grid, margin)
        print(f"crop tiles, margin {margin}: relative L2 {rel(y, own):.4f}")


if __name__ == "__main__":
    main()
