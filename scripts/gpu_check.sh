#!/usr/bin/env bash
# On a GPU machine: build vaecodec against the machine's LibTorch, run the GPU tests, the benchmark matrix of the
# speed, models and memory work, and a file-to-file round trip. Logs and JSON results go to $OUT (default
# out/gpu); every step has a time limit, so a slow one costs its own results only.
# Expects the FFmpeg/Catch2/CLI11 kit unpacked and its env.sh sourced (see docs/benchmarks.md), and
# nlohmann-json and toml++ headers under .devkit/include when the machine lacks them (cp -r /usr/include/toml++
# .devkit/include/ on a machine with Debian's libtomlplusplus-dev).
#   PHASES="tests speed variants models memory roundtrip long"   which parts run (always in this order)
#   RUNS=3                                           timed runs per benchmark (the median is reported)
#   TIER_SIZES, TIER_OPS, TIER_PRESETS               the rows of phase `tiers`
#   BENCH_EXTRA, RUN_EXTRA                           arguments added to every bench / file run
#   SPLIT_ROWS, SPLIT_CLIPS (0: no batch)           phase split: its bench rows, the batch's clips
#                                                    (where a split's time goes: scripts/dev/split_probe.sh)
#   GPU_TESTS                                        the Catch filter of phase tests (default [gpu])
#   CONV_BACKENDS, CONV_ROWS, CONV_MICRO=0,          phase conv: the --conv values, MODEL:OP:SIZE rows, no
#   CONV_SHAPES                                      shape-by-shape timing, its shapes (C K T R S D H W stride)
#   FRESH_BACKENDS, FRESH_TIMELINES                  phase fresh: the --conv values (default cudnn auto), the
#                                                    timelines (CONV@ENCODER-OPTIONS)
#   ENCODER_OPTIONS                                  phase encoder: x264 settings, each timed by write_tail
#   COLD_BACKENDS                                    phase coldtrace: the --conv values traced cold
#   SV2_SIZES, SV2_PRESETS                           phase seedvr2_files: SeedVR2's sizes and the GPU tiers' presets
#   SV2_BUDGETS, SV2_ROWS                            phase seedvr2_rows: the presets and --vram values of its rows,
#                                                    which rows (SIZE:FRAMES:none|budgets)
#   FP8_ROWS, FP8_PROFILE (0: none)                  phase fp8: MODEL:OP:SIZE rows timed in bf16 and fp8,
#                                                    their accuracy at 256x256 x17, the fp8 decode's profile
# The phases, in the order they run, and the file under scripts/gpu_check/ that holds each (sourced here, after
# common.sh's helpers and build.sh's build):
#   speed.sh      tests speed variants models ltx2 memory
#   files.sh      roundtrip autotune model_files margin tiers tier4k psnr control seedvr2_rows
#                 seedvr2_files seedvr2_gaps
#   kernels.sh    conv fp8 fresh coldtrace profile
#   startup.sh    startup cold heuristics reference
#   devices.sh    split scaling_split scaling_batch batch
#   long_runs.sh  candidates encoder long musubi
#   python        scripts/gpu_python.sh
# PACK=FILE: on exit (also on SIGTERM/SIGINT, e.g. an inner `timeout`), everything under $OUT is packed into
# $OUT/FILE (.tar.xz) and the rest removed - the lent machines send back only a few files.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-out/gpu}
BUILD=${BUILD_DIR:-build-gpu}
ARCH=${CUDA_ARCHS:-90}
RUNS=${RUNS:-3}
PHASES=${PHASES:-tests speed variants models memory roundtrip}
mkdir -p "$OUT"
if [[ -n ${PACK:-} ]]; then
  pack() {
    (cd "$OUT" && tar -cJf "/tmp/.pack.$$" --exclude "./$PACK" . && find . -mindepth 1 -delete && mv "/tmp/.pack.$$" "$PACK")
  }
  trap pack EXIT
  trap 'exit 143' TERM INT
fi
source scripts/gpu_check/common.sh
source scripts/gpu_check/build.sh
# Each file runs those of its phases that PHASES names (`has PHASE`).
for part in speed files kernels startup devices long_runs; do
  source "scripts/gpu_check/$part.sh"
done
has python && OUT="$OUT" BUILD_DIR="$BUILD" RUNS="$RUNS" scripts/gpu_python.sh  # Python package
step done
