#!/usr/bin/env bash
# Builds what changed and runs the test suite. Tests that need a GPU (CTest label "gpu") run only where CUDA works.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}
[[ -f "$BUILD_DIR/build.ninja" ]] || { echo "[test] $BUILD_DIR is not configured: run scripts/setup.sh first" >&2; exit 1; }
# The committed .clang-format is the style: a file it would change fails the suite before anything builds.
if command -v clang-format >/dev/null; then
  mapfile -t sources < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
  if ! clang-format --dry-run -Werror "${sources[@]}" 2>"$BUILD_DIR/format.log"; then
    grep -m 10 'error:' "$BUILD_DIR/format.log" >&2 || true
    echo "[test] these files differ from .clang-format: run clang-format -i on them" >&2
    exit 1
  fi
else
  echo "[test] clang-format not found: the style check is skipped (scripts/setup.sh installs it)" >&2
fi
ninja -C "$BUILD_DIR" ${JOBS:+-j"$JOBS"}
# A test name CTest cannot hand back to Catch would run as a filter that matches nothing, and pass: CTest cuts
# names at ';' (a CMake list), a backslash does not survive its quoting, and Catch reads a leading '-' as an
# option.
if "$BUILD_DIR/tests/vaecodec_tests" --list-test-names-only | grep -E ';|\\|^-' >&2; then
  echo "[test] these test names hold ';' or '\\' or start with '-', which CTest cannot pass to Catch: rename them" >&2
  exit 1
fi
label_args=(-LE gpu)
if "$BUILD_DIR/vaecodec" info --json 2>/dev/null | grep -q '"compute_capability"'; then
  label_args=()
  echo "[test] CUDA device found: running the GPU tests too"
else
  echo "[test] no CUDA device: skipping the tests labelled gpu"
fi
ctest --test-dir "$BUILD_DIR" --output-on-failure "${label_args[@]}" "$@"
# The Python package: rebuilt when the engine library changed (its build folder is kept), then its tests (the
# ones marked gpu skip themselves without CUDA). A failing test fails the suite.
BUILD_DIR="$BUILD_DIR" scripts/install_python.sh
.venv/bin/python -m pytest python/tests -q -rs
