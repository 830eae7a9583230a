#!/usr/bin/env bash
# On a GPU machine: build vaecodec against the machine's LibTorch, run every test (the GPU ones included) and
# the standard benchmarks. Logs and JSON results go to $OUT (default out/gpu).
# Expects the FFmpeg/Catch2/CLI11 kit unpacked and its env.sh sourced (see docs/benchmarks.md), and
# nlohmann-json headers under .devkit/include when the machine lacks them.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-out/gpu}
BUILD=${BUILD_DIR:-build-gpu}
ARCH=${CUDA_ARCHS:-90}
mkdir -p "$OUT"
step() { echo "== $* ($(date +%T))"; }

step configure
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc \
  -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DCMAKE_PREFIX_PATH="${CMAKE_PREFIX_PATH:-};$PWD/.devkit" \
  >"$OUT/configure.log" 2>&1 || { tail -40 "$OUT/configure.log"; exit 1; }
step build
ninja -C "$BUILD" >"$OUT/build.log" 2>&1 || { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -60; exit 1; }
"$BUILD/vaecodec" info | tee "$OUT/info.txt"

if [[ "${SKIP_TESTS:-0}" != 1 ]]; then
  step tests
  ctest --test-dir "$BUILD" --output-on-failure ${CTEST_ARGS:-} >"$OUT/ctest.log" 2>&1
  echo "ctest exit $?"; grep -E "tests passed|tests failed|Failed|\*\*\*" "$OUT/ctest.log" | head -20
  "$BUILD/tests/vaecodec_tests" "[golden]" -s 2>/dev/null | grep "^golden" | tee "$OUT/golden.txt"
fi

step benchmarks
for spec in ${BENCH:-decode:1280x720 encode:1280x720 decode:832x480 encode:832x480}; do
  "$BUILD/vaecodec" bench --random --op "${spec%%:*}" --size "${spec#*:}" --frames 81 --dtype bf16 --chunk "${BENCH_CHUNK:-1}" \
    --runs 3 --json | tee -a "$OUT/bench.jsonl"
done
"$BUILD/vaecodec" bench --random --op decode --size 256x256 --frames 17 --dtype bf16 --accuracy --json | tee -a "$OUT/bench.jsonl"
"$BUILD/vaecodec" bench --random --op encode --size 256x256 --frames 17 --dtype bf16 --accuracy --json | tee -a "$OUT/bench.jsonl"

if [[ "${SKIP_ROUNDTRIP:-0}" != 1 ]]; then
  step "file-to-file roundtrip 1280x720x81 bf16"
  # Random weights of the released architecture, written as a .pth by the machine's PyTorch.
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
  ffmpeg -v error -y -f lavfi -i testsrc2=size=1280x720:rate=24 -frames:v 81 -vf noise=alls=20:allf=t \
    -c:v libx264 -pix_fmt yuv420p /tmp/clip720.mp4
  for i in 1 2; do
    start=$(date +%s.%N)
    "$BUILD/vaecodec" roundtrip /tmp/clip720.mp4 -o /tmp/rt720.mp4 --weights /tmp/wan21_random.pth \
      --device cuda --dtype bf16 --json --quiet | tee -a "$OUT/roundtrip.jsonl"
    python3 -c "import time; print(\"roundtrip wall %.2f s\" % (time.time() - $start))"
  done
  "$BUILD/vaecodec" bench --weights /tmp/wan21_random.pth --op roundtrip --size 1280x720 --frames 81 --dtype bf16 \
    --runs 2 --json | tee -a "$OUT/bench.jsonl"
fi
