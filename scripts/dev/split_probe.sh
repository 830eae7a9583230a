#!/usr/bin/env bash
# On a machine of two or more GPUs, after scripts/gpu_check.sh has built build-gpu: where a split run's time
# goes. Kineto traces of one 720p x81 Wan2.1 decode on the first GPU alone and split across every GPU (each
# GPU's busy time, copies, idle gaps and kernels: trace_summary.py), then the split's time without cuDNN
# timing (MODEL, OP, SIZE and DEVICES choose the row).
# Writes $OUT/probe.txt, $OUT/trace_one.txt, $OUT/trace_split.txt.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=${OUT:-out/gpu}
BUILD=${BUILD_DIR:-build-gpu}
SIZE=${SIZE:-1280x720}
mkdir -p "$OUT"
common=(--random --model "${MODEL:-wan2.1-vae}" --op "${OP:-decode}" --size "$SIZE" --frames 81 --dtype bf16)
timeout 120 "$BUILD/vaecodec" bench "${common[@]}" --runs 1 --device cuda:0 --trace /tmp/trace_one.json \
  >>"$OUT/probe.txt" 2>&1 && python3 scripts/dev/trace_summary.py /tmp/trace_one.json --top 25 >"$OUT/trace_one.txt"
timeout 150 "$BUILD/vaecodec" bench "${common[@]}" --runs 1 --devices "${DEVICES:-all}" --split --trace /tmp/trace_split.json \
  >>"$OUT/probe.txt" 2>&1 && python3 scripts/dev/trace_summary.py /tmp/trace_split.json --top 25 >"$OUT/trace_split.txt"
echo "-- --no-autotune" >>"$OUT/probe.txt"
timeout 120 "$BUILD/vaecodec" bench "${common[@]}" --runs 2 --devices "${DEVICES:-all}" --split --no-autotune >>"$OUT/probe.txt" 2>&1
