"""SeedVR2's tiles through time from Python: load()'s tile, tile_overlap and norm_context reach the plan and
the result, and the tiles come closer to the untiled run than ComfyUI-SeedVR2's on the same grid (its figures
measured by scripts/seedvr2_peer.py, recorded in tests/data/seedvr2-peer-tiny.json)."""

import json
import sys

import pytest
import torch

import vaecodec
from conftest import DATA, ROOT, TINY, relative_error

sys.path.insert(0, str(ROOT / "scripts"))
import seedvr2_peer  # noqa: E402  (its helpers import nothing of the peer)

PEER_RECORD = DATA / "seedvr2-peer-tiny.json"


def _latents():
    # One latent frame of 20x12: 1x2 tiles of 12 sharing 4, a second on two cores.
    return torch.randn(1, 16, 1, 12, 20, generator=torch.Generator().manual_seed(3))


def test_tile_options_reach_the_plan():
    m = vaecodec.load(TINY["seedvr2-vae"], device="cpu", tile=10, tile_overlap=4, norm_context=4)
    tiles = m.plan([1, 16, 2, 16, 16], "decode")["tiles"]
    assert (tiles["rows"], tiles["cols"], tiles["overlap"], tiles["context"]) == (2, 2, 4, 4)
    for tile in ((10, 12), "10x12"):
        m = vaecodec.load(TINY["seedvr2-vae"], device="cpu", tile=tile, tile_overlap=6, norm_context=0)
        tiles = m.plan([1, 16, 2, 16, 16], "decode")["tiles"]
        assert (tiles["tile_width"], tiles["tile_height"], tiles["overlap"], tiles["context"]) == (10, 12, 6, 0)
        assert tiles["cols"] == 3  # 16 latent columns in tiles of 10 sharing 6


def test_a_given_norm_context_changes_the_result():
    z = _latents()
    whole = vaecodec.load(TINY["seedvr2-vae"], device="cpu").decode(z)
    errors = {}
    for context in (0, 4):
        m = vaecodec.load(TINY["seedvr2-vae"], device="cpu", tile=12, tile_overlap=4, norm_context=context)
        errors[context] = relative_error(m.decode(z), whole)
    assert errors[4] < errors[0]


def test_bad_tile_options_are_refused_at_load():
    path = TINY["seedvr2-vae"]
    with pytest.raises(ValueError, match=r"tile_overlap -1: from 0 to 2048 latent pixels"):
        vaecodec.load(path, device="cpu", tile_overlap=-1)
    with pytest.raises(ValueError, match=r"norm_context 5000: from 0 to 2048"):
        vaecodec.load(path, device="cpu", norm_context=5000)
    with pytest.raises(ValueError, match=r"tile_norms 'tiles': auto, crop \(each tile's crop at every resolution\) or frame"):
        vaecodec.load(path, device="cpu", tile_norms="tiles")
    with pytest.raises(ValueError, match=r"tile 'ten' is not a tile size"):
        vaecodec.load(path, device="cpu", tile="ten")
    with pytest.raises(TypeError, match="tile_overlap must be a number of latent pixels"):
        vaecodec.load(path, device="cpu", tile_overlap=1.5)
    with pytest.raises(TypeError, match="tile must be a size"):
        vaecodec.load(path, device="cpu", tile=(10, 12, 3))
    m = vaecodec.load(path, device="cpu", tile=4, tile_overlap=4)
    with pytest.raises(ValueError, match="is not larger than its overlap of 4"):
        m.decode(_latents())


def _recorded(record: dict, op: str, run: str) -> dict:
    return next(r for r in record["results"] if r["op"] == op and r["run"] == run)


@pytest.mark.parametrize("op", ["decode", "encode"])
def test_tiles_come_closer_to_the_untiled_run_than_comfyui_seedvr2s(op):
    """The recorded run's input (the clip, its latents for decode), grid and overlap; vaecodec's tiled run
    against its untiled run, as the script measures it, beside the peer's recorded tiled-against-untiled.
    Without a context vaecodec's tiles must be at least as close, with one closer still; in the overlap bands
    closer than the peer's, and no more of a seam (error in the bands against elsewhere) than the peer's."""
    record = json.loads(PEER_RECORD.read_text())
    width, height = record["size"]
    video = seedvr2_peer.clip_video(ROOT / record["clip"], width, height, record["frames"])
    runner = seedvr2_peer.Runner(torch.device("cpu"))
    x = video
    if op == "decode":
        x = runner(lambda: seedvr2_peer.vaecodec_op(vaecodec.load(TINY["seedvr2-vae"], device="cpu"), "encode",
                                                    video))[0]
    assert list(x.shape) == record["inputs"][op]["shape"]
    tile, overlap = record["tile_px"] // 8, record["overlap_px"] // 8
    ours = seedvr2_peer.vaecodec_runs(TINY["seedvr2-vae"], op, x, (tile, tile), overlap, [0, 4], "cpu", "fp32",
                                      runner)
    peer = _recorded(record, op, "ComfyUI-SeedVR2 tiled")
    measured = {}
    for context in (0, 4):
        result, _, grid = ours[f"context {context}"]
        assert [list(s) for s in grid["rows"]] == peer["rows"] and [list(s) for s in grid["cols"]] == peer["cols"]
        band = seedvr2_peer.band_mask(grid["rows"], grid["cols"], result.size(-2), result.size(-1),
                                      8 if op == "decode" else 1)
        measured[context] = seedvr2_peer.compare(result, ours["untiled"][0], band, op == "decode")
        # The same figures as when the record was made: the input is the same.
        want = _recorded(record, op, f"vaecodec tiled, norm context {context}")["relative_l2"]
        assert measured[context]["relative_l2"] == pytest.approx(want, rel=0.05)
    print(f"{op}: relative L2 against the untiled run, ComfyUI-SeedVR2 {peer['relative_l2']:.4f} (recorded), "
          f"vaecodec context 0 {measured[0]['relative_l2']:.4f}, context 4 {measured[4]['relative_l2']:.4f}")
    assert measured[0]["relative_l2"] <= peer["relative_l2"]
    assert measured[4]["relative_l2"] < measured[0]["relative_l2"]
    peer_seam = peer["band_relative_l2"] / peer["elsewhere_relative_l2"]
    for m in measured.values():
        assert m["band_relative_l2"] < peer["band_relative_l2"]
        assert m["band_relative_l2"] / m["elsewhere_relative_l2"] <= max(1.0, peer_seam)


TRAINED = DATA / "seedvr2-trained" / "weights.safetensors"


def test_crop_tiles_are_each_crop_decoded_alone_and_closer_than_frame_tiles_on_the_trained_model():
    """The trained SeedVR2 on five frames of the demo clip (320x176, held out from its training), 2x3 tiles
    of 16 latent px sharing 4: the engine's crop tiles (Note [Crop tiles]) equal the PyTorch module decoding
    each tile's crop and context alone and blending them (scripts/dev/seedvr2_crop_tiles.py, written apart
    from the engine), and they come closer to the untiled decode than the frame tiles of the same grid."""
    sys.path.insert(0, str(ROOT / "scripts" / "dev"))
    import seedvr2_crop_tiles as emulated
    import train_tiny

    x = emulated.clip(5)
    whole_model = vaecodec.load(TRAINED, device="cpu", dtype="fp32")
    z = whole_model.encode(x)
    whole = whole_model._native.decode(z)
    module = train_tiny.load("seedvr2", str(TRAINED)).float().eval()
    errors = {}
    for norms in ("crop", "frame"):
        for context in (0, 4):
            m = vaecodec.load(TRAINED, device="cpu", dtype="fp32", tile=16, tile_overlap=4, norm_context=context,
                              tile_norms=norms)
            plan = m.plan(list(z.shape), "decode")
            assert plan["tile_kind"] == ("crop" if norms == "crop" else "through time")
            assert (plan["tiles"]["rows"], plan["tiles"]["cols"]) == (2, 3)
            tiled = m._native.decode(z)
            errors[norms, context] = relative_error(tiled, whole)
            if norms == "crop":
                with torch.no_grad():
                    own = module.decode(z)
                    want = emulated.crop_tiles(module, z, own, plan["tiles"], context)
                assert relative_error(tiled, want) < 1e-4
    print("trained SeedVR2 decode tiles against untiled: " +
          ", ".join(f"{n} context {c} {e:.4f}" for (n, c), e in errors.items()))
    # Measured: crop 0.134 / 0.117, frame 0.496 / 0.291 (docs/benchmarks.md, "crop tiles").
    assert errors["crop", 4] < errors["crop", 0] < 0.2
    assert errors["crop", 0] < 0.5 * errors["frame", 0] and errors["crop", 4] < 0.5 * errors["frame", 4]
