#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (clang, ASan+UBSan, build-fuzz/) and runs each for SECONDS (default 60):
#   scripts/fuzz.sh [SECONDS] [TARGET...]      TARGET: safetensors pth latent detect (default: all, one by one)
#   scripts/fuzz.sh --build-only
# Corpora grow in build-fuzz/corpus/TARGET (seeds from tests/data in build-fuzz/seeds/TARGET); crashes, leaks
# and timeouts are written to build-fuzz/artifacts/ and make the script fail; each run's log and final
# statistics go to build-fuzz/logs/TARGET.log. docs/reliability.md records the runs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
seconds=${1:-60}
shift || true
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(safetensors pth latent detect)
BUILD_DIR=${FUZZ_BUILD_DIR:-build-fuzz}
MAIN_BUILD=${MAIN_BUILD_DIR:-build}

# Debian 12: clang 14 and its libFuzzer/sanitizer runtimes (libclang-rt-14-dev).
if ! command -v clang++ >/dev/null || ! clang++ -print-file-name=libclang_rt.fuzzer-x86_64.a | grep -q /; then
  echo "[fuzz] installing clang and libclang-rt-14-dev" >&2
  sudo_cmd=(); [[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get install -y --no-install-recommends clang libclang-rt-14-dev >&2
fi
[[ -f "$MAIN_BUILD/build.ninja" ]] || { echo "[fuzz] $MAIN_BUILD is not configured: run scripts/setup.sh first" >&2; exit 1; }
python=${PYTHON:-.venv/bin/python}
[[ -x "$python" ]] || python=$(grep -Po '^Python3_EXECUTABLE:\w+=\K.*' "$MAIN_BUILD/CMakeCache.txt" || echo python3)

# The uninstrumented rest of the program comes from the main build's static libraries.
ninja -C "$MAIN_BUILD" vaecodec_core vaecodec_io vaecodec
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  torch_dir=$(grep -Po '^Torch_DIR:\w+=\K.*' "$MAIN_BUILD/CMakeCache.txt")
  cmake -S fuzz -B "$BUILD_DIR" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DTorch_DIR="$torch_dir" \
    -DVAECODEC_MAIN_BUILD="$PWD/$MAIN_BUILD" -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc >/dev/null
fi
ninja -C "$BUILD_DIR"
[[ $seconds != --build-only ]] || exit 0
rm -rf "$BUILD_DIR/seeds"
"$python" fuzz/make_seeds.py "$BUILD_DIR/seeds" 2>/dev/null

mkdir -p "$BUILD_DIR/logs" "$BUILD_DIR/artifacts"
failed=0
for target in "${targets[@]}"; do
  mkdir -p "$BUILD_DIR/corpus/$target"
  echo "[fuzz] $target for ${seconds}s"
  # detect_leaks: LibTorch's own start-up allocations are reachable, so any leak reported is ours.
  if ! LSAN_OPTIONS=suppressions=fuzz/lsan.supp ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    nice "$BUILD_DIR/fuzz_$target" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -malloc_limit_mb=1024 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$BUILD_DIR/artifacts/$target-" \
    "$BUILD_DIR/corpus/$target" "$BUILD_DIR/seeds/$target" >"$BUILD_DIR/logs/$target.log" 2>&1; then
    echo "[fuzz] $target: FINDING, see $BUILD_DIR/logs/$target.log and $BUILD_DIR/artifacts/" >&2
    failed=1
  fi
  grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb)|^#[0-9]+.*(DONE|pulse)' "$BUILD_DIR/logs/$target.log" | tail -3
done
exit $failed
