# What the phases of scripts/gpu_check.sh share, sourced by it after OUT, BUILD, RUNS and PHASES are set.
step() { echo "== $* ($(date +%T))"; }
bench() {  # bench ARGS...: one JSON line to bench.jsonl, a short line to the log
  timeout "${BENCH_TIMEOUT:-150}" "$BUILD/vaecodec" bench -y --frames 81 --dtype "${DTYPE:-bf16}" --runs "$RUNS" --json "$@" \
    ${BENCH_EXTRA:-} >"$OUT/last.json" \
    2>>"$OUT/bench.err"
  local rc=$?
  if ((rc == 0)); then
    cat "$OUT/last.json" >>"$OUT/bench.jsonl"
    python3 -c "import json,sys; j=json.load(open(sys.argv[1])); p=j.get('plan') or {}; t=p.get('tiles') or {}; print('  %s %s %s %s conv %s chunk %s %s%s: %.3f s, %.0f TFLOP, %.0f TFLOP/s, %.2f GiB allocated, %.2f reserved, estimate %.2f, budget %.2f, within %s' % (j['model'], j['op'], j['size'], j.get('preset') or '-', j.get('conv', '-'), j['chunk_latent_frames'], '%sx%s tiles' % (t.get('rows'), t.get('cols')) if p.get('tiled') else 'untiled', ' offload' if p.get('offload') else '', j['median_s'], j['model_tflop'], j['tflops'], j.get('peak_allocated_gib', 0), j.get('peak_reserved_gib', 0), j.get('estimate_gib', 0), j.get('budget_bytes', 0)/2**30, j.get('within_budget')))" "$OUT/last.json"
  else
    echo "  FAILED ($rc): bench $*"; tail -2 "$OUT/bench.err"
  fi
}
has() { [[ " $PHASES " == *" $1 "* ]]; }

# Random weights of the released Wan2.1 architecture, written as a .pth by the machine's PyTorch.
make_weights() {
  [[ -f /tmp/wan21_random.pth ]] && return
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
}
# Random weights of the released configs of other families (NAME: seedvr2, wan22; tests/data/NAME-released-keys.json)
# as /tmp/NAME_random.pth.
family_weights() {
  python3 - "$@" <<'PY'
import json, math, os, sys, torch
for name in sys.argv[1:]:
    if os.path.exists(f"/tmp/{name}_random.pth"):
        continue
    keys = json.load(open(f"tests/data/{name}-released-keys.json"))
    g = torch.Generator().manual_seed(0)
    sd = {}
    for key, shape in keys.items():
        if key.endswith("gamma") or (len(shape) == 1 and "norm" in key and key.endswith("weight")):
            sd[key] = 1 + 0.1 * torch.randn(shape, generator=g)
        elif len(shape) >= 2:
            sd[key] = torch.randn(shape, generator=g) / math.sqrt(math.prod(shape[1:]))
        else:
            sd[key] = 0.02 * torch.randn(shape, generator=g)
    torch.save(sd, f"/tmp/{name}_random.pth")
PY
}
clip() {  # clip FRAMES PATH: textured 1280x720 x264 clip
  [[ -f "$2" ]] || ffmpeg -v error -y -f lavfi -i testsrc2=size=1280x720:rate=24 -frames:v "$1" \
    -vf noise=alls=20:allf=t -c:v libx264 -preset veryfast -pix_fmt yuv420p "$2"
}
# file_run NAME ARGS...: a CLI run with --json, its summary to runs.jsonl and a short line to the log.
file_run() {
  local name=$1; shift
  local start; start=$(date +%s.%N)
  if timeout 200 "$BUILD/vaecodec" "$@" -y ${RUN_EXTRA:-} --json --quiet >"$OUT/last_run.json" 2>>"$OUT/runs.err"; then
    python3 -c "import json,sys,time; j=json.load(open(sys.argv[1])); j['name']=sys.argv[2]; j['wall_s']=time.time()-float(sys.argv[3]); print(json.dumps(j)); p=j.get('plan') or {}; print('  %s: %d frames, run %.1f s (wall %.1f s), device peak %.2f GiB, host RSS %.0f MiB, plan chunk %s tiled %s offload %s, psnr %s' % (sys.argv[2], j['frames'], j['seconds'], j['wall_s'], j['peak_device_bytes']/2**30, j['peak_host_rss_bytes']/2**20, p.get('chunk'), p.get('tiled'), p.get('offload'), (j.get('quality') or {}).get('psnr')), file=sys.stderr); print('    stages: ' + ', '.join('%s %.2f s' % kv for kv in sorted(j.get('stage_seconds', {}).items())) + '; load: ' + ', '.join('%s %.2f s' % kv for kv in sorted(j.get('load_seconds', {}).items())), file=sys.stderr)" \
      "$OUT/last_run.json" "$name" "$start" >>"$OUT/runs.jsonl"
  else
    echo "  FAILED: $name"; tail -2 "$OUT/runs.err"
  fi
}
