#!/usr/bin/env bash
# What slows each GPU of a batch over devices (Note [Host threads of a batch over devices]): the same clips of
# 720p x81 (round trip, random Wan2.1 weights) in several forms, each with the host's CPU use over its run:
#   one       CLIPS_ONE clips on GPU 0            many      CLIPS clips on N GPUs in one process (--verbose)
#   procs     N processes of one GPU each, CLIPS/N clips each, started together (nothing in-process shared)
#   veryfast1 / veryfast   one / many with --encoder-preset veryfast
# Run after scripts/gpu_check.sh's build, with its OUT and BUILD_DIR:
#   OUT=... BUILD_DIR=build-gpu [FORMS="one many procs veryfast1 veryfast"] scripts/dev/batch_probe.sh [N]
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=${OUT:-out/gpu}
BUILD=${BUILD_DIR:-build-gpu}
N=${1:-4}
CLIPS=${CLIPS:-32}
CLIPS_ONE=${CLIPS_ONE:-$CLIPS}
mkdir -p "$OUT"
source scripts/gpu_check/common.sh
make_weights
clip 81 /tmp/clip81.mp4
folder() {  # folder PATH COUNT: COUNT links to the clip
  rm -rf "$1" && mkdir -p "$1"
  for i in $(seq 1 "$2"); do ln -s /tmp/clip81.mp4 "$1/clip$i.mp4"; done
}
cpu() { head -1 /proc/stat; }
report() {  # report NAME START CPU_BEFORE: wall seconds, clips/s and the host's CPU use
  python3 - "$@" <<'PY'
import sys, time, os
name, start, before = sys.argv[1], float(sys.argv[2]), list(map(int, sys.argv[3].split()[1:]))
after = list(map(int, open("/proc/stat").readline().split()[1:]))
d = [a - b for a, b in zip(after, before)]
idle = d[3] + d[4]
print("== %s: %.1f s, host CPU %.0f%% busy of %d cores" % (name, time.time() - start, 100.0 * (1 - idle / sum(d)), os.cpu_count()))
PY
}
run() {  # run NAME DEVICES INPUT ARGS...
  local name=$1 devices=$2 input=$3; shift 3
  rm -rf "/tmp/probe_out_$name"
  "$BUILD/vaecodec" roundtrip "$input" -o "/tmp/probe_out_$name" -y --weights /tmp/wan21_random.pth --json \
    --devices "$devices" "$@" >"$OUT/probe_$name.jsonl" 2>>"$OUT/probe.err"
}
list=$(seq -s, 0 $((N - 1)))
folder /tmp/probe_one "$CLIPS_ONE"
folder /tmp/probe_all "$CLIPS"
for form in ${FORMS:-one many procs veryfast1 veryfast}; do
  start=$(date +%s.%N) before=$(cpu)
  case $form in
    one) run one 0 /tmp/probe_one ;;
    many) run many "$list" /tmp/probe_all --verbose ;;
    veryfast1) run veryfast1 0 /tmp/probe_one --encoder-preset veryfast ;;
    veryfast) run veryfast "$list" /tmp/probe_all --encoder-preset veryfast ;;
    procs)
      for d in $(seq 0 $((N - 1))); do folder "/tmp/probe_in$d" $((CLIPS / N)); done
      for d in $(seq 0 $((N - 1))); do run "proc$d" "$d" "/tmp/probe_in$d" & done
      wait ;;
  esac
  report "$form" "$start" "$before"
  files=("$OUT/probe_$form.jsonl")
  [[ $form == procs ]] && files=("$OUT"/probe_proc[0-9]*.jsonl)
  for f in "${files[@]}"; do python3 scripts/dev/batch_timeline.py "$f" | sed 's/^/    /'; done
done
grep "start-up" "$OUT/probe.err" | sed 's/^/    /'
