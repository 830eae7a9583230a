"""SeedVR2's tiles through time from Python: load()'s tile, tile_overlap and norm_context reach the plan and
the result."""

import pytest
import torch

import vaecodec
from conftest import TINY, relative_error


def _latents(width: int = 16, height: int = 16):
    return torch.randn(1, 16, 2, height, width, generator=torch.Generator().manual_seed(3))


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
        m = vaecodec.load(TINY["seedvr2-vae"], device="cpu", tile=10, tile_overlap=4, norm_context=context)
        errors[context] = relative_error(m.decode(z), whole)
    assert errors[4] < errors[0]


def test_bad_tile_options_are_refused_at_load():
    path = TINY["seedvr2-vae"]
    with pytest.raises(ValueError, match=r"tile_overlap -1: from 0 to 2048 latent pixels"):
        vaecodec.load(path, device="cpu", tile_overlap=-1)
    with pytest.raises(ValueError, match=r"norm_context 5000: from 0 to 2048"):
        vaecodec.load(path, device="cpu", norm_context=5000)
    with pytest.raises(ValueError, match=r"tile 'ten' is not a tile size"):
        vaecodec.load(path, device="cpu", tile="ten")
    with pytest.raises(TypeError, match="tile_overlap must be a number of latent pixels"):
        vaecodec.load(path, device="cpu", tile_overlap=1.5)
    with pytest.raises(TypeError, match="tile must be a size"):
        vaecodec.load(path, device="cpu", tile=(10, 12, 3))
    m = vaecodec.load(path, device="cpu", tile=4, tile_overlap=4)
    with pytest.raises(ValueError, match="is not larger than its overlap of 4"):
        m.decode(_latents())
