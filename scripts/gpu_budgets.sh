#!/usr/bin/env bash
# On a GPU machine, after scripts/gpu_check.sh built $BUILD: what a VRAM budget costs (exact tiles through
# time, docs/memory.md). Every row runs beside the unconstrained run of the same model, op and size in the same
# call; each bench row is one warm-up and one timed run, with the plan's estimate and the error against the
# untiled run. Results: a line per row on stdout and $OUT/budgets.jsonl (one bench JSON per row).
#   BUDGET_ROWS     MODEL:OP:SIZE rows (unset: the Wan2.1 rows; set and empty: none, e.g. for ROUNDTRIP alone)
#   BUDGETS         the --vram values and presets of each row (default: 8G 12G 16G 24G)
#   ROUNDTRIP=1     also the 1080p x41 round trip with 10 GiB left free by another process
#   BUDGET_EXTRA    arguments added to every budgeted row (e.g. --host-memory 16G)
#   COMPARE=0       no --compare-untiled (an untiled run that cannot fit the GPU); NONE=0: no unconstrained row
#   WARMUP          untimed runs before each timed one (default 1)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-out/gpu}
BUILD=${BUILD_DIR:-build-gpu}
mkdir -p "$OUT"
ROWS=${BUDGET_ROWS-wan2.1-vae:decode:1280x720 wan2.1-vae:encode:1280x720 wan2.1-vae:decode:1920x1080 wan2.1-vae:encode:1920x1080}
BUDGETS=${BUDGETS-8G 12G 16G 24G}

row() {  # row MODEL OP SIZE BUDGET(none, 8G, or a preset name)
  local model=$1 op=$2 size=$3 budget=$4 args=()
  case $budget in
    none) ;;
    *G) args=(--vram "$budget") ;;
    *) args=(--preset "$budget") ;;
  esac
  if [[ $budget != none ]]; then
    [[ ${COMPARE:-1} == 1 ]] && args+=(--compare-untiled)
    read -ra extra <<<"${BUDGET_EXTRA:-}"
    args+=("${extra[@]}")
  fi
  if timeout -k 10 "${BENCH_TIMEOUT:-200}" "$BUILD/vaecodec" bench -y --random --model "$model" --op "$op" --size "$size" \
    --frames 81 --runs 1 --warmup "${WARMUP:-1}" --json "${args[@]}" >"$OUT/budget_last.json" 2>>"$OUT/budgets.err"; then
    python3 - "$OUT/budget_last.json" "$budget" >>"$OUT/budgets.jsonl" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); j["budget"] = sys.argv[2]; print(json.dumps(j))
PY
    python3 - "$OUT/budget_last.json" "$budget" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); p = j.get("plan") or {}; t = p.get("tiles") or {}
print("  %s %s %s %s: %.3f s (estimate %.3f s), chunk %s, %s, device %.2f GiB (estimate %.2f), host of the runs %.2f GiB (estimate %.2f), error %s"
      % (j["model"], j["op"], j["size"], sys.argv[2], j["median_s"], p.get("estimated_seconds", 0), p.get("chunk"),
         "%sx%s %s tiles%s" % (t.get("rows"), t.get("cols"), p.get("tile_kind") or ("exact" if p.get("exact_tiles") else "blended"),
                               " context %s" % t.get("context") if t.get("context") is not None else "")
         if p.get("tiled") else "untiled", j.get("peak_allocated_gib", 0), j.get("estimate_gib", 0),
         j.get("peak_host_rss_runs_bytes", j.get("peak_host_rss_bytes", 0)) / 2**30, p.get("host_estimate_bytes", 0) / 2**30,
         j.get("tiled_vs_untiled_relative_l2")))
PY
  else
    echo "  FAILED: $model $op $size $budget"; tail -2 "$OUT/budgets.err"
  fi
}

echo "== budgets ($(date +%T))"
for r in $ROWS; do
  IFS=: read -r model op size <<<"$r"
  first=none
  [[ ${NONE:-1} == 1 ]] || first=
  for budget in $first $BUDGETS; do row "$model" "$op" "$size" "$budget"; done
done

if [[ ${ROUNDTRIP:-0} == 1 ]]; then
  echo "== 1080p x41 round trip, alone and with 10 GiB free ($(date +%T))"
  clip=/tmp/rt1080.mp4
  [[ -f $clip ]] || ffmpeg -v error -y -f lavfi -i testsrc2=size=1920x1080:rate=24 -frames:v 41 \
    -vf noise=alls=20:allf=t -c:v libx264 -preset veryfast -pix_fmt yuv420p "$clip"
  [[ -f /tmp/wan21_rt.pth ]] || python3 - <<'PY'
import json, math, torch
keys = json.load(open("tests/data/wan21-released-keys.json"))
g = torch.Generator().manual_seed(0)
sd = {}
for name, shape in keys.items():
    if name.endswith("gamma"): sd[name] = 1 + 0.1 * torch.randn(shape, generator=g)
    elif len(shape) >= 2: sd[name] = torch.randn(shape, generator=g) / math.sqrt(math.prod(shape[1:]))
    else: sd[name] = 0.02 * torch.randn(shape, generator=g)
torch.save({k: v.to(torch.bfloat16) for k, v in sd.items()}, "/tmp/wan21_rt.pth")
PY
  run() {  # run NAME: one round trip, its JSON line
    timeout 300 "$BUILD/vaecodec" roundtrip "$clip" -o /tmp/rt_out.mp4 -y --weights /tmp/wan21_rt.pth --json \
      --quiet >"$OUT/rt_last.json" 2>>"$OUT/budgets.err" || { echo "  FAILED: $1"; return; }
    python3 - "$OUT/rt_last.json" "$1" >>"$OUT/roundtrip.jsonl" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); j["run"] = sys.argv[2]; print(json.dumps(j))
PY
    python3 - "$OUT/rt_last.json" "$1" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); p = j.get("plan") or {}; t = p.get("tiles") or {}
print("  stages: " + ", ".join("%s %.2f s" % kv for kv in sorted((j.get("stage_seconds") or {}).items())))
print("  %s: %.2f s (estimate %.2f s for the model), device %.2f GiB, host RSS %.2f GiB (estimate %.2f), plan chunk %s %s"
      % (sys.argv[2], j["seconds"], p.get("estimated_seconds", 0), j["peak_device_bytes"] / 2**30,
         j["peak_host_rss_bytes"] / 2**30, p.get("host_estimate_bytes", 0) / 2**30, p.get("chunk"),
         "%sx%s %s tiles" % (t.get("rows"), t.get("cols"), "exact" if p.get("exact_tiles") else "blended")
         if p.get("tiled") else "untiled"))
PY
  }
  run "alone (warm-up)" >/dev/null
  run "alone"
  free=$(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits -i 0)
  hold=$(( (free - 10240) * 1024 * 1024 ))
  exec 9> >("$BUILD/tests/vaecodec_gpu_hog" 0 "$hold" >"$OUT/hog.log")
  for _ in $(seq 100); do grep -q held "$OUT/hog.log" 2>/dev/null && break; sleep 0.2; done
  run "10 GiB free"
  exec 9>&-
fi
