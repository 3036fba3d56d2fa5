#!/usr/bin/env bash
# scripts/cpu_bench_set.sh BUILD_DIR [THREADS...] — issue 12's CPU benchmark rows on this machine,
# Fusebox against ORT's CPU EP in the same process at the same thread count, one run each:
# the fp32 12-layer decoder (vocab 32000, Transpose+MatMul attention) prefill 128 + decode, the
# Qwen-shaped int4 GenAI decoder (FBX_QWEN=1; generating it takes minutes), PP-OCR det/rec/cls,
# the LSTM VAD, the quantize_dynamic BERT encoder (seq 128 and 1) and U-Net (1024x1024), beside
# the read-bandwidth probe. THREADS default "2 16"; a count of 2 runs pinned to cores 0,1
# (taskset), others unpinned. Models are generated into FBX_BENCH_MODELS (default
# /tmp/fbx_bench_models) when missing. Prints `lscpu`'s model name first: record it with the figures.
set -u
BUILD=${1:?usage: scripts/cpu_bench_set.sh BUILD_DIR [THREADS...]}
shift
THREADS=${*:-2 16}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$BUILD" && pwd)
cd "$ROOT"
M=${FBX_BENCH_MODELS:-/tmp/fbx_bench_models}
PY=${PYTHON:-python3}
mkdir -p "$M"
gen() { [ -s "$1" ] || { echo "[gen] $1"; "$PY" "${@:2}" --out "$1" >/dev/null || echo "[gen] FAILED $1"; }; }
gen "$M/dec32k.onnx" models/gen_decoder.py --layers 12 --hidden 768 --heads 12 --ffn 2048 --vocab 32000
gen "$M/bert_q_base.onnx" models/gen_bert_q.py --layers 4 --hidden 384 --heads 6 --ffn 1536 --seq 128
gen "$M/bert_q_base_m1.onnx" models/gen_bert_q.py --layers 4 --hidden 384 --heads 6 --ffn 1536 --seq 1
gen "$M/unet_q_1024.onnx" models/gen_unet_q.py --size 1024 --widths 16,32,64,128,256 --convs 11
if [ "${FBX_QWEN:-0}" = 1 ]; then
  gen "$M/genai_qwen05b_q4.onnx" models/gen_genai.py --layers 24 --hidden 896 --heads 14 --kv-heads 2 \
    --ffn 4864 --vocab 151936 --max-pos 1024 --accuracy-level 4
fi
OCR=$(find .deps/ocr -name '*.onnx' | sort)
det=$(echo "$OCR" | grep -m1 det); rec=$(echo "$OCR" | grep -m1 rec); cls=$(echo "$OCR" | grep -m1 cls)
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p') ($(nproc) cores)"
FB=$BUILD/fusebox
for t in $THREADS; do
  pin=""; [ "$t" = 2 ] && pin="taskset -c 0,1"
  echo "=== threads $t ${pin:+(pinned to cores 0,1)}"
  $pin "$BUILD/bench/bench_mnb" --bw "$t" 2>&1 | tail -1
  $pin "$FB" generate "$M/dec32k.onnx" --prompt-len 128 --new-tokens 32 --rounds 2 --threads "$t" 2>&1 | grep -E "prefill|ratio|sequences"
  if [ -s "$M/genai_qwen05b_q4.onnx" ]; then
    $pin "$FB" generate "$M/genai_qwen05b_q4.onnx" --prompt-len 128 --new-tokens 16 --rounds 2 --threads "$t" 2>&1 | grep -E "prefill|ratio|sequences"
  fi
  [ -n "$det" ] && $pin "$FB" bench "$det" --shape x=1x3x640x640 --threads "$t" --iters 20 --block 10 2>&1 | tail -3
  [ -n "$rec" ] && $pin "$FB" bench "$rec" --shape x=1x3x48x320 --threads "$t" --iters 40 --block 20 2>&1 | tail -3
  [ -n "$cls" ] && $pin "$FB" bench "$cls" --shape x=1x3x48x192 --threads "$t" --iters 400 --block 100 2>&1 | tail -3
  $pin "$BUILD/bench/bench_vad" --threads "$t" 2>&1 | tail -2
  $pin "$FB" bench "$M/bert_q_base.onnx" --threads "$t" --iters 40 --block 20 2>&1 | tail -3
  $pin "$FB" bench "$M/bert_q_base_m1.onnx" --threads "$t" --iters 300 2>&1 | tail -3
  $pin "$FB" bench "$M/unet_q_1024.onnx" --threads "$t" --iters 2 --warmup 1 --block 1 2>&1 | tail -3
done
