#!/usr/bin/env bash
# Builds what changed and runs the test suite. Tests that need a GPU (CTest label "gpu") run only where CUDA works.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}
[[ -f "$BUILD_DIR/build.ninja" ]] || { echo "[test] $BUILD_DIR is not configured: run scripts/setup.sh first" >&2; exit 1; }
ninja -C "$BUILD_DIR" ${JOBS:+-j"$JOBS"}
label_args=(-LE gpu)
if "$BUILD_DIR/vaecodec" info --json 2>/dev/null | grep -q '"compute_capability"'; then
  label_args=()
  echo "[test] CUDA device found: running the GPU tests too"
else
  echo "[test] no CUDA device: skipping the tests labelled gpu"
fi
ctest --test-dir "$BUILD_DIR" --output-on-failure "${label_args[@]}" "$@"
