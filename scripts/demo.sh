#!/usr/bin/env bash
# The main job on a short generated clip: video in, VAE round trip, video out, with quality metrics.
# Uses real weights from VAECODEC_WEIGHTS when set, otherwise the tiny test model (random weights: the output
# shows that the pipeline runs, not what the real model looks like).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}
OUT=${DEMO_DIR:-out/demo}
mkdir -p "$OUT"
weights=${VAECODEC_WEIGHTS:-tests/data/wan21-tiny/weights.safetensors}
ffmpeg -v error -y -f lavfi -i testsrc2=size=320x240:rate=24 -frames:v 17 -c:v libx264 -pix_fmt yuv420p \
  "$OUT/input.mp4"
"$BUILD_DIR/vaecodec" roundtrip "$OUT/input.mp4" -o "$OUT/roundtrip.mp4" --weights "$weights" \
  --metrics "$OUT/metrics.json"
echo "[demo] wrote $OUT/roundtrip.mp4 (metrics: $OUT/metrics.json) with weights $weights"
