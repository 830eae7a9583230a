# The build of scripts/gpu_check.sh, which sources this file first: configure and build $BUILD against the
# machine's LibTorch (and CUTLASS from .devkit), then `vaecodec info` into $OUT/info.txt.
step configure
# CUTLASS's headers for the Hopper convolution kernels: the nvidia-cutlass wheel carried in .devkit (the GPU
# machines have no PyPI), unpacked once; or, where what travels is short of room, only the headers the build
# reads (cutlass_library/source/{include,tools/util/include} of the wheel) as .devkit/cutlass_headers.tar.xz.
cutlass_args=()
wheel=$(ls .devkit/nvidia_cutlass-*.whl 2>/dev/null | head -1)
if [[ -f .devkit/cutlass_headers.tar.xz ]]; then
  mkdir -p /tmp/cutlass
  [[ -d /tmp/cutlass/cutlass_library ]] || tar -xJf .devkit/cutlass_headers.tar.xz -C /tmp/cutlass
  cutlass_args=(-DVAECODEC_CUTLASS_DIR=/tmp/cutlass/cutlass_library/source)
elif [[ -n "$wheel" ]]; then
  [[ -d /tmp/cutlass/cutlass_library ]] || python3 -m zipfile -e "$wheel" /tmp/cutlass >/dev/null
  cutlass_args=(-DVAECODEC_CUTLASS_DIR=/tmp/cutlass/cutlass_library/source)
fi
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc \
  "${cutlass_args[@]}" \
  -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DCMAKE_PREFIX_PATH="${CMAKE_PREFIX_PATH:-};$PWD/.devkit" \
  >"$OUT/configure.log" 2>&1 || { tail -40 "$OUT/configure.log"; exit 1; }
step build
ninja -C "$BUILD" >"$OUT/build.log" 2>&1 || { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -60; exit 1; }
"$BUILD/vaecodec" info | tee "$OUT/info.txt"
