# Phases tests speed variants models memory of scripts/gpu_check.sh, which sources this file (the GPU tests,
# then bench rows: speed, layouts and chunks, the other families, memory tiers). It uses the driver's OUT,
# BUILD and RUNS and scripts/gpu_check/common.sh's step, has, bench, make_weights, clip and file_run.

if has tests; then
  step "GPU tests"
  # Tests that need what this machine lacks (two GPUs, a Hopper GPU) fail when Catch runs them: the default
  # filter leaves them out and names them as not run (Note [Tests that cannot run here]). [multi-gpu] tests
  # run on 2, 3, ... up to all the GPUs here in turn (Note [Tests on several GPUs]); CTest's entries for the
  # counts beyond this machine's (up to 4) are named as not run too.
  filter=${GPU_TESTS:-[gpu]}
  if [[ -z ${GPU_TESTS:-} ]]; then
    read -r gpus hopper < <(python3 scripts/test_needs.py "$BUILD/vaecodec")
    not_run() { "$BUILD/tests/vaecodec_tests" "[$1]" --list-test-names-only | grep . | sed "s/^/  not run ($2): /"; }
    ((hopper)) || { filter+="~[hopper]"; not_run hopper "needs a Hopper GPU"; }
    if ((gpus >= 2)); then
      echo "  [multi-gpu] tests run on 2 to $gpus GPUs"
      ((gpus >= 4)) || not_run multi-gpu "on $((gpus + 1)) to 4 GPUs: $gpus here"
    else
      filter+="~[multi-gpu]"
      not_run multi-gpu "needs 2 to 4 GPUs: $gpus here"
    fi
  fi
  timeout 540 "$BUILD/tests/vaecodec_tests" "$filter" -d yes >"$OUT/gpu_tests.log" 2>&1
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

if has ltx2; then
  # LTX-2.3's released config, random weights, at the size diffusers is compared at (scripts/bench_ltx2.py):
  # cuDNN's timing on and off (the decode's peak is 4x its architecture's count: is it cuDNN's workspaces?),
  # then where the decode's time goes, from a trace of one warm run.
  step "ltx2: LTX-2.3, 1280x704 x121, bf16: --autotune on/off, the decode's trace"
  for autotune in on off; do
    for op in decode encode; do
      timeout 300 "$BUILD/vaecodec" bench --random --model ltx2-vae --op $op --size 1280x704 --frames 121 \
        --dtype bf16 --runs "$RUNS" --autotune $autotune --json -v >"$OUT/last.json" 2>>"$OUT/ltx2.err" &&
        cat "$OUT/last.json" >>"$OUT/bench.jsonl" &&
        python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('  ltx2 %s autotune %s: %.3f s, %.0f TFLOP/s, peak %.2f GiB allocated (%.2f reserved), estimate %.2f' % (j['op'], sys.argv[2], j['median_s'], j['tflops'], j['peak_allocated_gib'], j['peak_reserved_gib'], j['estimate_gib']))" "$OUT/last.json" $autotune
    done
  done
  timeout 300 "$BUILD/vaecodec" bench --random --model ltx2-vae --op decode --size 1280x704 --frames 121 --dtype bf16 \
    --runs 1 --trace "$OUT/ltx2_decode_trace.json" -y >/dev/null 2>>"$OUT/ltx2.err" &&
    python3 scripts/dev/trace_summary.py "$OUT/ltx2_decode_trace.json" --top 25 >"$OUT/ltx2_decode_trace.txt" &&
    python3 scripts/dev/trace_gaps.py "$OUT/ltx2_decode_trace.json" --top 15 >>"$OUT/ltx2_decode_trace.txt" &&
    head -40 "$OUT/ltx2_decode_trace.txt" && gzip -f "$OUT/ltx2_decode_trace.json"
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
