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
#   FP8_ROWS, FP8_PROFILE (0: none)                  phase fp8: MODEL:OP:SIZE rows timed in bf16 and fp8,
#                                                    their accuracy at 256x256 x17, the fp8 decode's profile
# Phases: fp8 conv fresh coldtrace tests speed variants models margin memory tiers tier4k roundtrip autotune model_files psnr control
#   profile startup cold heuristics reference batch candidates encoder split scaling_split scaling_batch long musubi python
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-out/gpu}
BUILD=${BUILD_DIR:-build-gpu}
ARCH=${CUDA_ARCHS:-90}
RUNS=${RUNS:-3}
PHASES=${PHASES:-tests speed variants models memory roundtrip}
mkdir -p "$OUT"
step() { echo "== $* ($(date +%T))"; }
bench() {  # bench ARGS...: one JSON line to bench.jsonl, a short line to the log
  timeout "${BENCH_TIMEOUT:-150}" "$BUILD/vaecodec" bench -y --frames 81 --dtype "${DTYPE:-bf16}" --runs "$RUNS" --json "$@" \
    ${BENCH_EXTRA:-} >"$OUT/last.json" \
    2>>"$OUT/bench.err"
  local rc=$?
  if ((rc == 0)); then
    cat "$OUT/last.json" >>"$OUT/bench.jsonl"
    python3 -c "import json,sys; j=json.load(open(sys.argv[1])); p=j.get('plan') or {}; t=p.get('tiles') or {}; print('  %s %s %s %s conv %s chunk %s %s%s: %.3f s, %.0f TFLOP, %.0f TFLOP/s, %.2f GiB allocated, %.2f reserved, estimate %.2f, budget %.2f, within %s' % (j['model'], j['op'], j['size'], j.get('preset') or '-', j.get('conv', '-'), j['chunk_latent_frames'], '%sx%s tiles' % (t.get('rows'), t.get('cols')) if p.get('tiled') else 'untiled', ' offload' if p.get('offload') else '', j['median_s'], j['model_tflop'], j['tflops'], j.get('peak_allocated_gib', 0), j.get('peak_reserved_gib', 0), j.get('estimate_gib', 0), j.get('budget_bytes', 0)/2**30, j.get('within_budget')))" "$OUT/last.json"
  else
    echo "  FAILED ($rc): bench $*"; tail -2 "$OUT/bench.err"
  fi
}
has() { [[ " $PHASES " == *" $1 "* ]]; }

step configure
# CUTLASS's headers for the Hopper convolution kernels: the nvidia-cutlass wheel carried in .devkit (the GPU
# machines have no PyPI), unpacked once.
cutlass_args=()
wheel=$(ls .devkit/nvidia_cutlass-*.whl 2>/dev/null | head -1)
if [[ -n "$wheel" ]]; then
  [[ -d /tmp/cutlass/cutlass_library ]] || python3 -m zipfile -e "$wheel" /tmp/cutlass >/dev/null
  cutlass_args=(-DVAECODEC_CUTLASS_DIR=/tmp/cutlass/cutlass_library/source)
fi
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc \
  "${cutlass_args[@]}" \
  -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DCMAKE_PREFIX_PATH="${CMAKE_PREFIX_PATH:-};$PWD/.devkit" \
  >"$OUT/configure.log" 2>&1 || { tail -40 "$OUT/configure.log"; exit 1; }
step build
ninja -C "$BUILD" >"$OUT/build.log" 2>&1 || { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -60; exit 1; }
"$BUILD/vaecodec" info | tee "$OUT/info.txt"

if has tests; then
  step "GPU tests"
  timeout 420 "$BUILD/tests/vaecodec_tests" "${GPU_TESTS:-[gpu]}" -d yes >"$OUT/gpu_tests.log" 2>&1
  echo "gpu tests exit $?"; tail -4 "$OUT/gpu_tests.log"
  grep -E "FAILED|failed" -A8 "$OUT/gpu_tests.log" | head -40
  timeout 120 "$BUILD/tests/vaecodec_tests" "[golden]" -s 2>/dev/null | grep "^golden" | tee "$OUT/golden.txt"
fi

if has speed; then
  step "speed: Wan2.1, released architecture, random weights, 81 frames, bf16"
  bench --random --op decode --size 1280x720 --profile
  bench --random --op encode --size 1280x720 --profile
  bench --random --op decode --size 832x480
  bench --random --op encode --size 832x480
  for op in decode encode; do
    timeout 120 "$BUILD/vaecodec" bench --random --op $op --size 256x256 --frames 17 --dtype bf16 --accuracy --json \
      | tee -a "$OUT/bench.jsonl"
  done
fi

if has variants; then
  step "speed variants: Wan2.1 720p in the plain layout and with longer chunks"
  bench --random --op decode --size 1280x720 --layout contiguous
  bench --random --op decode --size 1280x720 --chunk 2
  bench --random --op encode --size 1280x720 --chunk 2
fi

if has models; then
  step "models: SeedVR2 and Wan2.2, released configs, random weights, 81 frames, bf16"
  bench --random --model seedvr2-vae --op decode --size 1280x720 --profile
  bench --random --model seedvr2-vae --op encode --size 1280x720 --profile
  bench --random --model wan2.2-vae --op decode --size 1280x704 --profile
  bench --random --model wan2.2-vae --op encode --size 1280x704 --profile
  for model in seedvr2-vae wan2.2-vae; do
    for op in decode encode; do
      timeout 120 "$BUILD/vaecodec" bench --random --model $model --op $op --size 256x256 --frames 17 --dtype bf16 \
        --accuracy --json | tee -a "$OUT/bench.jsonl"
    done
  done
fi

if has memory; then
  step "memory: GPU tiers emulated by capping the allocator at the preset's budget"
  for row in none:decode:1920x1080 rtx4060-8g:decode:1280x720 rtx4060-8g:encode:1280x720 \
             rtx4060-8g:decode:1920x1080 rtx3060-12g:decode:1920x1080 rtx4080-16g:decode:1920x1080 \
             rtx4090-24g:decode:3840x2160; do
    IFS=: read -r preset op size <<<"$row"
    args=(); [[ $preset != none ]] && args=(--preset "$preset")
    RUNS=1 bench --random --op "$op" --size "$size" "${args[@]}" --warmup 0
  done
fi

# Random weights of the released Wan2.1 architecture, written as a .pth by the machine's PyTorch.
make_weights() {
  [[ -f /tmp/wan21_random.pth ]] && return
  python3 - <<'PY'
import json, math, torch
keys = json.load(open("tests/data/wan21-released-keys.json"))
g = torch.Generator().manual_seed(0)
sd = {}
for name, shape in keys.items():
    if name.endswith("gamma"):
        sd[name] = 1 + 0.1 * torch.randn(shape, generator=g)
    elif len(shape) >= 2:
        fan_in = math.prod(shape[1:])
        sd[name] = torch.randn(shape, generator=g) / math.sqrt(fan_in)
    else:
        sd[name] = 0.02 * torch.randn(shape, generator=g)
torch.save(sd, "/tmp/wan21_random.pth")
PY
}
clip() {  # clip FRAMES PATH: textured 1280x720 x264 clip
  [[ -f "$2" ]] || ffmpeg -v error -y -f lavfi -i testsrc2=size=1280x720:rate=24 -frames:v "$1" \
    -vf noise=alls=20:allf=t -c:v libx264 -preset veryfast -pix_fmt yuv420p "$2"
}
# file_run NAME ARGS...: a CLI run with --json, its summary to runs.jsonl and a short line to the log.
file_run() {
  local name=$1; shift
  local start; start=$(date +%s.%N)
  if timeout 200 "$BUILD/vaecodec" "$@" -y ${RUN_EXTRA:-} --json --quiet >"$OUT/last_run.json" 2>>"$OUT/runs.err"; then
    python3 -c "import json,sys,time; j=json.load(open(sys.argv[1])); j['name']=sys.argv[2]; j['wall_s']=time.time()-float(sys.argv[3]); print(json.dumps(j)); p=j.get('plan') or {}; print('  %s: %d frames, run %.1f s (wall %.1f s), device peak %.2f GiB, host RSS %.0f MiB, plan chunk %s tiled %s offload %s, psnr %s' % (sys.argv[2], j['frames'], j['seconds'], j['wall_s'], j['peak_device_bytes']/2**30, j['peak_host_rss_bytes']/2**20, p.get('chunk'), p.get('tiled'), p.get('offload'), (j.get('quality') or {}).get('psnr')), file=sys.stderr); print('    stages: ' + ', '.join('%s %.2f s' % kv for kv in sorted(j.get('stage_seconds', {}).items())) + '; load: ' + ', '.join('%s %.2f s' % kv for kv in sorted(j.get('load_seconds', {}).items())), file=sys.stderr)" \
      "$OUT/last_run.json" "$name" "$start" >>"$OUT/runs.jsonl"
  else
    echo "  FAILED: $name"; tail -2 "$OUT/runs.err"
  fi
}

if has roundtrip; then
  step "file-to-file roundtrip 1280x720x81 bf16"
  make_weights
  clip 81 /tmp/clip81.mp4
  for i in 1 2; do
    file_run "roundtrip 720p x81 #$i" roundtrip /tmp/clip81.mp4 -o /tmp/rt81.mp4 --weights /tmp/wan21_random.pth
  done
  bench --weights /tmp/wan21_random.pth --op roundtrip --size 1280x720
fi

if has autotune; then
  step "cuDNN autotuning: what it costs at start-up and what it gains per chunk"
  make_weights
  clip 81 /tmp/clip81.mp4
  if [[ -z ${AUTOTUNE_FILES_ONLY:-} ]]; then
    bench --random --op decode --size 1280x720 --no-autotune
    bench --random --op encode --size 1280x720 --no-autotune
    RUNS=1 bench --random --op decode --size 1280x720 --warmup 0
  fi
  for mode in off on; do
    file_run "roundtrip 720p x81 autotune $mode" roundtrip /tmp/clip81.mp4 -o /tmp/rt81.mp4 \
      --weights /tmp/wan21_random.pth --autotune $mode
  done
  [[ -z ${AUTOTUNE_FILES_ONLY:-} ]] && RUNS=1 bench --random --op decode --size 1920x1080
fi

if has model_files; then
  step "SeedVR2 and Wan2.2 file to file: random weights of the released configs, 1280x720 x81, bf16"
  clip 81 /tmp/clip81.mp4
  python3 - <<'PY'
import json, math, torch
for name in ("seedvr2", "wan22"):
    keys = json.load(open(f"tests/data/{name}-released-keys.json"))
    g = torch.Generator().manual_seed(0)
    sd = {}
    for key, shape in keys.items():
        if key.endswith("gamma") or (len(shape) == 1 and "norm" in key and key.endswith("weight")):
            sd[key] = 1 + 0.1 * torch.randn(shape, generator=g)
        elif len(shape) >= 2:
            sd[key] = torch.randn(shape, generator=g) / math.sqrt(math.prod(shape[1:]))
        else:
            sd[key] = 0.02 * torch.randn(shape, generator=g)
    torch.save(sd, f"/tmp/{name}_random.pth")
PY
  for name in seedvr2 wan22; do
    file_run "$name roundtrip 720p x81" roundtrip /tmp/clip81.mp4 -o /tmp/rt_$name.mp4 --weights /tmp/${name}_random.pth
    file_run "$name encode 720p x81" encode /tmp/clip81.mp4 -o /tmp/z_$name.safetensors --weights /tmp/${name}_random.pth
    file_run "$name decode 720p x81" decode /tmp/z_$name.safetensors -o /tmp/dec_$name.mp4 --weights /tmp/${name}_random.pth
    ffprobe -v error -count_frames -select_streams v:0 -show_entries stream=width,height,nb_read_frames \
      -of csv=p=0 /tmp/rt_$name.mp4 | sed "s/^/  $name roundtrip output (w,h,frames): /"
  done
fi

if has margin; then
  # With no margin the planner keeps the whole frame just above its estimate: does the allocator's cap hold?
  step "fragmentation: untiled decodes under caps 0-6% above the estimate (--vram-margin 0)"
  for row in 1280x720:9GiB 1280x720:9.5GiB 1920x1080:20GiB 1920x1080:21GiB; do
    IFS=: read -r size vram <<<"$row"
    RUNS=1 bench --random --op decode --size "$size" --vram "$vram" --vram-margin 0 --warmup 1
  done
fi

if has tiers; then
  # Each row: one warm-up run (cuDNN timing, the allocator's first growth) and one timed run; the row without a
  # preset is the unconstrained reference for the slowdown.
  step "tiers: ${TIER_OPS:-decode} of ${TIER_SIZES:-1280x720 1920x1080} under each budget"
  for size in ${TIER_SIZES:-1280x720 1920x1080}; do
    for op in ${TIER_OPS:-decode}; do
      for preset in ${TIER_PRESETS:-none rtx4060-8g rtx3060-12g rtx4080-16g rtx4090-24g rtx5090-32g l40s-48g h100-80g h200-141g}; do
        args=(); [[ $preset != none ]] && args=(--preset "$preset")
        RUNS=1 bench --random --op "$op" --size "$size" "${args[@]}" --warmup 1
      done
    done
  done
fi

if has tier4k; then
  step "4K decode in the 24 GB tier"
  BENCH_TIMEOUT=${BENCH_TIMEOUT:-400} RUNS=1 bench --random --op decode --size 3840x2160 --preset rtx4090-24g --warmup 0
fi

if has psnr; then
  step "tiles against the whole frame: the planner's tiled plans, lossless output, PSNR against the untiled run"
  make_weights
  clip 81 /tmp/clip81.mp4
  for preset in none rtx4060-8g rtx3060-12g; do
    args=(); [[ $preset != none ]] && args=(--preset "$preset")
    file_run "roundtrip 720p x81 $preset ffv1" roundtrip /tmp/clip81.mp4 -o /tmp/tiles_$preset.mkv --codec ffv1 \
      --weights /tmp/wan21_random.pth "${args[@]}"
    [[ $preset == none ]] && continue
    ffmpeg -v info -i /tmp/tiles_none.mkv -i /tmp/tiles_$preset.mkv -lavfi "[0:v][1:v]psnr" -f null - 2>&1 \
      | grep -o "PSNR y:.*" | sed "s/^/  $preset against untiled: /"
  done
  RUNS=1 bench --random --op decode --size 1920x1080 --preset rtx4060-8g --compare-untiled --warmup 0
  RUNS=1 bench --random --op roundtrip --size 1280x720 --preset rtx4060-8g --compare-untiled --warmup 0
  grep -h untiled "$OUT/bench.jsonl" | python3 -c "import json,sys; [print('  %s %s: %s' % (j['op'], j['size'], {k: v for k, v in j.items() if 'untiled' in k})) for j in map(json.loads, sys.stdin)]"
fi

if has control; then
  # How far apart do two untiled runs get when only the precision differs? The tiles' PSNR above is only as
  # meaningful as this floor: random weights may amplify bf16 rounding as much as a tile boundary.
  step "precision control: untiled bf16 against untiled fp32, tiled fp32 against untiled fp32 (720p x81, ffv1)"
  make_weights
  clip 81 /tmp/clip81.mp4
  runs=${CONTROL_RUNS:-bf16:none fp32:none fp32:rtx4060-8g bf16:rtx4060-8g}
  for run in $runs; do
    IFS=: read -r dtype preset <<<"$run"
    args=(); [[ $preset != none ]] && args=(--preset "$preset")
    file_run "roundtrip 720p x81 $dtype $preset ffv1" roundtrip /tmp/clip81.mp4 -o /tmp/ctl_${dtype}_$preset.mkv \
      --codec ffv1 --weights /tmp/wan21_random.pth "${args[@]}" --dtype "$dtype"
  done
  # Each run against the untiled run of its dtype, and bf16 against fp32; per frame: PSNR at frames 1, 2, 5,
  # 10, 20, 40, 81.
  pairs=""
  for run in $runs; do
    IFS=: read -r dtype preset <<<"$run"
    [[ $preset != none ]] && pairs+=" ${dtype}_$preset:${dtype}_none"
  done
  [[ " $runs " == *" bf16:none "* && " $runs " == *" fp32:none "* ]] && pairs+=" bf16_none:fp32_none"
  for pair in $pairs; do
    IFS=: read -r a b <<<"$pair"
    ffmpeg -v info -i /tmp/ctl_$b.mkv -i /tmp/ctl_$a.mkv -lavfi "[0:v][1:v]psnr=stats_file=/tmp/ps_$a.txt" -f null - \
      2>&1 | grep -o "PSNR y:.*" | sed "s/^/  $a against $b: /"
    awk '$1 ~ /^n:(1|2|5|10|20|40|81)$/ {printf "%s %s  ", $1, $6} END {print ""}' /tmp/ps_$a.txt | sed "s/^/    per frame: /"
  done
fi

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
if has split; then  # needs two or more GPUs: one clip split across them in bands, against one GPU
  step "split: one clip across every GPU in bands (bench --split), against the first GPU alone"
  if (( $(nvidia-smi -L | wc -l) < 2 )); then
    echo "  one GPU here: nothing to split across"
  else
    # model:op:size[:extra bench arguments, comma-separated]; 4K under --vram 12G runs in columns (plan.tiles)
    for row in ${SPLIT_ROWS-wan2.1-vae:decode:1280x720 wan2.1-vae:encode:1280x720 seedvr2-vae:decode:1920x1080 \
               wan2.2-vae:decode:1280x704 wan2.1-vae:decode:3840x2160 wan2.1-vae:decode:3840x2160:--vram,12G}; do
      IFS=: read -r model op size extra <<<"$row"
      echo "  -- $row $(date +%T)" >>"$OUT/split.err"
      timeout "${SPLIT_TIMEOUT:-240}" "$BUILD/vaecodec" bench --random --model "$model" --op "$op" --size "$size" \
        --frames 81 --dtype bf16 --runs "$RUNS" --devices all --split --json ${extra//,/ } >"$OUT/last.json" \
        2>>"$OUT/split.err"
      rc=$?
      if ((rc == 0)); then
        cat "$OUT/last.json" >>"$OUT/split.jsonl"
        python3 -c "import json,sys; j=json.load(open(sys.argv[1])); s=j['split']; print('  %s: split %.3f s, one GPU %.3f s, %.2fx, %.0f TFLOP/s per device, error %s, tiles %s; ' % (sys.argv[2], s['median_s'], j['one_device']['median_s'], j['speedup_vs_one_device'], s['tflops_per_device'], s['relative_error_vs_one_device'], (s['plan'].get('tiles') or {}).get('cols')) + ', '.join('%s peak %.1f GiB, received %.0f MiB' % (d['device'], d['peak_allocated_bytes']/2**30, d['received_bytes_per_run']/2**20) for d in s['devices']))" "$OUT/last.json" "$row"
      else
        echo "  FAILED ($rc): $row"; tail -3 "$OUT/split.err"
      fi
    done
  fi
  # A batch of clips over every GPU against the first GPU alone, files to files, one command each.
  if (( ${SPLIT_CLIPS:-8} > 0 && $(nvidia-smi -L | wc -l) >= 2 )); then
    step "split: a batch of ${SPLIT_CLIPS:-8} 720p x81 clips (round trip) on every GPU against the first alone"
    make_weights
    clip 81 /tmp/clip81.mp4
    rm -rf /tmp/devbatch_in && mkdir -p /tmp/devbatch_in
    for i in $(seq 1 "${SPLIT_CLIPS:-8}"); do cp /tmp/clip81.mp4 "/tmp/devbatch_in/clip$i.mp4"; done
    for devices in "--device cuda:0" "--devices all"; do
      rm -rf /tmp/devbatch_out
      start=$(date +%s.%N)
      timeout 500 "$BUILD/vaecodec" roundtrip /tmp/devbatch_in -o /tmp/devbatch_out -y --weights /tmp/wan21_random.pth \
        --quiet $devices >/dev/null 2>>"$OUT/runs.err"
      rc=$?
      echo "  batch ${devices}: $(python3 -c "import sys,time; print('%.1f' % (time.time()-float(sys.argv[1])))" "$start") s (exit $rc)"
    done
  fi
fi

# Scaling past two GPUs (nvidia-h200-x4 / -x8): one clip split across 2, 4 and 8 GPUs against the first GPU
# alone (time, peak memory and bytes received per GPU, error against the first GPU's run), and a batch of
# ${SCALING_CLIPS:-32} 720p x81 clips (round trip) on 1, 2, 4 and 8 GPUs, files to files.
if has scaling_split; then
  gpus=$(nvidia-smi -L | wc -l)
  step "scaling_split: one clip across 2..$gpus GPUs (bench --split)"
  for n in 2 4 8; do
    ((n > gpus)) && break
    list=$(seq -s, 0 $((n - 1)))
    for row in wan2.1-vae:decode:3840x2160 seedvr2-vae:decode:1920x1080; do
      IFS=: read -r model op size <<<"$row"
      timeout 400 "$BUILD/vaecodec" bench --random --model "$model" --op "$op" --size "$size" --frames 81 \
        --dtype bf16 --runs "$RUNS" --devices "$list" --split --json | tee -a "$OUT/scaling.jsonl"
    done
  done
fi
if has scaling_batch; then
  gpus=$(nvidia-smi -L | wc -l)
  step "scaling_batch: ${SCALING_CLIPS:-32} 720p x81 clips (round trip) on 1..$gpus GPUs"
  make_weights
  clip 81 /tmp/clip81.mp4
  rm -rf /tmp/scale_in && mkdir -p /tmp/scale_in
  for i in $(seq 1 "${SCALING_CLIPS:-32}"); do cp /tmp/clip81.mp4 "/tmp/scale_in/clip$i.mp4"; done
  for n in 1 2 4 8; do
    ((n > gpus)) && break
    list=$(seq -s, 0 $((n - 1)))
    rm -rf /tmp/scale_out
    start=$(date +%s.%N)
    timeout 590 "$BUILD/vaecodec" roundtrip /tmp/scale_in -o /tmp/scale_out -y --weights /tmp/wan21_random.pth \
      --quiet --devices "$list" >/dev/null 2>>"$OUT/runs.err"
    rc=$?
    python3 -c "import sys,time; s=time.time()-float(sys.argv[1]); n=int(sys.argv[2]); print('  batch of %d on %s GPUs: %.1f s, %.2f clips/s (exit %s)' % (n, sys.argv[3], s, n/s, sys.argv[4]))" \
      "$start" "${SCALING_CLIPS:-32}" "$n" "$rc" | tee -a "$OUT/scaling.log"
  done
fi
if has batch; then
  # A folder of clips in one command against one command per clip: the model, the process and cuDNN's first
  # calls are paid once (Note [Batches]).
  step "batches: ${BATCH_CLIPS:-4} clips of 720p x81, one command per clip against one for the folder"
  make_weights
  clip 81 /tmp/clip81.mp4
  rm -rf /tmp/batch_in /tmp/batch_out /tmp/batch_lat && mkdir -p /tmp/batch_in
  for i in $(seq 1 "${BATCH_CLIPS:-4}"); do cp /tmp/clip81.mp4 "/tmp/batch_in/clip$i.mp4"; done
  for op in roundtrip encode; do
    ext=.mp4; [[ $op == encode ]] && ext=.safetensors
    start=$(date +%s.%N)
    for f in /tmp/batch_in/*.mp4; do
      timeout 200 "$BUILD/vaecodec" $op "$f" -o "/tmp/single$ext" -y --weights /tmp/wan21_random.pth --quiet
    done
    single=$(python3 -c "import sys,time; print('%.1f' % (time.time()-float(sys.argv[1])))" "$start")
    start=$(date +%s.%N)
    timeout 400 "$BUILD/vaecodec" $op /tmp/batch_in -o /tmp/batch_out_$op -y --weights /tmp/wan21_random.pth --json \
      >"$OUT/batch_$op.jsonl" 2>>"$OUT/runs.err"
    rc=$?
    whole=$(python3 -c "import sys,time; print('%.1f' % (time.time()-float(sys.argv[1])))" "$start")
    echo "  $op of ${BATCH_CLIPS:-4} clips: one command each ${single} s, one batch ${whole} s (exit $rc); per clip in the batch: $(python3 -c "import json,sys; print(', '.join('%.2f s' % json.loads(l)['seconds'] for l in open(sys.argv[1])))" "$OUT/batch_$op.jsonl")"
  done
fi
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
has python && OUT="$OUT" BUILD_DIR="$BUILD" RUNS="$RUNS" scripts/gpu_python.sh  # Python package
step done
