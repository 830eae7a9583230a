"""SeedVR2's tiles through time from Python: load()'s tile, tile_overlap, norm_context and tile_norms reach the
plan and the result, and the tiles come at least as close to the untiled run as ComfyUI-SeedVR2's on the same
grid (its figures measured by scripts/seedvr2_peer.py, recorded in tests/data/seedvr2-peer-tiny.json for the
random tiny model and tests/data/seedvr2-peer-trained.json for the trained one)."""

import json
import sys

import pytest
import torch

import vaecodec
from conftest import DATA, ROOT, TINY, relative_error

sys.path.insert(0, str(ROOT / "scripts"))
import seedvr2_peer  # noqa: E402  (its helpers import nothing of the peer)

TRAINED = DATA / "seedvr2-trained" / "weights.safetensors"


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


# The kinds of tiles load() runs by default (tile_norms "auto"): crop tiles decode, frame tiles encode.
DEFAULT_KIND = {"decode": "crop", "encode": "frame"}


@pytest.mark.parametrize("record_name, op", [("tiny", "decode"), ("tiny", "encode"), ("trained", "decode"),
                                             ("trained", "encode")])
def test_tiles_are_at_least_as_close_to_the_untiled_run_as_comfyui_seedvr2s(record_name, op):
    """The recorded run's input (the clip, its latents for decode), grid and overlap on the random tiny model
    and on the trained one; vaecodec's tiles of the default kind against its untiled run, as the script
    measures them, beside the peer's recorded tiled-against-untiled. Without a context vaecodec's tiles must be
    at least as close as the peer's (its crop tiles are the peer's way, to 1%), with the largest context
    recorded closer, in the overlap bands too."""
    weights = {"tiny": TINY["seedvr2-vae"], "trained": TRAINED}[record_name]
    record = json.loads((DATA / f"seedvr2-peer-{record_name}.json").read_text())
    width, height = record["size"]
    video = seedvr2_peer.clip_video(ROOT / record["clip"], width, height, record["frames"])
    runner = seedvr2_peer.Runner(torch.device("cpu"))
    x = video
    if op == "decode":
        x = runner(lambda: seedvr2_peer.vaecodec_op(vaecodec.load(weights, device="cpu"), "encode", video))[0]
    assert list(x.shape) == record["inputs"][op]["shape"]
    tile, overlap = record["tile_px"] // 8, record["overlap_px"] // 8
    kind = DEFAULT_KIND[op]
    contexts = [0, max(int(r["run"].split()[-1]) for r in record["results"]
                       if r["op"] == op and r["run"].startswith(f"vaecodec {kind} tiles"))]
    ours = seedvr2_peer.vaecodec_runs(weights, op, x, (tile, tile), overlap, contexts, "cpu", "fp32", runner,
                                      tile_norms=(kind,))
    peer = _recorded(record, op, "ComfyUI-SeedVR2 tiled")
    measured = {}
    for context in contexts:
        result, _, grid = ours[f"{kind} {context}"]
        assert [list(s) for s in grid["rows"]] == peer["rows"] and [list(s) for s in grid["cols"]] == peer["cols"]
        band = seedvr2_peer.band_mask(grid["rows"], grid["cols"], result.size(-2), result.size(-1),
                                      8 if op == "decode" else 1)
        measured[context] = seedvr2_peer.compare(result, ours["untiled"][0], band, op == "decode")
        # The same figures as when the record was made: the input is the same.
        want = _recorded(record, op, f"vaecodec {kind} tiles, norm context {context}")["relative_l2"]
        assert measured[context]["relative_l2"] == pytest.approx(want, rel=0.05)
    none, wide = measured[contexts[0]], measured[contexts[1]]
    print(f"{record_name} {op}: relative L2 against the untiled run, ComfyUI-SeedVR2 {peer['relative_l2']:.4f} "
          f"(recorded), vaecodec {kind} tiles context 0 {none['relative_l2']:.4f}, context {contexts[1]} "
          f"{wide['relative_l2']:.4f}")
    assert none["relative_l2"] <= 1.01 * peer["relative_l2"]
    assert wide["relative_l2"] < none["relative_l2"] and wide["relative_l2"] < peer["relative_l2"]
    assert wide["band_relative_l2"] < peer["band_relative_l2"]
    # Crop tiles without a context are the peer's tiling (each tile's crop through the whole model, blended
    # with raised cosines): measured here (the decode's default tiles, above), they give the peer's figure.
    if kind == "crop":
        crop = none
    else:
        crop_runs = seedvr2_peer.vaecodec_runs(weights, op, x, (tile, tile), overlap, [0], "cpu", "fp32", runner,
                                               tile_norms=("crop",))
        crop = seedvr2_peer.compare(crop_runs["crop 0"][0], crop_runs["untiled"][0], None, op == "decode")
    assert crop["relative_l2"] == pytest.approx(peer["relative_l2"], rel=0.01)



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
