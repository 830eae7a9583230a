#!/usr/bin/env bash
# The main job on a short clip: video in, VAE round trip, video out, with quality metrics, and what the run
# shows. Uses real weights from VAECODEC_WEIGHTS when set (on a generated 320x240 clip), otherwise the small
# demonstration model that scripts/train_tiny.py trained (tests/data/wan21-trained: the Wan2.1 architecture at
# dim 16, trained for minutes) on frames of Big Buck Bunny it never saw (tests/data/wan21-trained/demo_bbb.mp4,
# (c) Blender Foundation, CC BY 3.0): a blurred but recognisable reconstruction, not what the released VAE
# gives. Writes input | reconstruction | difference (x4) side by side.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}
OUT=${DEMO_DIR:-out/demo}
mkdir -p "$OUT"
say() { echo "[demo] $*"; }
trained=tests/data/wan21-trained/weights.safetensors
weights=${VAECODEC_WEIGHTS:-$trained}

if [[ "$weights" == "$trained" ]]; then
  # 29 frames of 320x180 at 25 fps that the demonstration model never saw in training, BT.709, with a tone.
  ffmpeg -v error -y -i tests/data/wan21-trained/demo_bbb.mp4 \
    -f lavfi -i sine=frequency=440:sample_rate=48000:duration=1.16 \
    -c:v libx264 -crf 14 -pix_fmt yuv420p -colorspace bt709 -color_primaries bt709 -color_trc bt709 -c:a aac \
    -shortest "$OUT/input.mp4"
else
  # 2 s of 320x240 at 24 fps, BT.709, with a 440 Hz tone.
  ffmpeg -v error -y -f lavfi -i testsrc2=size=320x240:rate=24:duration=2 \
    -f lavfi -i sine=frequency=440:sample_rate=48000:duration=2 \
    -c:v libx264 -pix_fmt yuv420p -colorspace bt709 -color_primaries bt709 -color_trc bt709 -c:a aac \
    "$OUT/input.mp4"
fi
"$BUILD_DIR/vaecodec" roundtrip "$OUT/input.mp4" -o "$OUT/roundtrip.mp4" -y --weights "$weights" \
  --metrics "$OUT/metrics.json" --quiet --json >"$OUT/summary.json"

# What the output kept, as ffprobe sees both files.
probe() {
  ffprobe -v error -select_streams v:0 -count_frames \
    -show_entries stream=width,height,nb_read_frames,r_frame_rate,color_space,color_primaries,color_transfer \
    -of csv=p=0 "$1"
}
audio() { ffprobe -v error -select_streams a -show_entries stream=codec_name,duration -of csv=p=0 "$1"; }
seconds=$(sed -n 's/.*"seconds":\([0-9.]*\).*/\1/p' "$OUT/summary.json")
psnr=$(sed -n 's/.*"quality":{[^}]*"psnr":\([-0-9.]*\).*/\1/p' "$OUT/summary.json" | head -1)
ssim=$(sed -n 's/.*"quality":{[^}]*"ssim":\([-0-9.]*\).*/\1/p' "$OUT/summary.json" | head -1)
say "input:          $(probe "$OUT/input.mp4")  audio $(audio "$OUT/input.mp4")"
say "reconstruction: $(probe "$OUT/roundtrip.mp4")  audio $(audio "$OUT/roundtrip.mp4")"
say "(width, height, matrix, transfer, primaries, frame rate, frames; audio codec, seconds)"
say "round trip took ${seconds} s; PSNR ${psnr} dB, SSIM ${ssim} (per frame: $OUT/metrics.json)"

# input | reconstruction | difference x4, to look at.
ffmpeg -v error -y -i "$OUT/input.mp4" -i "$OUT/roundtrip.mp4" -filter_complex \
  "[0:v]format=gbrp,split[a][a2];[1:v]format=gbrp,split[b][b2];\
[a2][b2]blend=all_mode=difference,lutrgb=r='min(val*4,255)':g='min(val*4,255)':b='min(val*4,255)'[d];\
[a][b][d]hstack=inputs=3,format=yuv420p" -c:v libx264 -crf 18 -an "$OUT/side_by_side.mp4"
say "wrote $OUT/roundtrip.mp4 and $OUT/side_by_side.mp4 (input | reconstruction | difference x4)"

if [[ "$weights" == "$trained" ]]; then
  say "NOTE: this is a small demonstration model (the Wan2.1 architecture at dim 16, 3.6 M parameters, trained"
  say "      for 103 minutes by scripts/train_tiny.py; tests/data/wan21-trained/meta.json says on what). It gives"
  say "      a blurred but recognisable reconstruction (24.5-27.0 dB on clips it never saw), far from the released"
  say "      VAE."
  say "For real results, download the Wan2.1 VAE (Wan2.1_VAE.pth in Hugging Face's Wan-AI/Wan2.1-T2V-1.3B or"
  say "Wan-AI/Wan2.1-T2V-14B, or wan_2.1_vae.safetensors in Comfy-Org/Wan_2.1_ComfyUI_repackaged) and run:"
  say "  VAECODEC_WEIGHTS=/path/to/Wan2.1_VAE.pth scripts/demo.sh"
  say "  or: $BUILD_DIR/vaecodec roundtrip your.mp4 -o out.mp4 --weights /path/to/Wan2.1_VAE.pth"
fi
