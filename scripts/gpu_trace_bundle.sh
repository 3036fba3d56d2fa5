#!/usr/bin/env bash
# scripts/gpu_trace_bundle.sh BUILD_DIR OUT_TAR — the small bundle scripts/gpu_trace_check.sh needs on
# the device machine (about 28 MB): BUILD_DIR's EP and CUDA libraries, fusebox, bench_trace and the two
# GPU trace tests; the compiled-out libraries of BUILD_DIR-traceoff (built here first if missing:
# -DFBX_TRACE_COMPILED_OUT=ON, targets fusebox_ep fusebox_cuda); ORT 1.30; libjansson; decoder_small
# and genai_tiny; the two check scripts. On the device machine:
#   tar -xJf OUT_TAR && export LD_LIBRARY_PATH=$PWD/lib:$PWD/.deps/lib:/usr/local/cuda/lib64
#   scripts/gpu_trace_check.sh build
set -euo pipefail
BUILD=${1:?usage: scripts/gpu_trace_bundle.sh BUILD_DIR OUT_TAR}
OUTTAR=${2:?usage: scripts/gpu_trace_bundle.sh BUILD_DIR OUT_TAR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$BUILD" && pwd)
OFF=$BUILD-traceoff
cd "$ROOT"
if [ ! -f "$OFF/libfusebox_ep.so" ]; then
  ORT_INC=$(sed -n 's/^FBX_ORT_INCLUDE:PATH=//p' "$BUILD/CMakeCache.txt")
  cmake -S . -B "$OFF" -DFBX_ORT_INCLUDE="$ORT_INC" -DCMAKE_BUILD_TYPE=Release -DFBX_TRACE_COMPILED_OUT=ON >/dev/null
  cmake --build "$OFF" --target fusebox_ep fusebox_cuda -j"$(nproc)" >/dev/null
fi
[ -f models/gen/decoder_small.onnx ] || scripts/make_models.sh >/dev/null
ST=$(mktemp -d /tmp/fusebox_trace_bundle.XXXXXX)
trap 'rm -rf "$ST"' EXIT
mkdir -p "$ST/build/bench" "$ST/build/tests" "$ST/build-traceoff" "$ST/.deps/lib" "$ST/lib" "$ST/models/gen" "$ST/scripts"
cp "$BUILD/libfusebox_ep.so" "$BUILD/libfusebox_cuda.so" "$BUILD/fusebox" "$ST/build/"
cp "$BUILD/bench/bench_trace" "$ST/build/bench/"
cp "$BUILD/tests/test_trace_gpu" "$BUILD/tests/test_trace_gpu_exec" "$ST/build/tests/"
cp "$OFF/libfusebox_ep.so" "$OFF/libfusebox_cuda.so" "$ST/build-traceoff/"
cp -L .deps/lib/libonnxruntime.1.30.so "$ST/.deps/lib/"
cp -L /usr/lib/x86_64-linux-gnu/libjansson.so.4 "$ST/lib/"
cp models/gen/decoder_small.onnx models/gen/genai_tiny.onnx "$ST/models/gen/"
cp scripts/gpu_trace_check.sh scripts/gpu_trace_check.py "$ST/scripts/"
tar -C "$ST" -cJf "$OUTTAR" .
echo "[bundle] $OUTTAR ($(du -h "$OUTTAR" | cut -f1))"
