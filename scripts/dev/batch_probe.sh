#!/usr/bin/env bash
# What slows each GPU of a batch over devices (Note [Host threads of a batch over devices]): the same 32 clips of
# 720p x81 (round trip, random Wan2.1 weights) on one GPU, on N GPUs in one process, on N processes of one GPU
# each (8 clips each: the host shared as in the batch, nothing in the process shared), and on N GPUs with a
# faster x264 preset. Run after scripts/gpu_check.sh's build, with its OUT and BUILD_DIR:
#   OUT=... BUILD_DIR=build-gpu scripts/dev/batch_probe.sh [N]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=${OUT:-out/gpu}
BUILD=${BUILD_DIR:-build-gpu}
N=${1:-4}
CLIPS=${CLIPS:-32}
mkdir -p "$OUT"
source scripts/gpu_check/common.sh
make_weights
clip 81 /tmp/clip81.mp4
rm -rf /tmp/probe_in && mkdir -p /tmp/probe_in
for i in $(seq 1 "$CLIPS"); do cp /tmp/clip81.mp4 "/tmp/probe_in/clip$i.mp4"; done
seconds() { python3 -c "import sys,time; print('%.1f' % (time.time()-float(sys.argv[1])))" "$1"; }
run() {  # run NAME DEVICES INPUT ARGS...
  local name=$1 devices=$2 input=$3; shift 3
  rm -rf "/tmp/probe_out_$name"
  "$BUILD/vaecodec" roundtrip "$input" -o "/tmp/probe_out_$name" -y --weights /tmp/wan21_random.pth --json \
    --devices "$devices" "$@" >"$OUT/probe_$name.jsonl" 2>>"$OUT/probe.err"
}
list=$(seq -s, 0 $((N - 1)))
for form in one many; do
  start=$(date +%s.%N)
  if [[ $form == one ]]; then run one 0 /tmp/probe_in; else run many "$list" /tmp/probe_in --verbose; fi
  echo "== $form process, devices $([[ $form == one ]] && echo 0 || echo "$list"): $(seconds "$start") s"
  python3 scripts/dev/batch_timeline.py "$OUT/probe_$form.jsonl" | sed 's/^/    /'
done
# N processes, one GPU each, CLIPS/N clips each, started together
per=$((CLIPS / N))
for d in $(seq 0 $((N - 1))); do
  rm -rf "/tmp/probe_in$d" && mkdir -p "/tmp/probe_in$d"
  for i in $(seq 1 "$per"); do ln -s /tmp/clip81.mp4 "/tmp/probe_in$d/clip$i.mp4"; done
done
start=$(date +%s.%N)
for d in $(seq 0 $((N - 1))); do run "proc$d" "$d" "/tmp/probe_in$d" & done
wait
echo "== $N processes of one GPU, $per clips each: $(seconds "$start") s"
for d in $(seq 0 $((N - 1))); do python3 scripts/dev/batch_timeline.py "$OUT/probe_proc$d.jsonl" | sed 's/^/    /'; done
start=$(date +%s.%N)
run veryfast "$list" /tmp/probe_in --encoder-preset veryfast
echo "== one process, devices $list, --encoder-preset veryfast: $(seconds "$start") s"
python3 scripts/dev/batch_timeline.py "$OUT/probe_veryfast.jsonl" | sed 's/^/    /'
start=$(date +%s.%N)
run veryfast1 0 /tmp/probe_in --encoder-preset veryfast
echo "== one process, device 0, --encoder-preset veryfast: $(seconds "$start") s"
python3 scripts/dev/batch_timeline.py "$OUT/probe_veryfast1.jsonl" | sed 's/^/    /'
