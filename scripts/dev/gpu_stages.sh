#!/usr/bin/env bash
# On a GPU machine, in stages that fit its 10-minute calls: build once, then chain calls while it is warm.
#   scripts/dev/gpu_stages.sh STAGE...     stages, in the order given:
#     build   configure and build build-gpu (scripts/gpu_check.sh with no phase; ~5 min on 16 cores)
#     tests   the GPU tests on one GPU (GPU_TESTS, default "[gpu]~[multi-gpu]")
#     rows    SeedVR2 bench rows: ROWS="OP:SIZE:FRAMES:BUDGET[:HOST]..." (BUDGET none | 12G | a preset;
#             HOST the --host-memory of a budget row, default 16G), one JSON line each in $OUT/rows.jsonl;
#             ROWS_ARGS adds bench options to every row (--clip-on-host: the clip in host memory, streamed
#             as a file run's; Note [A clip in host memory] in app/bench_support.cpp)
#     files   phase seedvr2_files of scripts/gpu_check.sh (SV2_SIZES, SV2_PRESETS)
#     probe   scripts/dev/copy_probe.py: the host link's copy rates and the time to lock host memory
#     train   scripts/train_tiny.py on .train/pack (scripts/dev/train_carry.sh; carry .train/pack): prepares the data
#             once per machine, then trains TRAIN_MODEL (wan2.1 or seedvr2) from TRAIN_INIT (default the
#             committed weights; none: a random start) with TRAIN_ARGS until TRAIN_LIMIT (default the call's limit), into
#             $OUT/train-TRAIN_TAG (default TRAIN_MODEL), on GPU TRAIN_GPU if set; with TRAIN_BACKGROUND=1 it
#             runs beside the stages after it (a build, GPU tests; not timed rows) and the last stage waits for
#             it. Trainings on other GPUs run as further invocations with stage train alone, started together:
#             the kit is unpacked and the data prepared once (a lock).
#             A schedule longer than a call: TRAIN_ARGS="--steps N" in the first call (it stops at the limit and
#             leaves train-TAG/state.pt), then TRAIN_INIT=none TRAIN_ARGS="--resume /tmp/keep/TAG/state.pt
#             --compile" in the next ones (copy the state there before the call ends; the state holds the run's
#             math, not how it runs: give --compile and --checkpoint-every again).
# Every stage stops LIMIT seconds (default 585) after the script started, so a call's results come back.
# A call brings back at most 8 files of $OUT: pack trained weights (weights.safetensors + meta.json of each
# training, not its checkpoints) into one tar there, and keep a copy under /tmp for the next call on the warm
# machine to start from (TRAIN_INIT=/tmp/...).
# Expects .devkit as scripts/gpu_check.sh does (the kit, CUTLASS's headers, nlohmann and toml++ headers).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
T0=$(date +%s)
if [[ -f .devkit/kit.tar.xz ]]; then
  (flock 9; [[ -f /opt/vaecodec-kit/env.sh ]] || tar -xJf .devkit/kit.tar.xz -C /opt) 9>/tmp/.vaecodec-kit.lock
  source /opt/vaecodec-kit/env.sh
fi
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
left() { echo $((${LIMIT:-585} - ($(date +%s) - T0))); }
at() { echo "$1 at $(($(date +%s) - T0)) s"; }
summary='import json, sys
j = json.load(open(sys.argv[1])); p = j.get("plan") or {}; t = p.get("tiles") or {}
print("%s: %.3f s (planned %.2f), peak %.2f/%.2f GiB (estimate %.2f), host %.2f GiB, %sx%s %s" % (sys.argv[2],
      j["median_s"], p.get("estimated_seconds", 0), j["peak_allocated_gib"], j["peak_reserved_gib"],
      j["estimate_gib"], j.get("peak_host_rss_runs_bytes", 0) / 2**30, t.get("rows"), t.get("cols"), p.get("split")))'
for stage in "$@"; do
  case $stage in
    build)
      # Beside a training in the background the build yields the CPU to it (its kernel launches).
      PHASES=none OUT=/tmp/gpu-build-logs BUILD_DIR=build-gpu nice -n 10 scripts/gpu_check.sh >"$OUT/build.txt" 2>&1
      at "build rc $?"
      tail -3 "$OUT/build.txt" ;;
    tests)
      timeout $(($(left) - 5)) build-gpu/tests/vaecodec_tests "${GPU_TESTS:-[gpu]~[multi-gpu]}" >"$OUT/tests.txt" 2>&1
      at "tests rc $?"
      tail -3 "$OUT/tests.txt" ;;
    rows)
      for row in ${ROWS:?rows need ROWS}; do
        IFS=: read -r op size frames budget host <<<"$row"
        args=()
        [[ $budget == none ]] || args+=(--host-memory "${host:-16G}")
        [[ $budget == *G ]] && args+=(--vram "$budget")
        [[ $budget == rtx* || $budget == h* ]] && args+=(--preset "$budget")
        (($(left) < 30)) && { echo "no time left for $row"; continue; }
        if timeout $(($(left) - 3)) build-gpu/vaecodec bench -y --random --model seedvr2-vae --op "$op" --size "$size" \
          --frames "$frames" --dtype bf16 --runs 1 --warmup 1 "${args[@]}" ${ROWS_ARGS:-} --json >"$OUT/last.json" 2>>"$OUT/bench.err"; then
          python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); j["row"] = sys.argv[2]; print(json.dumps(j))' \
            "$OUT/last.json" "$row" >>"$OUT/rows.jsonl"
          python3 -c "$summary" "$OUT/last.json" "$row"
        else
          echo "$row failed: $(tail -1 "$OUT/bench.err")"
        fi
      done ;;
    files)
      timeout $(($(left) - 5)) env PHASES=seedvr2_files OUT="$OUT/files" BUILD_DIR=build-gpu scripts/gpu_check.sh \
        >"$OUT/files.txt" 2>&1
      at "files rc $?"
      grep -v '^\[' "$OUT/files.txt" | tail -30 ;;
    probe)
      timeout $(($(left) - 5)) python3 scripts/dev/copy_probe.py 2>&1 | tee "$OUT/probe.txt"
      at "probe rc $?" ;;
    train)
      model=${TRAIN_MODEL:-wan2.1}
      case $model in
        wan2.1) init=tests/data/wan21-trained/weights.safetensors ;;
        seedvr2) init=tests/data/seedvr2-trained/weights.safetensors ;;
        *) echo "TRAIN_MODEL: wan2.1 or seedvr2, not $model" >&2; exit 2 ;;
      esac
      init=${TRAIN_INIT:-$init}
      (
        flock 9
        [[ -f /tmp/data/heldout_carphone.npy ]] || python3 scripts/train_tiny.py prepare --pack .train/pack \
          --out /tmp/data >"$OUT/prepare.txt" 2>&1 || { tail -5 "$OUT/prepare.txt"; exit 1; }
      ) 9>/tmp/.vaecodec-data.lock || exit 1
      tag=${TRAIN_TAG:-$model}
      # Training stops 60 s before the limit: the held-out evaluation and the save come after it.
      budget=$((${TRAIN_LIMIT:-${LIMIT:-585}} - ($(date +%s) - T0) - 60))
      ((budget > 60)) || { echo "no time left to train"; continue; }
      from=(--init "$init")
      [[ $init == none ]] && from=()  # from a random initialisation (another --width or --dim-mult)
      train_cmd=(env ${TRAIN_GPU:+CUDA_VISIBLE_DEVICES=$TRAIN_GPU} python3 scripts/train_tiny.py train
        --model "$model" "${from[@]}" --data /tmp/data --out "$OUT/train-$tag" --seconds "$budget" --max-seconds "$budget" ${TRAIN_ARGS:-})
      if [[ ${TRAIN_BACKGROUND:-0} == 1 ]]; then
        "${train_cmd[@]}" >"$OUT/train-$tag.txt" 2>&1 &
        train_pid=$!
        at "train started in the background ($budget s)"
      else
        "${train_cmd[@]}" >"$OUT/train-$tag.txt" 2>&1
        at "train $tag rc $?"
        tail -4 "$OUT/train-$tag.txt"
      fi ;;
    *) echo "unknown stage $stage" >&2; exit 2 ;;
  esac
done
if [[ -n ${train_pid:-} ]]; then
  wait "$train_pid"
  at "train rc $?"
  tail -4 "$OUT"/train-*.txt
fi
at done
