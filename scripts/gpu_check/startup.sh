# Phases startup cold heuristics reference of scripts/gpu_check.sh, which sources this file (start-up and
# cuDNN's choices, and bf16 accuracy against plain PyTorch). It uses the driver's OUT, BUILD and RUNS and
# scripts/gpu_check/common.sh's step, has, bench, make_weights, clip and file_run.

if has startup; then
  # A file run pays a fixed start-up (first calls of every convolution shape) that bench's warm-up hides: clips
  # of several lengths give the fixed part and the per-frame rate.
  step "start-up: file round trips of 9, 41, 81, 161 frames; first calls of convolution shapes"
  make_weights
  for n in 9 41 81 161; do
    clip "$n" "/tmp/clip$n.mp4"
    file_run "roundtrip 720p x$n" roundtrip "/tmp/clip$n.mp4" -o "/tmp/rt$n.mp4" --weights /tmp/wan21_random.pth
  done
  timeout 120 python3 scripts/dev/startup_probe.py 2>&1 | tee -a "$OUT/startup.txt"
fi

if has cold; then
  # The VAE's own start-up: one cold run (first calls of every shape, no cuDNN timing) against warm runs, and
  # the file round trip's load and pipeline times beside it, with CUDA's modules loaded lazily and eagerly.
  step "cold start: bench round trip cold and warm without timing; file round trips 81 frames"
  make_weights
  clip 81 /tmp/clip81.mp4
  RUNS=1 bench --random --op roundtrip --size 1280x720 --no-autotune --warmup 0
  RUNS=2 bench --random --op roundtrip --size 1280x720 --no-autotune
  for i in 1 2; do
    file_run "roundtrip 720p x81 #$i" roundtrip /tmp/clip81.mp4 -o /tmp/rt81.mp4 --weights /tmp/wan21_random.pth
  done
  CUDA_MODULE_LOADING=EAGER file_run "roundtrip 720p x81 eager modules" roundtrip /tmp/clip81.mp4 \
    -o /tmp/rt81.mp4 --weights /tmp/wan21_random.pth
  for n in ${COLD_CLIPS:-}; do
    clip "$n" "/tmp/clip$n.mp4"
    file_run "roundtrip 720p x$n" roundtrip "/tmp/clip$n.mp4" -o "/tmp/rt$n.mp4" --weights /tmp/wan21_random.pth
  done
fi

if has heuristics; then
  # How cuDNN picks a convolution's kernel without timing: LibTorch's default heuristics (mode A, instant),
  # mode B (slower to ask, meant to pick better), and the older v7 API. Cold and warm VAE runs, file round trips
  # untimed and timed.
  step "cuDNN heuristics: default, mode B, v7 API (bench round trip cold / warm untimed; file round trips)"
  make_weights
  clip 81 /tmp/clip81.mp4
  for variant in ${HEURISTICS:-default TORCH_CUDNN_USE_HEURISTIC_MODE_B=1 TORCH_CUDNN_V8_API_DISABLED=1}; do
    echo "  -- $variant"
    (
      [[ $variant != default ]] && export "${variant?}"
      RUNS=1 bench --random --op roundtrip --size 1280x720 --no-autotune --warmup 0
      RUNS=2 bench --random --op roundtrip --size 1280x720 --no-autotune
      RUNS=2 bench --random --op roundtrip --size 1280x720
      for mode in off on; do
        file_run "roundtrip 720p x81 autotune $mode" roundtrip /tmp/clip81.mp4 -o /tmp/rt81.mp4 \
          --weights /tmp/wan21_random.pth --autotune $mode
      done
    )
  done
fi

if has reference; then
  # The bar for bf16 encode accuracy on the same weights and input: a plain eager PyTorch encoder
  # (scripts/dev/reference_encoder.py, bf16 against its own fp32) beside vaecodec's bench --accuracy.
  step "bf16 encode accuracy against fp32: plain PyTorch and vaecodec on the same weights and input"
  make_weights
  for size in ${REFERENCE_SIZES:-256x256 832x480}; do
    timeout 120 python3 scripts/dev/reference_encoder.py --weights /tmp/wan21_random.pth --size "$size" --frames 17 \
      | tee -a "$OUT/reference.jsonl"
    timeout 120 "$BUILD/vaecodec" bench --weights /tmp/wan21_random.pth --op encode --size "$size" --frames 17 \
      --dtype bf16 --accuracy --json | python3 -c "import json,sys; j=json.load(sys.stdin); print(json.dumps({'vaecodec': 'bench --accuracy', 'op': j['op'], 'size': j['size'], 'frames': j['frames'], 'relative_l2_bf16_vs_fp32': j['relative_l2_vs_fp32']}))" \
      | tee -a "$OUT/reference.jsonl"
  done
fi
