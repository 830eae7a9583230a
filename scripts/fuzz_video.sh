#!/usr/bin/env bash
# Damaged-video fuzzing (docs/reliability.md, "Damaged video"): clips in several containers and codecs are
# generated with ffmpeg, mutated at random (bytes flipped, overwritten with random or boundary values, runs
# deleted, duplicated or inserted, the tail cut), and each mutant is run through the CLI under a time limit.
# Every run must end with exit 0 (an output that ffprobe reads, warnings only) or exit 1 (one error line, no
# output); a signal, the time limit, any other status, or a temporary file left behind is a finding, kept
# under the findings folder with its stderr.
#
#   scripts/fuzz_video.sh [-n RUNS] [-t SECONDS] [-s SEED] [-o FOLDER] [-b BINARY] [-w WEIGHTS] [--strict]
#
# Defaults: 200 runs, a 60 s limit per run, seed 1, out/fuzz_video, build/vaecodec, the tiny Wan2.1 weights.
# Runs under nice; the summary line counts runs, clean exits, errors, crashes, hangs and other findings.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=200 limit=60 seed=1 out=out/fuzz_video bin=build/vaecodec weights=tests/data/wan21-tiny/weights.safetensors
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    -n) runs=$2; shift 2 ;;
    -t) limit=$2; shift 2 ;;
    -s) seed=$2; shift 2 ;;
    -o) out=$2; shift 2 ;;
    -b) bin=$2; shift 2 ;;
    -w) weights=$2; shift 2 ;;
    --strict) extra+=(--strict); shift ;;
    *) echo "usage: $0 [-n RUNS] [-t SECONDS] [-s SEED] [-o FOLDER] [-b BINARY] [-w WEIGHTS] [--strict]" >&2
       exit 2 ;;
  esac
done
[[ -x $bin ]] || { echo "fuzz_video: no binary at $bin (build first)" >&2; exit 1; }

seeds=$out/seeds work=$out/work findings=$out/findings
mkdir -p "$seeds" "$work" "$findings"

# The seed clips: short, small, with B-frames, audio and several codecs where the container allows.
make_seed() {
  local name=$1; shift
  [[ -s $seeds/$name ]] || ffmpeg -nostdin -hide_banner -loglevel error -y \
    -f lavfi -i testsrc2=size=64x48:rate=24 -f lavfi -i sine=frequency=440:sample_rate=16000 \
    -frames:v 17 -shortest "$@" "$seeds/$name"
}
make_seed h264.mp4 -c:v libx264 -g 8 -bf 2 -pix_fmt yuv420p -c:a aac
make_seed h264.mkv -c:v libx264 -g 8 -bf 2 -pix_fmt yuv420p -c:a aac
make_seed mpeg4.avi -c:v mpeg4 -g 8 -bf 1 -pix_fmt yuv420p -c:a pcm_s16le
make_seed ffv1.mkv -c:v ffv1 -pix_fmt yuv420p -an
make_seed vp9.webm -c:v libvpx-vp9 -g 8 -deadline realtime -pix_fmt yuv420p -an
make_seed mjpeg.avi -c:v mjpeg -pix_fmt yuvj420p -an
make_seed h264_frag.mp4 -c:v libx264 -g 4 -pix_fmt yuv420p -movflags +frag_keyframe+empty_moov -an

mapfile -t seed_files < <(ls "$seeds")

# Writes a mutant of $1 to $2, chosen by the number $3 (deterministic for a seed).
mutate() {
  python3 - "$1" "$2" "$3" <<'EOF'
import random, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = bytearray(open(src, 'rb').read())
rng = random.Random(n)
for _ in range(rng.choice([1, 1, 2, 3])):
    kind = rng.choice(['flip', 'flip', 'random', 'boundary', 'delete', 'duplicate', 'insert', 'truncate'])
    size = len(data)
    if size < 2:
        break
    at = rng.randrange(size)
    if kind == 'flip':
        for _ in range(rng.randint(1, 32)):
            data[rng.randrange(size)] ^= 1 << rng.randrange(8)
    elif kind == 'random':
        for i in range(at, min(size, at + rng.randint(1, 64))):
            data[i] = rng.randrange(256)
    elif kind == 'boundary':
        # Sizes and counts in container headers: 0, -1, 0x7fffffff and the like.
        value = rng.choice([b'\x00\x00\x00\x00', b'\xff\xff\xff\xff', b'\x7f\xff\xff\xff', b'\x80\x00\x00\x00',
                            b'\x00\x00\x00\x01', b'\xff\xff'])
        data[at:at + len(value)] = value
    elif kind == 'delete':
        del data[at:at + rng.randint(1, 256)]
    elif kind == 'duplicate':
        data[at:at] = data[at:at + rng.randint(1, 512)]
    elif kind == 'insert':
        data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    elif kind == 'truncate':
        del data[at:]
open(dst, 'wb').write(bytes(data))
EOF
}

clean=0 errors=0 crashes=0 hangs=0 other=0
start=$(date +%s)
for ((i = 0; i < runs; i++)); do
  n=$((seed * 1000003 + i))
  src=${seed_files[$((n % ${#seed_files[@]}))]}
  ext=${src##*.}
  input=$work/input.$ext output=$work/out.mkv
  rm -f "$work"/* "$work"/.??* 2>/dev/null || true
  mutate "$seeds/$src" "$input" "$n"
  set +e
  timeout -s KILL "$limit" nice "$bin" roundtrip "$input" -o "$output" --weights "$weights" --device cpu \
    --quiet --codec ffv1 "${extra[@]}" 2>"$work/stderr" >/dev/null
  status=$?
  set -e
  lines=$(wc -l <"$work/stderr")
  leftover=$(ls -A "$work" | grep -c '\.tmp-' || true)
  verdict=""
  if [[ $status -eq 137 || $status -eq 124 ]]; then
    verdict=hang; hangs=$((hangs + 1))
  elif [[ $status -gt 128 ]]; then
    verdict=crash; crashes=$((crashes + 1))
  elif [[ $leftover -ne 0 ]]; then
    verdict=leftover; other=$((other + 1))
  elif [[ $status -eq 0 ]]; then
    if ffprobe -v error -count_frames -show_entries stream=nb_read_frames "$output" >/dev/null 2>&1 &&
       ! grep -qv '^vaecodec: warning: ' "$work/stderr"; then
      clean=$((clean + 1))
    else
      verdict=bad-output; other=$((other + 1))
    fi
  elif [[ $status -eq 1 && $lines -eq 1 && ! -e $output ]] && grep -q '^vaecodec: error: ' "$work/stderr"; then
    errors=$((errors + 1))
  else
    verdict=status-$status; other=$((other + 1))
  fi
  if [[ -n $verdict ]]; then
    cp "$input" "$findings/$verdict-$n.$ext"
    cp "$work/stderr" "$findings/$verdict-$n.stderr"
    echo "fuzz_video: $verdict on mutant $n of $src (status $status): $(head -c 300 "$work/stderr")" >&2
  fi
done
elapsed=$(($(date +%s) - start))
echo "fuzz_video: $runs runs in ${elapsed} s (seed $seed): $clean decoded, $errors refused in one line," \
  "$crashes crashes, $hangs hangs, $other other findings (in $findings)"
[[ $((crashes + hangs + other)) -eq 0 ]]
