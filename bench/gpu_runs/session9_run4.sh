#!/usr/bin/env bash
# session 9, call 4: does tracing cost more with PDL? bench_trace on genai_tiny, PDL on / off
set -u
cd "$(dirname "$0")/.."
tar -xJf .gpu_s9/b.tar.xz && tar -xzf .gpu_s9/off.tgz
export LD_LIBRARY_PATH=$PWD/lib:$PWD/.deps/lib:/usr/local/cuda/lib64
export FUSEBOX_ORT_LIB=$PWD/.deps/lib/libonnxruntime.1.30.so
for p in 1 0 1 0; do
  echo "== FUSEBOX_CUDA_PDL=$p"
  FUSEBOX_CUDA_PDL=$p build/bench/bench_trace --lib $PWD/build/libfusebox_ep.so --lib-off $PWD/build-traceoff/libfusebox_ep.so --device cuda \
    --model $PWD/models/gen/genai_tiny.onnx --reps 2 --steps 64 --rounds 3 2>&1 | grep -E "median|overhead"
done
