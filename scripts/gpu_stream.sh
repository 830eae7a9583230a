#!/usr/bin/env bash
# Phase `stream` of scripts/gpu_check.sh (or alone after its build, with the same OUT and BUILD_DIR): the
# streaming sessions on the GPU (Note [Streaming sessions] in core/session.h). Runs the engine's GPU session
# tests, installs the Python package over the machine's torch (as scripts/gpu_python.sh does, linking the
# engine library of the GPU build), runs the Python stream tests (the GPU ones included) and
# scripts/bench_stream.py (per-block latency against the whole clip and the official decoder's carried-cache
# loop, state bytes, threads, overlap with a matmul load, encode pushes, a fresh process's first frame).
# The wheels the machine lacks (diffusers, importlib_metadata 8.x) come from .devkit/wheels.
#   PYTHON (default python3), BENCH_STREAM_ARGS
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-out/gpu}
BUILD=${BUILD_DIR:-build-gpu}
[[ $BUILD = /* ]] || BUILD=$PWD/$BUILD
mkdir -p "$OUT"
step() { echo "== $* ($(date +%T))"; }

step "stream: the engine's GPU session tests"
timeout 300 "$BUILD/tests/vaecodec_tests" "[session]" >"$OUT/stream_cpp_tests.log" 2>&1
echo "session tests exit $?"; tail -3 "$OUT/stream_cpp_tests.log"

step "stream: the Python package against $BUILD"
own_env=$("${PYTHON:-python3}" -c 'import sys; print(sys.prefix if sys.prefix != sys.base_prefix else "")')
ENV=${PYTHON_ENV:-${own_env:-/tmp/vaecodec-python}}
[[ -x $ENV/bin/python ]] || "${PYTHON:-python3}" -m venv --system-site-packages "$ENV"
install=("$ENV/bin/python" -m pip install --no-index --find-links .devkit/wheels)
"${install[@]}" --no-deps diffusers importlib_metadata >"$OUT/stream_install.log" 2>&1 \
  || { tail -5 "$OUT/stream_install.log"; exit 1; }
"${install[@]}" --no-build-isolation ./python -C cmake.define.VAECODEC_ENGINE_BUILD="$BUILD" \
  -C build-dir="$BUILD/python" >>"$OUT/stream_install.log" 2>&1 || { tail -30 "$OUT/stream_install.log"; exit 1; }

step "stream: the Python stream tests (GPU ones included)"
timeout 600 "$ENV/bin/python" -m pytest python/tests/test_stream.py python/tests/test_stream_gpu.py -q -rs \
  >"$OUT/stream_python_tests.log" 2>&1
echo "python stream tests exit $?"; tail -5 "$OUT/stream_python_tests.log"

step "stream: bench_stream.py"
PYTHONUNBUFFERED=1 timeout 900 "$ENV/bin/python" scripts/bench_stream.py --cli "$BUILD/vaecodec" \
  --out "$OUT/stream_bench.jsonl" ${BENCH_STREAM_ARGS:-} 2>"$OUT/stream_bench.err" | tee "$OUT/stream_bench.txt"
tail -3 "$OUT/stream_bench.err"
