#!/usr/bin/env bash
# Builds what changed and runs the test suite. Tests that need a GPU (CTest label "gpu") run only where CUDA works
# and are reported as not run elsewhere.
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
# Tests that need what this machine lacks - a CUDA device (label gpu), a Hopper GPU (hopper), more GPUs than a
# multi-gpu entry's count (multi-gpu: one entry each for 2, 3 and 4 GPUs) - end with a skip code, and CTest
# marks them "***Skipped" and lists them under "The following tests did not run" (Note [Tests that cannot run
# here] in tests/gpu_support.h). Without CUDA the GPU tests run apart, and one that passes there fails the
# suite: it never asked for the device its label says it needs.
# The CPU tests run as many at once as the machine has cores unless told otherwise (-j N here, or
# CTEST_PARALLEL_LEVEL); the GPU tests one at a time, each having the device to itself.
export CTEST_PARALLEL_LEVEL=${CTEST_PARALLEL_LEVEL:-$(nproc)}
read -r gpus _ < <(python3 scripts/test_needs.py "$BUILD_DIR/vaecodec")
if ((gpus > 0)); then
  echo "[test] $gpus CUDA device(s): running the GPU tests too"
  ctest --test-dir "$BUILD_DIR" --output-on-failure -LE gpu "$@"
  CTEST_PARALLEL_LEVEL=1 ctest --test-dir "$BUILD_DIR" --output-on-failure -L gpu "$@"
else
  ctest --test-dir "$BUILD_DIR" --output-on-failure -LE gpu "$@"
  echo "[test] no CUDA device: the GPU tests (label gpu) must each report themselves not run"
  ctest --test-dir "$BUILD_DIR" --output-on-failure -L gpu "$@" | tee "$BUILD_DIR/gpu_tests.log"
  if grep -E 'Test +#[0-9]+: .* Passed' "$BUILD_DIR/gpu_tests.log" >&2; then
    echo "[test] these GPU tests passed without a CUDA device: their first line must ask cuda_here()" >&2
    exit 1
  fi
fi
# The Python package: rebuilt when the engine library changed (its build folder is kept), then its tests (the
# ones marked gpu skip themselves without CUDA). A failing test fails the suite.
BUILD_DIR="$BUILD_DIR" scripts/install_python.sh
.venv/bin/python -m pytest python/tests -q -rs
