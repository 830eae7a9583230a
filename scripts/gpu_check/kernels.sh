# Phases conv fp8 fresh coldtrace profile of scripts/gpu_check.sh, which sources this file (the kernels and
# fresh processes: own convolutions, fp8, wall clock of fresh runs, traces). It uses the driver's OUT, BUILD
# and RUNS and scripts/gpu_check/common.sh's step, has, bench, make_weights, clip and file_run.

if has conv; then
  # Note [Own convolutions]: each shape on cuDNN and on every own tile that takes it, then whole models with
  # --conv cudnn against --conv own and auto (the same call, the same build).
  step "own convolutions: shape by shape (vaecodec_conv_micro), then models"
  if [[ ${CONV_MICRO:-1} != 0 ]]; then
    timeout 240 "$BUILD/tests/vaecodec_conv_micro" --runs 5 ${CONV_SHAPES:-} 2>&1 | tee "$OUT/conv_micro.txt"
  fi
  for conv in ${CONV_BACKENDS:-cudnn own auto}; do
    for row in ${CONV_ROWS:-wan2.1-vae:decode:1280x720 wan2.1-vae:encode:1280x720}; do
      IFS=: read -r model op size <<<"$row"
      bench --random --model "$model" --op "$op" --size "$size" --conv "$conv"
    done
  done
fi

if has fp8; then
  # Note [FP8 convolutions]: each row in bf16 and with --dtype fp8 (the same call, the same build), then the
  # error of each against float32 (bench --accuracy reports bf16's beside fp8's), then where the fp8 decode's
  # time goes, stage by stage.
  step "fp8: ${FP8_ROWS:-wan2.1 720p and 480p, wan2.2 1280x704} in bf16 and fp8, accuracy, profile"
  rows=${FP8_ROWS:-wan2.1-vae:decode:1280x720 wan2.1-vae:encode:1280x720 wan2.1-vae:decode:832x480 wan2.1-vae:encode:832x480 wan2.2-vae:decode:1280x704 wan2.2-vae:encode:1280x704}
  for row in $rows; do
    IFS=: read -r model op size <<<"$row"
    for dtype in bf16 fp8; do
      DTYPE=$dtype bench --random --model "$model" --op "$op" --size "$size"
      echo "    ($dtype)"
    done
  done
  for row in $rows; do
    IFS=: read -r model op size <<<"$row"
    [[ $size == 1280x720 || $size == 1280x704 ]] || continue
    timeout 120 "$BUILD/vaecodec" bench --random --model "$model" --op "$op" --size 256x256 --frames 17 \
      --dtype fp8 --runs 1 --warmup 0 --accuracy --json 2>>"$OUT/bench.err" |
      python3 -c "import json,sys; j=json.load(sys.stdin); print('  accuracy %s %s 256x256 x17: fp8 %.3e (%s dB), bf16 %.3e (%s dB)' % (j['model'], j['op'], j['relative_l2_vs_fp32'], j.get('psnr_vs_fp32_db', '-'), j['bf16_relative_l2_vs_fp32'], j.get('bf16_psnr_vs_fp32_db', '-')))"
  done
  if [[ ${FP8_PROFILE:-1} != 0 ]]; then
    RUNS=1 DTYPE=fp8 bench --random --op decode --size 1280x720 --trace /tmp/trace_fp8.json
    python3 scripts/dev/trace_summary.py /tmp/trace_fp8.json --top 25 | tee "$OUT/trace_fp8.txt"
  fi
fi

if has fresh; then
  # Issue 15's wall-clock rows: a fresh process decoding 81 frames of 720p latents to .mp4, and round-tripping
  # an 81-frame 720p .mp4, each with cuDNN alone and with the own kernels (the default, --conv auto).
  step "fresh processes: decode latents -> .mp4 and roundtrip .mp4 -> .mp4, 720p x81, wall clock"
  make_weights
  clip 81 /tmp/clip81.mp4
  "$BUILD/vaecodec" encode /tmp/clip81.mp4 -o /tmp/lat81.safetensors -y --weights /tmp/wan21_random.pth --quiet
  for conv in ${FRESH_BACKENDS:-cudnn auto}; do
    for i in 1 2; do
      file_run "decode latents 720p x81 --conv $conv #$i" decode /tmp/lat81.safetensors -o /tmp/dec81.mp4 \
        --weights /tmp/wan21_random.pth --conv "$conv"
      file_run "roundtrip 720p x81 --conv $conv #$i" roundtrip /tmp/clip81.mp4 -o /tmp/rt81.mp4 \
        --weights /tmp/wan21_random.pth --conv "$conv"
    done
  done
  # Where the wall clock goes: the libraries alone, CUDA's start, then each job's messages and progress with
  # the seconds since the process started (scripts/dev/fresh_timeline.py), per x264 setting.
  { time "$BUILD/vaecodec" --version; } 2>&1 | grep -E "vaecodec|real" | tr '\n' ' ' | tee -a "$OUT/timeline.txt"
  echo | tee -a "$OUT/timeline.txt"
  { time "$BUILD/vaecodec" info >/dev/null; } 2>&1 | grep real | sed 's/^/info: /' | tee -a "$OUT/timeline.txt"
  # FRESH_TIMELINES: CONV@ENCODER-OPTIONS entries (default: x264's settings as vaecodec sets them).
  for entry in ${FRESH_TIMELINES:-auto@default}; do
    conv=${entry%%@*}; opts=${entry#*@}
    extra=(--conv "$conv"); [[ $opts == default ]] || extra+=(--encoder-options "$opts")
    for job in decode roundtrip; do
      input=/tmp/lat81.safetensors; [[ $job == roundtrip ]] && input=/tmp/clip81.mp4
      echo "timeline: $job 720p x81, --conv $conv, encoder $opts" | tee -a "$OUT/timeline.txt"
      timeout 120 python3 scripts/dev/fresh_timeline.py "$BUILD/vaecodec" "$job" "$input" -o "/tmp/tl_$job.mp4" -y \
        --weights /tmp/wan21_random.pth --verbose "${extra[@]}" 2>&1 | grep -v "engine: \|attention: " |
        tee -a "$OUT/timeline.txt"
      echo "  output $(stat -c %s "/tmp/tl_$job.mp4") bytes" | tee -a "$OUT/timeline.txt"
    done
  done
fi

if has coldtrace; then
  # A fresh process's first chunks: the GPU's idle gaps in a traced first run (scripts/dev/trace_gaps.py).
  step "cold run traced: Wan2.1 decode 1280x720 x81, first run of the process"
  for conv in ${COLD_BACKENDS:-auto}; do
    RUNS=1 bench --random --op decode --size 1280x720 --warmup 0 --no-autotune --conv "$conv" \
      --trace "/tmp/cold_$conv.json"
    python3 scripts/dev/trace_gaps.py "/tmp/cold_$conv.json" --top 30 | tee "$OUT/cold_$conv.txt"
  done
fi

if has profile; then
  # Kernel by kernel (LibTorch's Kineto profiler): which operators and shapes take the GPU's time, and how much
  # of the run the GPU is idle. Plus micro-benchmarks of formulations the engine could switch to.
  step "kernel profile: ${PROFILE_OPS:-decode encode} 1280x720 x81 (bench --trace)"
  for op in ${PROFILE_OPS:-decode encode}; do
    RUNS=1 bench --random --op "$op" --size 1280x720 --trace "/tmp/trace_$op.json"
    python3 scripts/dev/trace_summary.py "/tmp/trace_$op.json" --top 25 | tee "$OUT/trace_$op.txt"
  done
  for micro in ${MICRO:-}; do
    timeout 120 python3 "scripts/dev/$micro" 2>&1 | tee -a "$OUT/micro.txt"
  done
fi
