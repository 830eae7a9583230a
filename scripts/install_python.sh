#!/usr/bin/env bash
# Installs the Python package (python/) into .venv, built against .venv's torch and linking the engine library
# of the configured and built BUILD_DIR (default build), in the build folder BUILD_DIR/python (kept, so that
# a reinstall compiles only what changed). scripts/setup.sh and scripts/test.sh call it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-build}
[[ -f "$BUILD_DIR/vaecodec-engine.cmake" ]] || { echo "[python] $BUILD_DIR is not configured: run scripts/setup.sh" >&2; exit 1; }
nvcc=$(sed -n 's/^CMAKE_CUDA_COMPILER:[A-Z]*=//p' "$BUILD_DIR/CMakeCache.txt")
start=$(date +%s)
.venv/bin/python -m pip install --quiet --progress-bar off --no-build-isolation --no-deps --force-reinstall \
  ./python -C cmake.define.VAECODEC_ENGINE_BUILD="$ROOT/$BUILD_DIR" -C cmake.define.CMAKE_CUDA_COMPILER="$nvcc" \
  -C build-dir="$ROOT/$BUILD_DIR/python"
echo "[python] installed the vaecodec package into .venv in $(($(date +%s) - start)) s"
