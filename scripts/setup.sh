#!/usr/bin/env bash
# Sets vaecodec up on a fresh Debian 12 machine and builds it in Release:
#   1. Debian packages: compilers, CMake, Ninja, FFmpeg 5.1 libraries and CLI, CLI11, Catch2, nlohmann-json, toml++,
#      clang-format, the DejaVu font (the plot's text), tesseract-ocr (the test that reads it back), Slurm and
#      munge (for the job-array test);
#   2. LibTorch 2.11.0 from PyPI's torch==2.11.0 wheel, in the project's virtual environment .venv/ (with
#      the safetensors package, which the tests use);
#   3. checks that LibTorch's CUDA version matches the CUDA toolkit's (nvcc);
#   4. configures and builds build/ (CMake + Ninja);
#   5. installs the Python package (python/) into .venv, linking the engine library of build/, with what its
#      build and tests use (scikit-build-core, pytest, numpy, diffusers 0.42.1, which scripts/make_golden.py
#      also uses); then runs a short demo unless --no-demo is given.
# Idempotent: what is already there is kept. Any failure stops it with the reason.
# Environment: BUILD_DIR (default build), CUDA_ARCHS (default: CMake's list, 80;86;89;90;100;120), JOBS.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
BUILD_DIR=${BUILD_DIR:-build}
DEMO=1
for arg in "$@"; do
  case "$arg" in
    --no-demo) DEMO=0 ;;
    *) echo "usage: scripts/setup.sh [--no-demo]" >&2; exit 2 ;;
  esac
done

say() { echo "[setup] $*"; }
die() { echo "[setup] error: $*" >&2; exit 1; }
trap 'die "step failed at line $LINENO (see the output above)"' ERR

# 1. Debian packages.
packages=(build-essential cmake ninja-build pkg-config git xz-utils
          libavformat-dev libavcodec-dev libavfilter-dev libavutil-dev libswscale-dev libswresample-dev ffmpeg
          libcli11-dev catch2 nlohmann-json3-dev libtomlplusplus-dev clang-format
          fonts-dejavu-core   # the text of compare --plot (FFmpeg's drawtext finds it through fontconfig)
          tesseract-ocr       # the tests read the plot's text back from the PNG
          slurm-wlm munge)  # Slurm and munge: the job-array test starts its own (tests/test_slurm_array.sh)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ! python3 -m venv --help >/dev/null 2>&1; then missing+=(python3 python3-venv python3-pip); fi
if ((${#missing[@]})); then
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || die "need root (or sudo) to install: ${missing[*]}"
    SUDO=sudo
  fi
  say "installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  say "Debian packages: all present"
fi

# 2. The CUDA toolkit is not a Debian package at this version: it must be on the machine already.
NVCC=${CUDACXX:-}
if [[ -z "$NVCC" && -x /usr/local/cuda/bin/nvcc ]]; then NVCC=/usr/local/cuda/bin/nvcc; fi
if [[ -z "$NVCC" ]]; then NVCC=$(command -v nvcc || true); fi
[[ -n "$NVCC" ]] || die "no CUDA toolkit: nvcc is neither in /usr/local/cuda/bin nor on PATH (CUDA 13.0 is required)"
nvcc_version=$("$NVCC" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')
say "CUDA toolkit: $NVCC (CUDA $nvcc_version)"

# 3. LibTorch from PyPI, in .venv.
if [[ ! -x .venv/bin/python ]]; then
  say "creating the virtual environment .venv"
  python3 -m venv .venv
fi
if ! .venv/bin/python -c 'import torch, sys; sys.exit(torch.__version__.split("+")[0] != "2.11.0")' 2>/dev/null; then
  say "installing torch==2.11.0 from PyPI into .venv (a few GB, once)"
  .venv/bin/python -m pip install --quiet --progress-bar off --upgrade pip
  .venv/bin/python -m pip install --quiet --progress-bar off torch==2.11.0
fi
# The tests read musubi-tuner caches back with the safetensors package, as the trainer does.
if ! .venv/bin/python -c 'import safetensors' 2>/dev/null; then
  say "installing safetensors from PyPI into .venv (for the tests)"
  .venv/bin/python -m pip install --quiet --progress-bar off safetensors
fi
# CUTLASS's C++ headers (the Hopper convolution kernels, core/CMakeLists.txt finds them in the package).
if ! .venv/bin/python -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("cutlass_library") is None)' 2>/dev/null; then
  say "installing nvidia-cutlass==4.2.0.0 from PyPI into .venv (CUTLASS's headers)"
  .venv/bin/python -m pip install --quiet --progress-bar off --no-deps nvidia-cutlass==4.2.0.0
fi
torch_cuda=$(.venv/bin/python -c 'import torch; print(torch.version.cuda or "none")')
torch_version=$(.venv/bin/python -c 'import torch; print(torch.__version__)')
say "LibTorch: $torch_version, built for CUDA $torch_cuda"
if [[ "$torch_cuda" != "$nvcc_version" ]]; then
  if [[ "${torch_cuda%%.*}" != "${nvcc_version%%.*}" ]]; then
    die "LibTorch was built for CUDA $torch_cuda but the toolkit is CUDA $nvcc_version: the major versions must match"
  fi
  say "warning: LibTorch's CUDA $torch_cuda differs from the toolkit's $nvcc_version in the minor version"
fi

# 4. Configure and build.
cmake_args=(-S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$NVCC"
            -DPython3_EXECUTABLE="$ROOT/.venv/bin/python")
if [[ -n "${CUDA_ARCHS:-}" ]]; then cmake_args+=(-DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCHS"); fi
say "configuring $BUILD_DIR"
mkdir -p "$BUILD_DIR"
cmake "${cmake_args[@]}" >"$BUILD_DIR/configure.log" 2>&1 || { tail -30 "$BUILD_DIR/configure.log" >&2; die "CMake configuration failed (log: $BUILD_DIR/configure.log)"; }
say "building (Release; the first build takes a while)"
ninja -C "$BUILD_DIR" ${JOBS:+-j"$JOBS"}
say "built $BUILD_DIR/vaecodec"
"$BUILD_DIR/vaecodec" --version

# 5. The Python package, built against .venv's torch; it links build/'s engine library rather than compiling
# the engine again (python/CMakeLists.txt), so it adds the binding's two source files to the build.
# diffusers pinned: scripts/make_golden.py (test make_golden) drives its decode loop.
python_packages=(scikit-build-core pytest numpy diffusers==0.42.1)
if ! .venv/bin/python -c 'import scikit_build_core, pytest, numpy, diffusers, sys
sys.exit(diffusers.__version__ != "0.42.1")' 2>/dev/null; then
  say "installing ${python_packages[*]} from PyPI into .venv (the Python package's build and tests)"
  .venv/bin/python -m pip install --quiet --progress-bar off "${python_packages[@]}"
fi
BUILD_DIR="$BUILD_DIR" scripts/install_python.sh

if ((DEMO)); then
  trap - ERR
  scripts/demo.sh || die "the demo failed"
fi
