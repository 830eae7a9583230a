"""scripts/train_tiny.py's weights are what the engine loads: a few CPU steps of a Wan2.1 model with stages of
another width (--dim-mult) or a SeedVR2 model with other norm groups (--norm-groups) give a file whose metadata
states them, which vaecodec.load runs as the script's own PyTorch model computes it, and which --init continues
from without being told them again."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from safetensors import safe_open

import vaecodec
from conftest import ROOT, relative_error

sys.path.insert(0, str(ROOT / "scripts"))
import train_tiny  # noqa: E402

SCRIPT = ROOT / "scripts" / "train_tiny.py"


def clip(frames: int, size: int, seed: int) -> np.ndarray:
    """8-bit frames [T, H, W, 3]: a smooth random field moving a pixel a frame."""
    g = np.random.default_rng(seed)
    field = g.random((size // 4 + frames, size // 4, 3))
    field = np.kron(field, np.ones((4, 4, 1)))
    return (np.stack([field[t:t + size, :size] for t in range(frames)]) * 255).astype(np.uint8)


def run_train(data, out, *extra, model="wan2.1", timeout=600):
    """`train_tiny.py train` with only the model, data, out and `extra` given."""
    command = [sys.executable, str(SCRIPT), "train", "--model", model, "--data", str(data), "--out", str(out),
               *extra]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def train(data, out, *extra, model="wan2.1"):
    """A few CPU steps on small crops (the last of `extra`'s options win)."""
    done = run_train(data, out, "--steps", "2", "--batch", "1", "--frames", "5", "--crop", "32", "--device", "cpu",
                     "--no-bf16", "--warmup", "1", *extra, model=model)
    assert done.returncode == 0, done.stderr[-2000:]
    return out / "weights.safetensors"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny_data")
    np.save(folder / "train_field_48x48.npy", clip(9, 48, 0))
    np.save(folder / "heldout_field.npy", clip(5, 32, 1))
    return folder


def same_function(model_name, weights):
    """The engine's encode (posterior mean) and decode of the file against the script's own model."""
    reference = train_tiny.load(model_name, str(weights)).float()
    model = vaecodec.load(str(weights), device="cpu", dtype="fp32")
    video = torch.from_numpy(clip(5, 32, 2)).permute(3, 0, 1, 2).unsqueeze(0).float() / 127.5 - 1
    with torch.no_grad():
        mu, _ = reference.encode(video)
        expected = reference.decode(mu)
    raw = model.encode(video, normalized=False)
    assert relative_error(raw, mu) < 1e-5
    assert relative_error(model.decode(raw, normalized=False, clamp=False), expected) < 1e-5


def test_other_stage_widths_reach_the_engine(data, tmp_path):
    weights = train(data, tmp_path / "a", "--width", "4", "--dim-mult", "1,2,4,8")
    with safe_open(str(weights), "pt") as f:
        assert json.loads(f.metadata()["vaecodec_config"]) == {"dim_mult": [1, 2, 4, 8]}
        assert f.get_slice("decoder.conv1.weight").get_shape()[0] == 32  # the latent stage: 4 x 8
    meta = json.loads((tmp_path / "a" / "meta.json").read_text())
    assert meta["config"]["dim_mult"] == [1, 2, 4, 8]
    same_function("wan2.1", weights)


def test_other_norm_groups_reach_the_engine(data, tmp_path):
    weights = train(data, tmp_path / "a", "--width", "8", "--norm-groups", "4", model="seedvr2")
    with safe_open(str(weights), "pt") as f:
        assert json.loads(f.metadata()["vaecodec_config"]) == {"norm_num_groups": 4}
    same_function("seedvr2", weights)
    again = train(data, tmp_path / "b", "--init", str(weights), model="seedvr2")
    with safe_open(str(again), "pt") as f:
        assert json.loads(f.metadata()["vaecodec_config"]) == {"norm_num_groups": 4}


def test_init_continues_with_the_files_stage_widths(data, tmp_path):
    first = train(data, tmp_path / "a", "--width", "4", "--dim-mult", "1,2,4,8")
    second = train(data, tmp_path / "b", "--init", str(first))  # neither --width nor --dim-mult
    with safe_open(str(second), "pt") as f:
        assert json.loads(f.metadata()["vaecodec_config"]) == {"dim_mult": [1, 2, 4, 8]}
    released = train(data, tmp_path / "c", "--width", "4")
    with safe_open(str(released), "pt") as f:
        assert "vaecodec_config" not in (f.metadata() or {})  # the released widths need no statement


def test_steps_take_the_crop_shapes_in_turn(data, tmp_path):
    # Long clips at small crops beside short ones at large crops (the causal caches learn what follows the
    # fifth latent frame); the 9-frame shape is every second step's, from the one source that long.
    weights = train(data, tmp_path / "a", "--frames", "5,9", "--crop", "32,16")
    meta = json.loads((tmp_path / "a" / "meta.json").read_text())
    assert (meta["training"]["frames"], meta["training"]["crop"]) == ([5, 9], [32, 16])
    same_function("wan2.1", weights)
    done = run_train(data, tmp_path / "b", "--steps", "2", "--batch", "1", "--frames", "5,13", "--crop", "16",
                     "--device", "cpu", "--no-bf16")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == "train_tiny.py: no training source has 13 frames"


def test_a_run_stopped_early_goes_on_where_it_stopped(data, tmp_path):
    # A GPU machine's calls are 10 minutes: one schedule over several calls. Two steps, a stop, --resume for
    # the other two give the very weights of four steps at once (CPU, float32: the same operations). Both
    # start from earlier weights (--init), which are gone when the run resumes: its weights are its state's.
    init = tmp_path / "init.safetensors"
    train(data, tmp_path / "base").rename(init)
    straight = train(data, tmp_path / "a", "--init", str(init), "--steps", "4", "--save-dtype", "float32")
    train(data, tmp_path / "b", "--init", str(init), "--steps", "4", "--stop-after", "2", "--save-dtype", "float32")
    meta = json.loads((tmp_path / "b" / "meta.json").read_text())["training"]
    assert (meta["steps"], meta["schedule_steps"], meta["stopped_early"]) == (2, 4, True)
    init.unlink()
    resume = ("--resume", str(tmp_path / "b" / "state.pt"), "--device", "cpu")
    done = run_train(data, tmp_path / "c", *resume)
    assert done.returncode == 0, done.stderr[-2000:]
    resumed = tmp_path / "c" / "weights.safetensors"
    with safe_open(str(straight), "pt") as f, safe_open(str(resumed), "pt") as g:
        assert sorted(f.keys()) == sorted(g.keys())
        for k in f.keys():
            assert torch.equal(f.get_tensor(k), g.get_tensor(k)), k
    meta = json.loads((tmp_path / "c" / "meta.json").read_text())["training"]
    assert (meta["steps"], meta["resumed"]["at_step"], meta["frames"], meta["stopped_early"]) == (4, 2, [5], False)
    refused = run_train(data, tmp_path / "d", *resume, "--lr", "0.1", timeout=120)
    assert refused.returncode == 2
    assert "--lr: a resumed run keeps its own (0.0015)" in refused.stderr


def test_each_option_is_its_familys_and_checked(data, tmp_path):
    def refused(model, option, value, line):
        done = run_train(data, tmp_path, "--steps", "1", option, value, model=model, timeout=120)
        assert done.returncode == 2, done.stderr
        assert line in done.stderr

    refused("seedvr2", "--dim-mult", "1,2,4,8", "--dim-mult is Wan2.1's")
    refused("wan2.1", "--dim-mult", "1,x",
            "--dim-mult: expected positive integers separated by commas, e.g. 1,2,4,8, got '1,x'")
    refused("wan2.1", "--norm-groups", "4", "--norm-groups is SeedVR2's")
    refused("wan2.1", "--frames", "17,0", "--frames: expected positive integers separated by commas, e.g. 17,49,81")
    refused("wan2.1", "--crop", "128,96", "--crop takes one size or one for each of the 1 --frames, not 2")
    refused("seedvr2", "--norm-groups", "5", "--norm-groups 5 does not divide SeedVR2's width 32")
