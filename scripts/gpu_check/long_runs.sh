# Phases candidates encoder long musubi of scripts/gpu_check.sh, which sources this file (longer file runs:
# cuDNN's candidates, x264's tail, long clips, a musubi-tuner dataset). It uses the driver's OUT, BUILD and
# RUNS and scripts/gpu_check/common.sh's step, has, bench, make_weights, clip and file_run.

if has candidates; then
  # cuDNN's timing tries up to N candidates per convolution shape (LibTorch's default 10): fewer cost less at
  # start-up; do they find kernels as fast? File runs of 81 and 161 frames give the start-up and the rate.
  step "autotune candidates: file round trips with cuDNN timing of 1, 2, 3, 10 candidates per shape, and without"
  make_weights
  for n in 81 161; do clip "$n" "/tmp/clip$n.mp4"; done
  for cand in off 1 2 3 10; do
    for n in 81 161; do
      if [[ $cand == off ]]; then
        file_run "roundtrip 720p x$n autotune off" roundtrip "/tmp/clip$n.mp4" -o "/tmp/rt$n.mp4" \
          --weights /tmp/wan21_random.pth --autotune off
      else
        VAECODEC_AUTOTUNE_CANDIDATES=$cand file_run "roundtrip 720p x$n candidates $cand" roundtrip \
          "/tmp/clip$n.mp4" -o "/tmp/rt$n.mp4" --weights /tmp/wan21_random.pth --autotune on
      fi
    done
  done
  VAECODEC_AUTOTUNE_CANDIDATES=2 RUNS=2 bench --random --op roundtrip --size 1280x720
fi
if has encoder; then
  # x264's tail: the frames its lookahead and frame threads hold back are encoded after the model's last
  # frame. File decode (latents -> .mp4) and round trip, 720p x81, with encoder settings that hold fewer back.
  step "x264's tail: decode and round trip 720p x81 with --encoder-options"
  make_weights
  clip 81 /tmp/clip81.mp4
  timeout 200 "$BUILD/vaecodec" encode /tmp/clip81.mp4 -o /tmp/lat81.safetensors -y --weights /tmp/wan21_random.pth \
    --quiet || echo "  FAILED: encode for the decode runs"
  file_run "decode 720p x81 warm-up" decode /tmp/lat81.safetensors -o /tmp/dec81.mp4 --weights /tmp/wan21_random.pth
  for opts in ${ENCODER_OPTIONS:-default rc-lookahead=10 x264-params=sliced-threads=1 rc-lookahead=10:x264-params=sliced-threads=1}; do
    extra=(); [[ $opts == default ]] || extra=(--encoder-options "$opts")
    for i in 1 2; do
      file_run "decode 720p x81 encoder $opts #$i" decode /tmp/lat81.safetensors -o /tmp/dec81.mp4 \
        --weights /tmp/wan21_random.pth "${extra[@]}"
    done
    echo "    output $(stat -c %s /tmp/dec81.mp4) bytes"
    file_run "roundtrip 720p x81 encoder $opts" roundtrip /tmp/clip81.mp4 -o /tmp/rt81.mp4 \
      --weights /tmp/wan21_random.pth "${extra[@]}"
  done
fi
if has long; then
  step "long clips: 1001 frames of 1280x720 file to file, against 81 frames (GPU and host memory)"
  make_weights
  clip 81 /tmp/clip81.mp4
  clip 1001 /tmp/clip1001.mp4
  for preset in ${LONG_PRESETS:-none rtx4060-8g}; do
    args=(); [[ $preset != none ]] && args=(--preset "$preset")
    file_run "roundtrip 720p x81 $preset" roundtrip /tmp/clip81.mp4 -o /tmp/rt81.mp4 \
      --weights /tmp/wan21_random.pth "${args[@]}"
    file_run "roundtrip 720p x1001 $preset" roundtrip /tmp/clip1001.mp4 -o /tmp/rt1001.mp4 \
      --weights /tmp/wan21_random.pth "${args[@]}"
  done
fi
if has musubi; then  # a musubi-tuner dataset's caches (encode --dataset-config) against the reference's model calls
  step "musubi: 32 clips 1280x720 x150 at 30 fps, [960, 544], target_frames [1, 25, 45], head"
  make_weights && scripts/dev/musubi_dataset_bench.sh "$BUILD/vaecodec" /tmp/wan21_random.pth "$OUT/musubi"
fi
