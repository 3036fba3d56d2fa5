#!/usr/bin/env bash
# scripts/gpu_check.sh BUILD_DIR — the CUDA backend on a machine with an NVIDIA GPU.
#
#   1. nvidia-smi, then test_cuda_loader, test_cuda_nvrtc, test_cuda_ops, test_cuda_genai (the
#      decoder ops) and test_backend_stream (which must run, not skip), test_cuda_ops again with FUSEBOX_CUDA_NVRTC=off
#      (the interpreter kernel);
#   2. compute-sanitizer memcheck on test_cuda_ops and test_cuda_genai (when compute-sanitizer is on PATH
#      or in /usr/local/cuda/bin; said when it is not);
#   3. the ONNX backend node suite through Fusebox with device=cuda (tests/conformance: no claimed
#      case may be wrong; its report is left in the log folder as REPORT_cuda.md);
#   3b. `fusebox check MODEL --ep-option device=cuda` (Fusebox on the GPU vs ORT's CPU EP)
#      on the generated models and the PP-OCR models, compiled and eager (compile=off), and a
#      greedy decode of the generated decoder that must give ORT's tokens;
#   4. compute-sanitizer memcheck on `fusebox check` of the generated models;
#   5. `fusebox bench` with device=cuda, and again with ort_stream=off (A/B of Compute on ORT's stream;
#      timings, informational: they pass when they run).
# With device=cuda the sessions get every Fusebox OrtEpDevice, so they run on the GPU OrtEpDevice
# (ORT's buffers in the GPU's memory); step 3 also checks the host-buffer path (--ep-devices cpu),
# and test_e2e_gpu_device (FBX_TEST_REAL_GPU=1) checks IOBinding and the data transfer through the
# C API, test_e2e_gpu_stream (FBX_TEST_REAL_GPU=1) Compute and copies on ORT's stream (0 host syncs).
# The Python client: python3 scripts/gpu_python_iobinding.py BUILD/libfusebox_ep.so MODEL...
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
  # on a GPU machine these must run, not skip
  case "$name" in test_cuda_ops* | test_cuda_nvrtc* | test_cuda_genai* | test_e2e_gpu_device* | test_e2e_gpu_stream* | test_backend_stream* | test_e2e_genai_devkv*) [ $rc -eq 0 ] && grep -q "SKIP" "$log" && rc=99 ;; esac
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
run_case "test_cuda_nvrtc" "$BUILD/tests/test_cuda_nvrtc"
run_case "test_cuda_ops" "$BUILD/tests/test_cuda_ops"
grep -h "ops run on cuda" "$LOG"/test_cuda_ops.log 2>/dev/null
# the interpreter kernel too: the fused programs run on it where NVRTC cannot make a kernel
run_case "test_cuda_ops (FUSEBOX_CUDA_NVRTC=off: the interpreter)" env FUSEBOX_CUDA_NVRTC=off "$BUILD/tests/test_cuda_ops"
run_case "test_cuda_genai" "$BUILD/tests/test_cuda_genai"
# the stream members ORT's stream is made of (bound stream, switch ordering, cross-backend events)
FBX_GPU_TIMEOUT=${FBX_GPU_STREAM_TIMEOUT:-180} run_case "test_backend_stream" "$BUILD/tests/test_backend_stream"
if [ -n "$CS" ]; then
  run_case "test_cuda_ops under compute-sanitizer memcheck" "$CS" --tool memcheck --error-exitcode 1 \
    --leak-check full "$BUILD/tests/test_cuda_ops"
  run_case "test_cuda_genai under compute-sanitizer memcheck" "$CS" --tool memcheck --error-exitcode 1 \
    --leak-check full "$BUILD/tests/test_cuda_genai"
else
  echo "compute-sanitizer not found: memcheck not run"
fi

echo "== the GPU OrtEpDevice through the C API (IOBinding, data transfer, allocators) =="
for lib in "$ORT" "$ROOT/.deps/lib/libonnxruntime.1.29.so"; do
  [ -f "$lib" ] || continue
  run_case "test_e2e_gpu_device real GPU [$(basename "$lib")]" env FBX_TEST_REAL_GPU=1 FUSEBOX_ORT_LIB="$lib" \
    "$BUILD/tests/test_e2e_gpu_device"
  # ORT's stream: Compute runs on it with 0 host syncs (ort_stream=on) vs 1 per Compute (off); a hang
  # (a wait that never ends) fails here after FBX_GPU_STREAM_TIMEOUT seconds instead of stalling the script
  FBX_GPU_TIMEOUT=${FBX_GPU_STREAM_TIMEOUT:-180} run_case "test_e2e_gpu_stream real GPU [$(basename "$lib")]" \
    env FBX_TEST_REAL_GPU=1 FUSEBOX_ORT_LIB="$lib" "$BUILD/tests/test_e2e_gpu_stream"
done
run_case "test_e2e_genai_devkv real GPU (64-step decode, device KV: 1 capture, replays, 0 allocs)" \
  env FBX_TEST_REAL_GPU=1 "$BUILD/tests/test_e2e_genai_devkv"

echo "== the ONNX node suite with device=cuda (exit 0: no case Fusebox claims is wrong) =="
NODE_DIR=/usr/share/libonnx-testdata/data/node
[ -d "$ROOT/testdata/data/node" ] && NODE_DIR=$ROOT/testdata/data/node  # scripts/gpu_bundle.sh's copy
if [ -d "$NODE_DIR" ]; then
  # --no-fork: the CUDA driver cannot be used in a child forked after the parent initialised it
  # (the factory counts the GPUs when ORT lists the devices)
  run_case "test_conformance --ep-option device=cuda" "$BUILD/tests/test_conformance" --no-fork --dir "$NODE_DIR" \
    --dir models/gen/cases --ep-option device=cuda --report "$LOG/REPORT_cuda.md"
  grep -m3 -iE "claimed|wrong|cases" "$LOG/REPORT_cuda.md" 2>/dev/null | sed 's/^/      /'
else
  echo "skip  the ONNX node suite (no $NODE_DIR)"
fi

echo "== end to end: fusebox check --ep-option device=cuda (vs ORT's CPU EP) =="
OCR=$ROOT/.deps/ocr/package/assets
CASES=(
  "models/gen/decoder_tiny.onnx|"
  "models/gen/cnn_small.onnx|"
  "models/gen/genai_tiny.onnx|"
  "models/gen/loop_cell.onnx|"
  "models/gen/scan_cell.onnx|"
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
  # shellcheck disable=SC2086
  run_case "check $name device=cuda host buffers (--ep-devices cpu)" "$BUILD/fusebox" check "$m" --ort "$ORT" \
    $opts --ep-devices cpu --ep-option device=cuda
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
  # A/B: Fusebox's own queue, waited for at the end of every Compute (the behaviour before ORT's stream)
  name="bench $(basename "$m" .onnx) $opts device=cuda ort_stream=off"
  # shellcheck disable=SC2086
  run_case "$name" "$BUILD/fusebox" bench "$m" --ort "$ORT" $opts --ep-option device=cuda --ep-option ort_stream=off --iters 20
  sed 's/^/      /' "$LOG/$(echo "$name" | tr -c 'A-Za-z0-9._-' '_').log" | grep -iE "median|ratio|fusebox|ort" | head -4
done

echo "logs: $LOG"
if [ $FAIL -gt 0 ]; then
  echo "failed:"; for f in "${FAILED[@]}"; do echo "  - $f"; done
fi
echo "$PASS passed, $FAIL failed"
[ $FAIL -eq 0 ]
