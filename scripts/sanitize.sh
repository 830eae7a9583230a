#!/usr/bin/env bash
# The test suite under AddressSanitizer and UndefinedBehaviorSanitizer: configures build-asan/ (clang,
# -fsanitize=address,undefined on every C++ file; the CUDA kernels and LibTorch/FFmpeg are not instrumented),
# builds it and runs the CPU tests. Arguments go to ctest, e.g. a subset:
#   scripts/sanitize.sh                     # every CPU test
#   scripts/sanitize.sh -R 'weights|hostile|latent'
# Any sanitizer report fails the test that triggered it. docs/reliability.md records the runs.
#   scripts/sanitize.sh --parsers           # only the parser tests (weights, hostile files, latents, presets),
#                                           # built with the fuzz targets in build-fuzz/ (minutes, not an hour)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [[ ${1:-} == --parsers ]]; then
  shift
  FUZZ_BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
  scripts/fuzz.sh --build-only
  ninja -C "$FUZZ_BUILD_DIR" parser_tests
  LSAN_OPTIONS=suppressions=$PWD/fuzz/lsan.supp ASAN_OPTIONS=detect_leaks=1:protect_shadow_gap=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$FUZZ_BUILD_DIR/parser_tests" "$@"
  exit
fi
BUILD_DIR=${ASAN_BUILD_DIR:-build-asan}
MAIN_BUILD=${MAIN_BUILD_DIR:-build}

if ! command -v clang++ >/dev/null; then
  sudo_cmd=(); [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get install -y --no-install-recommends clang libclang-rt-14-dev >&2
fi
# vptr and function checks would inspect LibTorch's uninstrumented objects; every other UB check aborts.
flags="-fsanitize=address,undefined -fno-sanitize=vptr,function -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  extra=()
  if [[ -f "$MAIN_BUILD/CMakeCache.txt" ]]; then  # the same LibTorch and Python as the main build
    extra+=("-DTorch_DIR=$(grep -Po '^Torch_DIR:\w+=\K.*' "$MAIN_BUILD/CMakeCache.txt")")
    python=$(grep -Po '^Python3_EXECUTABLE:\w+=\K.*' "$MAIN_BUILD/CMakeCache.txt" || true)
    [[ -z "$python" ]] || extra+=("-DPython3_EXECUTABLE=$python")
  fi
  command -v ccache >/dev/null && extra+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g $flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}" \
    "${extra[@]}" >/dev/null
fi
ninja -C "$BUILD_DIR"
# protect_shadow_gap=0: the CUDA runtime maps memory where ASan keeps its gap. The leak suppressions name
# LibTorch's own leak only (fuzz/lsan.supp says which and why); ours are all reported.
export LSAN_OPTIONS=suppressions=$PWD/fuzz/lsan.supp
export ASAN_OPTIONS=detect_leaks=1:protect_shadow_gap=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir "$BUILD_DIR" --output-on-failure -LE gpu -j"${JOBS:-2}" "$@"
