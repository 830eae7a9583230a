# Phases roundtrip autotune model_files margin tiers tier4k psnr control seedvr2_files seedvr2_gaps of
# scripts/gpu_check.sh, which sources this file (file-to-file runs and budgets: round trips, cuDNN timing, the
# other families file to file, the allocator cap, GPU tiers, tiles against the whole frame, SeedVR2 under the
# tiers' budgets). It uses the driver's OUT, BUILD and RUNS and scripts/gpu_check/common.sh's step, has, bench,
# make_weights, family_weights, clip and file_run.

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
  family_weights seedvr2 wan22
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

if has seedvr2_rows; then
  # Issue 38's budget rows: SeedVR2 decode and encode at 1080p x81 and 4K x21 under the GPU tiers with a 32 GB
  # desktop's host budget, beside the unconstrained runs (1080p x81, and 1080p x21, whose rate per pixel is
  # 4K's baseline where 4K does not fit the card), each after a warm-up run.
  step "SeedVR2 budget rows: 1920x1080 x81 and 3840x2160 x21 under ${SV2_BUDGETS:-rtx4060-8g 12G rtx5070ti-16g rtx4090-24g}"
  # SV2_ROWS picks some of them (SIZE:FRAMES:none|budgets), to fit a call's time limit.
  for row in ${SV2_ROWS:-1920x1080:81:none 1920x1080:81:budgets 1920x1080:21:none 3840x2160:21:budgets}; do
    IFS=: read -r size frames kind <<<"$row"
    for op in decode encode; do
      budgets=(none); [[ $kind == budgets ]] && budgets=(${SV2_BUDGETS:-rtx4060-8g 12G rtx5070ti-16g rtx4090-24g})
      for budget in "${budgets[@]}"; do
        args=()
        [[ $budget == none ]] || args=(--host-memory 16G)
        [[ $budget == *G ]] && args+=(--vram "$budget")
        [[ $budget == rtx* ]] && args+=(--preset "$budget")
        timeout 400 "$BUILD/vaecodec" bench -y --random --model seedvr2-vae --op "$op" --size "$size" --frames "$frames" \
          --dtype bf16 --runs 1 --warmup 1 "${args[@]}" --json >"$OUT/last.json" 2>>"$OUT/bench.err" &&
          cat "$OUT/last.json" >>"$OUT/bench.jsonl" &&
          python3 -c "import json,sys; j=json.load(open(sys.argv[1])); p=j.get('plan') or {}; t=p.get('tiles') or {}; print('  %s %s x%s %s: %.3f s (planned %.2f), peak %.2f allocated / %.2f reserved GiB (estimate %.2f), host %.2f GiB, %sx%s tiles %s' % (j['op'], j['size'], j['frames'], sys.argv[2], j['median_s'], p.get('estimated_seconds', 0), j['peak_allocated_gib'], j['peak_reserved_gib'], j['estimate_gib'], j.get('peak_host_rss_runs_bytes', 0) / 2**30, t.get('rows'), t.get('cols'), p.get('split')))" "$OUT/last.json" "$budget" ||
          { echo "  FAILED: $op $size x$frames $budget"; tail -1 "$OUT/bench.err"; }
      done
    done
  done
fi

if has seedvr2_files; then
  # SeedVR2 where its users run it: file to file under the GPU tiers' presets with a 32 GB desktop's host budget
  # (--host-memory 16G), each run's host RSS and device peak beside the planner's estimates. The latents are
  # the clip's encode under the first preset (the unconstrained 4K encode does not fit an 80 GB card).
  step "SeedVR2 file to file: ${SV2_SIZES:-1920x1080 3840x2160} x81 under ${SV2_PRESETS:-rtx4060-8g rtx5070ti-16g rtx4090-24g}"
  family_weights seedvr2
  presets=(${SV2_PRESETS:-rtx4060-8g rtx5070ti-16g rtx4090-24g})
  for size in ${SV2_SIZES:-1920x1080 3840x2160}; do
    src=/tmp/sv2_clip_$size.mp4
    [[ -f $src ]] || ffmpeg -v error -y -f lavfi -i "testsrc2=size=$size:rate=24" -frames:v 81 \
      -vf noise=alls=20:allf=t -c:v libx264 -preset veryfast -pix_fmt yuv420p "$src"
    for preset in "${presets[@]}"; do
      file_run "seedvr2 encode $size $preset" encode "$src" -o /tmp/sv2_z_$size.safetensors \
        --weights /tmp/seedvr2_random.pth --preset "$preset" --host-memory 16G
      [[ $preset == "${presets[0]}" ]] && cp /tmp/sv2_z_$size.safetensors /tmp/sv2_z0_$size.safetensors
    done
    for preset in "${presets[@]}"; do
      file_run "seedvr2 decode $size $preset" decode /tmp/sv2_z0_$size.safetensors -o /tmp/sv2_dec.mp4 \
        --weights /tmp/seedvr2_random.pth --preset "$preset" --host-memory 16G
    done
  done
fi

if has seedvr2_gaps; then
  # Tiles through time under a tight cap: a warm 4K decode's trace had the GPU idle 10% of the run in gaps of
  # ~24 ms, one per chunk, with the host inside an allocation (the allocator giving memory back under the cap
  # with a synchronisation, or page-locked host buffers). Each row with the default allocator settings and with
  # a garbage-collection threshold (which frees unused blocks before the cap is hit, without a sync), traced.
  step "SeedVR2 tiles through time under the cap: allocator settings, traced gaps"
  for row in rtx4060-8g:1920x1080:81 rtx4090-24g:3840x2160:21; do
    IFS=: read -r preset size frames <<<"$row"
    for conf in expandable_segments:True expandable_segments:True,garbage_collection_threshold:0.8; do
      tag="$preset-${conf//[:,.]/_}"
      PYTORCH_CUDA_ALLOC_CONF=$conf timeout 400 "$BUILD/vaecodec" bench -y --random --model seedvr2-vae --op decode \
        --size "$size" --frames "$frames" --dtype bf16 --runs 1 --warmup 1 --preset "$preset" --host-memory 16G \
        --trace "/tmp/sv2_$tag.json" --json >"$OUT/last.json" 2>>"$OUT/bench.err" &&
        cat "$OUT/last.json" >>"$OUT/bench.jsonl" &&
        python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('  %s %s x%s %s: %.3f s, peak %.2f allocated / %.2f reserved GiB' % (j['model'], j['size'], j['frames'], sys.argv[2], j['median_s'], j['peak_allocated_gib'], j['peak_reserved_gib']))" "$OUT/last.json" "$tag" &&
        python3 scripts/dev/trace_gaps.py "/tmp/sv2_$tag.json" --top 10 >"$OUT/gaps_$tag.txt" && head -12 "$OUT/gaps_$tag.txt"
    done
  done
fi
