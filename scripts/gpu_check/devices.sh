# Phases split scaling_split scaling_batch batch of scripts/gpu_check.sh, which sources this file (several
# GPUs and batches: splits, scaling past two GPUs, a folder in one command). It uses the driver's OUT, BUILD
# and RUNS and scripts/gpu_check/common.sh's step, has, bench, make_weights, clip and file_run.

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
  for n in ${SCALING_SPLIT_COUNTS:-2 3 4 8}; do
    ((n > gpus)) && break
    list=$(seq -s, 0 $((n - 1)))
    # model:op:size[:extra bench arguments, comma-separated]
    for row in ${SCALING_ROWS-wan2.1-vae:decode:1280x720 wan2.1-vae:encode:1280x720 wan2.1-vae:decode:3840x2160 \
               seedvr2-vae:decode:1920x1080}; do
      IFS=: read -r model op size extra <<<"$row"
      echo "  -- $n GPUs $row $(date +%T)" >>"$OUT/scaling.err"
      timeout "${SCALING_TIMEOUT:-400}" "$BUILD/vaecodec" bench --random --model "$model" --op "$op" --size "$size" \
        --frames 81 --dtype bf16 --runs "$RUNS" --devices "$list" --split --json ${extra//,/ } >"$OUT/last.json" \
        2>>"$OUT/scaling.err"
      rc=$?
      if ((rc == 0)); then
        cat "$OUT/last.json" >>"$OUT/scaling.jsonl"
        python3 -c "import json,sys; j=json.load(open(sys.argv[1])); s=j['split']; print('  %s GPUs %s: split %.3f s, one GPU %.3f s, %.2fx, error %s; ' % (sys.argv[3], sys.argv[2], s['median_s'], j['one_device']['median_s'], j['speedup_vs_one_device'], s['relative_error_vs_one_device']) + ', '.join('%s %.1f GiB %.0f MiB in' % (d['device'], d['peak_allocated_bytes']/2**30, d['received_bytes_per_run']/2**20) for d in s['devices']))" "$OUT/last.json" "$row" "$n"
      else
        echo "  FAILED ($rc): $n GPUs $row"; tail -3 "$OUT/scaling.err"
      fi
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
  for n in ${SCALING_COUNTS:-1 2 4 8}; do
    ((n > gpus)) && break
    list=$(seq -s, 0 $((n - 1)))
    rm -rf /tmp/scale_out
    start=$(date +%s.%N)
    # --json: a line per clip with its device, start and seconds by stage (the per-device timelines)
    timeout 590 "$BUILD/vaecodec" roundtrip /tmp/scale_in -o /tmp/scale_out -y --weights /tmp/wan21_random.pth \
      --json --devices "$list" ${SCALING_BATCH_EXTRA:-} >"$OUT/scaling_batch_$n.jsonl" 2>>"$OUT/runs.err"
    rc=$?
    python3 scripts/dev/batch_timeline.py "$OUT/scaling_batch_$n.jsonl" | sed 's/^/    /'
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
