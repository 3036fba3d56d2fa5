#!/usr/bin/env bash
# scripts/gpu_genai_decode.sh BUILD OUTDIR — GenAI-style int4 decode on a GPU, the way ONNX Runtime
# GenAI runs it: `fusebox generate --ep-devices gpu` with the shared KV buffers, input_ids,
# attention_mask and logits in Fusebox's device memory (--kv-memory device, the default there).
#   1. tests: test_e2e_genai_devkv on the GPU (64 steps: tokens = ORT CPU, 1 capture, one replay
#      per run, no allocation after the first decode run, 1 sync per run), test_cuda_genai,
#      test_cuda_graph, test_e2e_gpu_device
#   2. models (models/gen_genai.py, into OUTDIR/models unless there): a 12-layer hidden-768
#      vocab-32000 one (12 heads, 4 KV heads, FFN 2048) and the Qwen2.5-0.5B-shaped one (24 layers,
#      hidden 896, 14/2 heads, FFN 4864, vocab 151936)
#   3. decode at past 128: prompt 128, 64 new tokens (past 128..191), max length 256; Fusebox on
#      the GPU against ORT's CPU EP (tokens compared at every step); then Fusebox alone with
#      FUSEBOX_CUDA_MNB_KSPLIT=0 (the one-warp-per-column GEMV) and FUSEBOX_GRAPH_SEGMENTS=0 (no
#      graphs) for A/B; a traced run without graphs for the per-op device time
#   4. the GPU's read bandwidth (torch: a sum over 4 GiB of float32, best of 20)
# Needs the driver, python3 with onnx and numpy (and torch for 4).
set -uo pipefail
BUILD=${1:?usage: scripts/gpu_genai_decode.sh BUILD OUTDIR}
OUTD=${2:?usage: scripts/gpu_genai_decode.sh BUILD OUTDIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUTD/models"
export FUSEBOX_EP_LIB=$BUILD/libfusebox_ep.so FUSEBOX_REPO=$ROOT
PY=${PY:-python3}
L12=$OUTD/models/genai_l12_h768.onnx QW=$OUTD/models/genai_qwen05b.onnx
[ -e "$L12" ] || $PY "$ROOT/models/gen_genai.py" --layers 12 --hidden 768 --heads 12 --kv-heads 4 --ffn 2048 \
  --vocab 32000 --out "$L12" > "$OUTD/gen_l12.log" 2>&1 &
[ -e "$QW" ] || $PY "$ROOT/models/gen_genai.py" --layers 24 --hidden 896 --heads 14 --kv-heads 2 --ffn 4864 \
  --vocab 151936 --out "$QW" > "$OUTD/gen_qwen.log" 2>&1 &
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader
echo "== tests"
FBX_TEST_REAL_GPU=1 "$BUILD/tests/test_e2e_genai_devkv" 2>&1 | grep -v '^  *[0-9]*\. \|slowest\|session:\|claim:\|kernels:\|timing:'
for t in test_cuda_genai test_cuda_graph; do "$BUILD/tests/$t" 2>&1 | tail -3; done
FBX_TEST_REAL_GPU=1 "$BUILD/tests/test_e2e_gpu_device" 2>&1 | tail -2
gen() { "$BUILD/fusebox" generate "$@" --ep-devices gpu --kv-buffer shared --prompt-len 128 --new-tokens 64 --max-length 256; }
wait
for m in "$L12" "$QW"; do
  echo "== $(basename "$m"): Fusebox GPU (device KV) vs ORT CPU"
  FUSEBOX_VERBOSE=1 gen "$m" --rounds 3 2>&1 | grep -v '^  *[0-9]*\. \|slowest'
  echo "== $(basename "$m"): A/B, Fusebox alone"
  FUSEBOX_CUDA_MNB_KSPLIT=0 gen "$m" --rounds 3 --no-ort 2>&1 | grep -E 'decode|KV' | sed 's/^/  [KSPLIT=0] /'
  FUSEBOX_GRAPH_SEGMENTS=0 FUSEBOX_VERBOSE=1 gen "$m" --rounds 3 --no-ort 2>&1 | grep -E ' decode |graph:' | sed 's/^/  [GRAPH_SEGMENTS=0] /'
  echo "== $(basename "$m"): per-op device time (no graphs, trace on)"
  FUSEBOX_GRAPH_SEGMENTS=0 FUSEBOX_TRACE=/tmp/gg_trace.json gen "$m" --rounds 1 --no-ort 2>&1 | sed -n '/slowest ops/,$p' | head -14
done
echo "== read bandwidth"
$PY - <<'EOF' 2>&1 | tail -2
import torch
x = torch.ones(1 << 30, dtype=torch.float32, device="cuda")
for _ in range(3): x.sum()
torch.cuda.synchronize()
best = 1e9
for _ in range(20):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record(); x.sum(); b.record(); torch.cuda.synchronize()
    best = min(best, a.elapsed_time(b) / 1e3)
print(f"sum over 4 GiB float32: {best*1e3:.3f} ms, {4 * (1 << 30) / best / 1e12:.2f} TB/s read")
EOF
