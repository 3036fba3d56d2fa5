#!/usr/bin/env bash
# bench/gpu_cnn_vs_ort_cuda.sh BUILD_DIR [CUDA_EP_LIB] — PP-OCR det/rec/cls on one GPU: Fusebox's GPU
# OrtEpDevice vs ONNX Runtime's own CUDA EP (ORT 1.29's CUDA 13 plugin library), one Python process.
# Without CUDA_EP_LIB it is fetched with `npm pack com.github.asus4.onnxruntime.linux-x64-gpu@0.4.9`
# into .deps/ortcuda (ignored; 180 MB). Needs a stock onnxruntime (>= 1.29) Python wheel, cuDNN 9 and
# cuBLAS 13 on the loader path. A machine without internet gets the library carried in (it was sent to
# the H200 in three xz pieces for bench/RESULTS.md).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:?usage: bench/gpu_cnn_vs_ort_cuda.sh BUILD_DIR [CUDA_EP_LIB]}" && pwd)
LIB=${2:-}
if [ -z "$LIB" ]; then
  mkdir -p "$ROOT/.deps/ortcuda"
  LIB=$ROOT/.deps/ortcuda/package/Plugins/Linux/x64/libonnxruntime_providers_cuda.so
  if [ ! -e "$LIB" ]; then
    (cd "$ROOT/.deps/ortcuda" && npm pack com.github.asus4.onnxruntime.linux-x64-gpu@0.4.9 >/dev/null &&
     tar -xzf com.github.asus4.onnxruntime.linux-x64-gpu-0.4.9.tgz)
  fi
fi
A=$ROOT/.deps/ocr/package/assets
export LD_LIBRARY_PATH=$(dirname "$LIB"):${LD_LIBRARY_PATH:-}
python3 "$ROOT/bench/gpu_cnn_vs_ort_cuda.py" --fusebox "$BUILD/libfusebox_ep.so" --ort-cuda "$LIB" --iters 50 --warmup 10 \
  "$A/ch_PP-OCRv4_det_infer.onnx=1x3x640x640" "$A/ch_ppocr_mobile_v2.0_cls_infer.onnx=1x3x48x192" \
  "$A/ch_PP-OCRv4_rec_infer.onnx=1x3x48x320"
