#!/usr/bin/env bash
# scripts/make_golden.py end to end, on the CPU: it makes a golden set from diffusers' AutoencoderKLWan for a
# small Wan2.1 config and a small Wan2.2 config (other widths and latent channels than tests/data's), and
# vaecodec's own golden test (VAECODEC_GOLDEN_DIR) must match every case of each at its float32 tolerance.
# Then that the check can fail: a case scaled by 1 + 1e-3 is rejected, and so is a set whose middle attention
# projection was changed by 1% after the cases were computed (the cases depend on that path). And seedvr2-vae,
# which has no PyPI implementation, is refused in one line.
# Usage: test_make_golden.sh PYTHON VAECODEC_TESTS_BINARY (CTest passes them; label "cpu").
set -euo pipefail
PYTHON=$1
TESTS=$(realpath "$2")
ROOT=$(realpath "$(dirname "${BASH_SOURCE[0]}")/..")
MAKE_GOLDEN=$ROOT/scripts/make_golden.py
GOLDEN_TEST="golden cases match the reference on the CPU in float32"

say() { echo "[make_golden test] $*"; }
fail() { echo "[make_golden test] FAILED: $*" >&2; exit 1; }

"$PYTHON" -c 'import diffusers, safetensors' 2>/dev/null ||
  fail "$PYTHON lacks diffusers or safetensors (scripts/setup.sh installs them into .venv)"
# The clips are tiny: more threads only spin on a busy machine (ten times slower on two shared cores).
export OMP_NUM_THREADS=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# make_set NAME ARGS...: a golden set in $work/NAME (small clips: 9 frames of 32x32 keep it to seconds).
make_set() {
  local name=$1
  shift
  "$PYTHON" "$MAKE_GOLDEN" --out "$work/$name" --frames 9 --height 32 --width 32 "$@" >"$work/$name.log" 2>&1 ||
    { cat "$work/$name.log" >&2; fail "make_golden.py $* exited non-zero"; }
}

# golden DIR LOG: runs the golden test on DIR; its exit status is the test's.
golden() { VAECODEC_GOLDEN_DIR=$1 "$TESTS" "$GOLDEN_TEST" >"$2" 2>&1; }

make_set wan21 --family wan2.1-vae --dim 8 --z-dim 12 --seed 1
make_set wan22 --family wan2.2-vae --dim 8 --dec-dim 12 --seed 2
for set in wan21 wan22; do
  golden "$work/$set" "$work/$set.golden.log" || { cat "$work/$set.golden.log" >&2; fail "$set: the golden test failed"; }
  checked=$(grep -c "^golden $set .* relative error" "$work/$set.golden.log" || true)
  [[ $checked == 5 ]] || { cat "$work/$set.golden.log" >&2; fail "$set: $checked cases compared, expected 5"; }
  say "$set: $(grep "^golden $set" "$work/$set.golden.log" | sed 's/.*golden [^ ]* \([^ ]*\) .*relative error/\1/' | tr '\n' ' ')"
done

# A case off by 1e-3 (ten times the tolerance): rejected, and for that case.
cp -r "$work/wan21" "$work/bad_case"
"$PYTHON" - "$work/bad_case/cases.safetensors" <<'EOF'
import sys
from safetensors.torch import load_file, save_file
cases = load_file(sys.argv[1])
cases["video_mu"] = cases["video_mu"] * (1 + 1e-3)
save_file(cases, sys.argv[1])
EOF
if golden "$work/bad_case" "$work/bad_case.log"; then fail "a video_mu scaled by 1 + 1e-3 passed the golden test"; fi
grep -q "case video_mu relative error" "$work/bad_case.log" ||
  { cat "$work/bad_case.log" >&2; fail "the perturbed set failed, but not on video_mu"; }
say "a video_mu off by 1e-3 is rejected"

# The decoder's middle attention projection changed by 1% after the cases were made: rejected too.
cp -r "$work/wan22" "$work/bad_weights"
"$PYTHON" - "$work/bad_weights/weights.safetensors" <<'EOF'
import sys
from safetensors.torch import load_file, save_file
weights = load_file(sys.argv[1])
weights["decoder.mid_block.attentions.0.proj.weight"] *= 1.01
save_file(weights, sys.argv[1])
EOF
if golden "$work/bad_weights" "$work/bad_weights.log"; then
  fail "weights with the attention projection changed by 1% passed the golden test"
fi
grep -q "case latent_decoded relative error" "$work/bad_weights.log" ||
  { cat "$work/bad_weights.log" >&2; fail "the changed attention projection did not fail latent_decoded"; }
say "an attention projection changed by 1% is rejected"

# seedvr2-vae: one line on stderr, non-zero, nothing written.
if "$PYTHON" "$MAKE_GOLDEN" --family seedvr2-vae --out "$work/seedvr2" >"$work/seedvr2.log" 2>&1; then
  fail "make_golden.py accepted seedvr2-vae"
fi
[[ $(wc -l <"$work/seedvr2.log") == 1 ]] && grep -q "no implementation on PyPI" "$work/seedvr2.log" ||
  { cat "$work/seedvr2.log" >&2; fail "seedvr2-vae was not refused in one line naming the reason"; }
[[ ! -e "$work/seedvr2" ]] || fail "make_golden.py wrote $work/seedvr2 for a refused family"
say "seedvr2-vae is refused: $(cat "$work/seedvr2.log")"
say "passed"
