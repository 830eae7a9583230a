#!/usr/bin/env bash
# Makes .devkit fit a call beside the working tree (what travels is capped at 64 MiB, the tracked tree is
# ~47 MB, the kit as shared 27 MB): the kit is packed again with xz -9e (19.7 -> 8.8 MB: its static ffmpeg and
# ffprobe share most of their code, which the larger dictionary finds; ~5 minutes on 2 idle cores), and the
# nvidia-cutlass wheel (6.4 MB) is replaced by the headers the build reads, as .devkit/cutlass_headers.tar.xz
# (scripts/gpu_check/build.sh takes either; the wheel moves to .devkit-wheel/, ignored).
#   scripts/dev/slim_devkit.sh        (after `cp -r ../shared/device/devkit .devkit`)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if (($(stat -c %s .devkit/kit.tar.xz) > 12000000)); then
  chmod -R u+w .devkit
  tar -xJf .devkit/kit.tar.xz -C "$tmp"
  tar -cf - -C "$tmp" vaecodec-kit | xz -9e -T1 >"$tmp/kit.tar.xz"
  mv "$tmp/kit.tar.xz" .devkit/kit.tar.xz
  rm -rf "$tmp/vaecodec-kit"
fi
wheel=$(ls .devkit/nvidia_cutlass-*.whl 2>/dev/null | head -1)
[[ -n "$wheel" ]] || { du -sh .devkit; exit 0; }
python3 -m zipfile -e "$wheel" "$tmp" >/dev/null
tar -cJf .devkit/cutlass_headers.tar.xz -C "$tmp" cutlass_library/source/include cutlass_library/source/tools/util/include
mkdir -p .devkit-wheel
mv "$wheel" .devkit-wheel/
du -sh .devkit .devkit/cutlass_headers.tar.xz
