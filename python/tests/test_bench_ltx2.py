"""scripts/bench_ltx2.py, the LTX-2 benchmark against diffusers' AutoencoderKLLTX2Video, run on the CPU with the
golden data's tiny configs: every contender gives a row, and vaecodec's encode and decode of the random weights
file it writes (original key names, config in the metadata) agree with diffusers' on the same tensors."""

import json
import subprocess
import sys

import pytest

from conftest import ROOT


@pytest.mark.parametrize("version", ["23", "20"])
def test_bench_ltx2_rows_and_accuracy(cli, tmp_path, version):
    out = tmp_path / "rows.jsonl"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_ltx2.py"), "--cli", str(cli), "--tiny", "--version", version,
         "--device", "cpu", "--dtype", "fp32", "--size", "64x64", "--frames", "9", "--runs", "1", "--warmup", "0",
         "--accuracy-size", "64x64x17", "--weights", str(tmp_path), "--out", str(out)],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    timed = {(r["contender"], r["op"]) for r in rows if "median_s" in r}
    assert timed == {(c, op) for c in ("vaecodec", "diffusers", "diffusers-tiled") for op in ("decode", "encode")}
    accuracy = {r["op"]: r["relative_l2"] for r in rows if r["contender"] == "accuracy"}
    assert set(accuracy) == {"decode", "encode"}, rows
    # float32 on both sides, the same function: rounding only
    assert accuracy["encode"] <= 2e-5 and accuracy["decode"] <= 2e-5, accuracy
    assert all(r["version"] == version and r["tiny"] for r in rows)
