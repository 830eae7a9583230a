#!/usr/bin/env bash
# A musubi-tuner dataset cached by `encode --dataset-config` on one GPU, against the reference encoder's model
# calls for the same windows (scripts/dev/musubi_reference_cache.py): 32 generated 1280x720 clips of 5 s at
# 30 fps, resolution [960, 544], target_frames [1, 25, 45], head extraction (96 cache files).
#   musubi_dataset_bench.sh VAECODEC WEIGHTS.pth OUT_DIR     (gpu_check.sh: PHASES=musubi)
# Prints and writes OUT_DIR/musubi.jsonl: vaecodec's wall clock for the whole dataset (model load included) and
# caches per second, and the reference's.
set -euo pipefail
VAECODEC=$1 WEIGHTS=$2 OUT=$3
DATA=${MUSUBI_DATA:-/tmp/musubi_bench}
CLIPS=${MUSUBI_CLIPS:-32}
mkdir -p "$OUT" "$DATA/clips"
for i in $(seq -w 1 "$CLIPS"); do
  f=$DATA/clips/clip$i.mp4
  [[ -f $f ]] || ffmpeg -v error -y -f lavfi -i "testsrc2=size=1280x720:rate=30" -frames:v 150 \
    -vf "noise=alls=20:allf=t,hue=h=$((10#$i * 11))" -c:v libx264 -preset veryfast -pix_fmt yuv420p "$f" &
  echo "clip $i" >"$DATA/clips/clip$i.txt"
done
wait
cat >"$DATA/dataset.toml" <<TOML
[general]
resolution = [960, 544]
caption_extension = ".txt"
enable_bucket = true

[[datasets]]
video_directory = "$DATA/clips"
cache_directory = "$DATA/cache"
target_frames = [1, 25, 45]
frame_extraction = "head"
TOML
rm -rf "$DATA/cache"
"$VAECODEC" encode --dataset-config "$DATA/dataset.toml" --dry-run --json >"$OUT/plan.jsonl"
start=$(date +%s.%N)
"$VAECODEC" encode --dataset-config "$DATA/dataset.toml" --weights "$WEIGHTS" --json --quiet >"$OUT/run.jsonl"
end=$(date +%s.%N)
python3 - "$OUT/run.jsonl" "$start" "$end" <<'PY' | tee -a "$OUT/musubi.jsonl"
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
ok = [r for r in runs if not r.get("error")]
wall = float(sys.argv[3]) - float(sys.argv[2])
print(json.dumps({"vaecodec": "encode --dataset-config", "caches": len(ok), "failed": len(runs) - len(ok),
                  "wall_s": wall, "caches_per_s": len(ok) / wall, "run_seconds": sum(r["seconds"] for r in ok),
                  "device": ok[0].get("device") if ok else None, "dtype": ok[0].get("dtype") if ok else None}))
PY
python3 scripts/dev/musubi_reference_cache.py "$OUT/plan.jsonl" "$WEIGHTS" --compare | tee -a "$OUT/musubi.jsonl"
