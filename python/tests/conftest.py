"""Shared set-up of the Python package's tests: the repository's tiny models, the CLI built beside it, and
the GPU marker (tests marked gpu run only where CUDA works)."""

import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
TINY = {
    "wan2.1-vae": DATA / "wan21-tiny" / "weights.safetensors",
    "wan2.2-vae": DATA / "wan22-tiny" / "weights.safetensors",
    "seedvr2-vae": None,  # made by pytest_configure
}
_scratch = tempfile.mkdtemp(prefix="vaecodec-python-tests-")


def pytest_configure(config):
    # The tiny SeedVR2's 8 norm groups are what its tensors cannot tell: they go into a copy of its weights as
    # the file's config (Note [Config in the weights file] in core/models/registry.cpp), as the CLI tests do.
    from safetensors.torch import load_file, save_file

    path = pathlib.Path(_scratch) / "seedvr2-tiny.safetensors"
    save_file(load_file(str(DATA / "seedvr2-tiny" / "weights.safetensors")), str(path),
              metadata={"vaecodec_config": '{"norm_num_groups": 8}'})
    TINY["seedvr2-vae"] = path


def pytest_unconfigure(config):
    shutil.rmtree(_scratch, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def cli() -> pathlib.Path:
    """The vaecodec program of the build the package was made from (BUILD_DIR, default build/)."""
    path = pathlib.Path(os.environ.get("VAECODEC_CLI", ROOT / os.environ.get("BUILD_DIR", "build") / "vaecodec"))
    if not path.exists():
        pytest.fail(f"{path} does not exist: build the CLI first (scripts/setup.sh)")
    return path


def run_cli(cli, *args, expect_ok=True):
    """Runs the CLI; returns (exit status, stderr)."""
    done = subprocess.run([str(cli), *map(str, args)], capture_output=True, text=True, timeout=600)
    if expect_ok and done.returncode != 0:
        raise AssertionError(f"vaecodec {' '.join(map(str, args))} failed ({done.returncode}):\n{done.stderr}")
    return done.returncode, done.stderr


def relative_error(got: torch.Tensor, want: torch.Tensor) -> float:
    got, want = got.detach().double().cpu(), want.detach().double().cpu()
    return ((got - want).norm() / want.norm()).item()
