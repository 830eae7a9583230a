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
# What this machine can run: GPU tests where CUDA works; of those, the ones labelled hopper where the first GPU
# runs the own kernels, the ones labelled multi-gpu where there are two GPUs. The others are reported as not
# run, never passed (Note [Tests that cannot run here] in tests/gpu_support.h).
read -r gpus hopper < <(python3 scripts/test_needs.py "$BUILD_DIR/vaecodec")
count() { ctest --test-dir "$BUILD_DIR" -N -L "$1" | sed -n 's/^Total Tests: //p'; }
excluded=() not_run=()
if ((gpus == 0)); then
  excluded=(gpu)
  not_run+=("$(count gpu) tests need a CUDA device (label gpu)")
else
  echo "[test] CUDA device found: running the GPU tests too"
  if ((!hopper)); then
    excluded+=(hopper)
    not_run+=("$(count hopper) tests need a Hopper GPU and the own kernels (label hopper)")
  fi
  if ((gpus < 2)); then
    excluded+=(multi-gpu)
    not_run+=("$(count multi-gpu) tests need 2 GPUs (label multi-gpu)")
  fi
fi
label_args=()
((${#excluded[@]} == 0)) || label_args=(-LE "$(IFS='|'; echo "${excluded[*]}")")
for line in "${not_run[@]}"; do echo "[test] not run: $line"; done
ctest --test-dir "$BUILD_DIR" --output-on-failure "${label_args[@]}" "$@"
for line in "${not_run[@]}"; do echo "[test] not run: $line"; done
# The Python package: rebuilt when the engine library changed (its build folder is kept), then its tests (the
# ones marked gpu skip themselves without CUDA). A failing test fails the suite.
BUILD_DIR="$BUILD_DIR" scripts/install_python.sh
.venv/bin/python -m pytest python/tests -q -rs
