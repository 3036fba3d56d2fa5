#!/usr/bin/env bash
# scripts/gpu_check.sh BUILD_DIR — the CUDA backend on a machine with an NVIDIA GPU.
#
#   1. nvidia-smi, then test_cuda_loader, test_cuda_ops and test_cuda_genai (the decoder
#      ops; these two must run, not skip);
#   2. compute-sanitizer memcheck on test_cuda_ops and test_cuda_genai (when compute-sanitizer is on PATH
#      or in /usr/local/cuda/bin; said when it is not);
#   3. `fusebox check MODEL --ep-option device=cuda` (Fusebox on the GPU vs ORT's CPU EP)
#      on the generated models and the PP-OCR models, compiled and eager (compile=off), and a
#      greedy decode of the generated decoder that must give ORT's tokens;
#   4. compute-sanitizer memcheck on `fusebox check` of the generated models;
#   5. `fusebox bench` with device=cuda (timings, informational: they pass when they run).
# Environment: FUSEBOX_ORT_LIB (default .deps/lib/libonnxruntime.1.30.so), FBX_GPU_LOG
# (log folder, default a fresh /tmp/fusebox_gpu.XXXXXX). Prints one line per case and
# "N passed, N failed"; exit 1 on any failure.
set -u
BUILD=${1:?usage: scripts/gpu_check.sh BUILD_DIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$BUILD" && pwd) || { echo "no build dir $1"; exit 1; }
cd "$ROOT"
ORT=${FUSEBOX_ORT_LIB:-$ROOT/.deps/lib/libonnxruntime.1.30.so}
LOG=${FBX_GPU_LOG:-$(mktemp -d /tmp/fusebox_gpu.XXXXXX)}
mkdir -p "$LOG"
export FUSEBOX_EP_LIB=$BUILD/libfusebox_ep.so
unset FUSEBOX_TRACE FUSEBOX_VERBOSE FUSEBOX_CLAIM_DEBUG
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
PASS=0
FAIL=0
FAILED=()

run_case() {
  local name=$1; shift
  local log="$LOG/$(echo "$name" | tr -c 'A-Za-z0-9._-' '_').log"
  local t0=$(date +%s%N)
  timeout "${FBX_GPU_TIMEOUT:-600}" "$@" >"$log" 2>&1
  local rc=$?
  local ms=$((($(date +%s%N) - t0) / 1000000))
  case $name in test_cuda_ops*|test_cuda_genai*) # these must run on the GPU, not skip
    if [ $rc -eq 0 ] && grep -q "SKIP" "$log"; then rc=99; fi ;;
  esac
  if [ $rc -eq 0 ]; then
    PASS=$((PASS + 1)); printf 'PASS  %-64s %6d ms\n' "$name" "$ms"
  else
    FAIL=$((FAIL + 1)); FAILED+=("$name")
    printf 'FAIL  %-64s %6d ms (exit %d)\n' "$name" "$ms" "$rc"
    tail -n 30 "$log" | sed 's/^/      | /'
  fi
}

echo "== device =="
nvidia-smi -L 2>&1 || echo "nvidia-smi not found"
echo "== CUDA backend unit tests =="
run_case "test_cuda_loader" "$BUILD/tests/test_cuda_loader"
run_case "test_cuda_ops" "$BUILD/tests/test_cuda_ops"
grep -h "ops run on cuda" "$LOG"/test_cuda_ops.log 2>/dev/null
run_case "test_cuda_genai" "$BUILD/tests/test_cuda_genai"
if [ -n "$CS" ]; then
  run_case "test_cuda_ops under compute-sanitizer memcheck" "$CS" --tool memcheck --error-exitcode 1 \
    --leak-check full "$BUILD/tests/test_cuda_ops"
  run_case "test_cuda_genai under compute-sanitizer memcheck" "$CS" --tool memcheck --error-exitcode 1 \
    --leak-check full "$BUILD/tests/test_cuda_genai"
else
  echo "compute-sanitizer not found: memcheck not run"
fi

echo "== end to end: fusebox check --ep-option device=cuda (vs ORT's CPU EP) =="
OCR=$ROOT/.deps/ocr/package/assets
CASES=(
  "models/gen/decoder_tiny.onnx|"
  "models/gen/cnn_small.onnx|"
  "models/gen/genai_tiny.onnx|"
  "$OCR/ch_PP-OCRv4_det_infer.onnx|--shape x=1x3x224x224"
  "$OCR/ch_PP-OCRv4_rec_infer.onnx|--shape x=1x3x48x320"
  "$OCR/ch_ppocr_mobile_v2.0_cls_infer.onnx|--shape x=1x3x48x192"
)
for c in "${CASES[@]}"; do
  m=${c%%|*}; opts=${c#*|}
  name=$(basename "$m" .onnx)
  if [ ! -f "$m" ]; then echo "skip  $m (missing)"; continue; fi
  for compile in on off; do
    # shellcheck disable=SC2086
    run_case "check $name device=cuda compile=$compile" "$BUILD/fusebox" check "$m" --ort "$ORT" $opts \
      --ep-option device=cuda --ep-option compile=$compile
  done
done
if [ -f models/gen/decoder_tiny.onnx ]; then
  run_case "generate decoder_tiny device=cuda identical tokens" "$BUILD/fusebox" generate models/gen/decoder_tiny.onnx \
    --ort "$ORT" --prompt-len 8 --new-tokens 16 --ep-option device=cuda
  grep -hiE "tok/s|identical" "$LOG"/generate_decoder_tiny*.log | head -4 | sed 's/^/      /'
fi
if [ -f models/gen/decoder_small.onnx ]; then
  run_case "generate decoder_small device=cuda identical tokens" "$BUILD/fusebox" generate models/gen/decoder_small.onnx \
    --ort "$ORT" --prompt-len 32 --new-tokens 64 --ep-option device=cuda
  grep -hiE "tok/s|identical" "$LOG"/generate_decoder_small*.log | head -4 | sed 's/^/      /'
fi
if [ -n "$CS" ]; then
  for m in models/gen/decoder_tiny.onnx models/gen/cnn_small.onnx models/gen/genai_tiny.onnx; do
    [ -f "$m" ] || continue
    run_case "check $(basename "$m" .onnx) device=cuda under memcheck" "$CS" --tool memcheck --error-exitcode 1 \
      "$BUILD/fusebox" check "$m" --ort "$ORT" --ep-option device=cuda
  done
fi

echo "== timing: fusebox bench --ep-option device=cuda (Fusebox on the GPU vs ORT's CPU EP; informational) =="
BENCH=(
  "models/gen/decoder_tiny.onnx|"
  "models/gen/decoder_small.onnx|"
  "models/gen/cnn_small.onnx|"
  "$OCR/ch_PP-OCRv4_det_infer.onnx|--shape x=1x3x640x640"
)
for c in "${BENCH[@]}"; do
  m=${c%%|*}; opts=${c#*|}
  [ -f "$m" ] || continue
  name="bench $(basename "$m" .onnx) $opts device=cuda"
  # shellcheck disable=SC2086
  run_case "$name" "$BUILD/fusebox" bench "$m" --ort "$ORT" $opts --ep-option device=cuda --iters 20
  sed 's/^/      /' "$LOG/$(echo "$name" | tr -c 'A-Za-z0-9._-' '_').log" | grep -iE "median|ratio|fusebox|ort" | head -4
done

echo "logs: $LOG"
if [ $FAIL -gt 0 ]; then
  echo "failed:"; for f in "${FAILED[@]}"; do echo "  - $f"; done
fi
echo "$PASS passed, $FAIL failed"
[ $FAIL -eq 0 ]
