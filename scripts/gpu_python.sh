#!/usr/bin/env bash
# Phase `python` of scripts/gpu_check.sh (or run alone after it, with the same OUT and BUILD_DIR): installs the
# Python package into a virtual environment over the machine's torch, linking the engine library of the GPU
# build, runs its tests (the GPU ones included) and scripts/bench_python.py (vaecodec from Python against
# diffusers plain and tiled, fastvae and the CLI's bench). The GPU machines have no PyPI: the wheels come from
# .devkit/wheels (docs/benchmarks.md, "Python", says how to make that folder).
#   PYTHON (default python3: the one whose torch the build used), RUNS, BENCH_PYTHON_ARGS
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-out/gpu}
BUILD=${BUILD_DIR:-build-gpu}
[[ $BUILD == /* ]] || BUILD=$PWD/$BUILD  # BUILD_DIR absolute or relative to the repository
RUNS=${RUNS:-3}
# A virtual environment over another one would not see its packages (torch, pytest, ...): where the Python
# that built vaecodec is itself a virtual environment (the GPU machine's /opt/torch/.venv), the package goes
# into that one.
own_env=$("${PYTHON:-python3}" -c 'import sys; print(sys.prefix if sys.prefix != sys.base_prefix else "")')
ENV=${PYTHON_ENV:-${own_env:-/tmp/vaecodec-python}}
mkdir -p "$OUT"
step() { echo "== $* ($(date +%T))"; }

step "python: the package against $BUILD"
[[ -x $ENV/bin/python ]] || "${PYTHON:-python3}" -m venv --system-site-packages "$ENV"
install=("$ENV/bin/python" -m pip install --no-index --find-links .devkit/wheels)
"${install[@]}" scikit-build-core pytest diffusers safetensors numpy >"$OUT/python_install.log" 2>&1 \
  || { tail -5 "$OUT/python_install.log"; exit 1; }
"${install[@]}" --no-deps fastvae >>"$OUT/python_install.log" 2>&1 || echo "  fastvae is not in .devkit/wheels: no fastvae row"
"${install[@]}" --no-build-isolation ./python -C cmake.define.VAECODEC_ENGINE_BUILD="$BUILD" \
  -C build-dir="$BUILD/python" >>"$OUT/python_install.log" 2>&1 || { tail -30 "$OUT/python_install.log"; exit 1; }

step "python: the GPU tests, diffusers and ComfyUI (the rest compares with CLI runs on ffmpeg-made clips)"
timeout 600 "$ENV/bin/python" -m pytest python/tests/test_gpu.py python/tests/test_diffusers.py \
  python/tests/test_comfyui.py -q -rs >"$OUT/python_tests.log" 2>&1
echo "python tests exit $?"; tail -5 "$OUT/python_tests.log"

step "python: vaecodec from Python against diffusers, fastvae and bench (Wan2.1 720p x81)"
timeout 900 "$ENV/bin/python" scripts/bench_python.py --cli "$BUILD/vaecodec" --runs "$RUNS" \
  --out "$OUT/python_bench.jsonl" ${BENCH_PYTHON_ARGS:-} 2>"$OUT/python_bench.err" | tee "$OUT/python_bench.txt"
