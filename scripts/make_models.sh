#!/usr/bin/env bash
# Generates the test / demo / benchmark models into models/gen/ (ignored by git).
# A model is (re)built only when it is missing or older than its generator script, so a second
# run does nothing. `--bench` adds the large benchmark models (decoder_100m: ~110M params, 440 MB).
#
#   models/gen/decoder_tiny.onnx      L=2  H=64  N=4  F=128  V=256     (tests)
#   models/gen/decoder_small.onnx     L=4  H=256 N=8  F=512  V=2048    (demo)
#   models/gen/decoder_100m.onnx      L=12 H=768 N=12 F=2048 V=16384   (--bench)
#   models/gen/cnn_small.onnx         1x3x64x64, widths 8/16/32/64, 1 block per stage (tests)
#   models/gen/cnn_resnet18ish.onnx   1x3x224x224, widths 64/128/256/512, 2 blocks per stage
#   models/gen/unet_q_small.onnx      quantize_dynamic-style U-Net 1x3x64x64, 11 convs (+ numpy reference case)
#   models/gen/unet_q_1024.onnx       the same at 1x3x1024x1024, widths 16..256, 100 convs (--bench)
#   models/gen/bert_q_tiny{,_pc_u8,_m1}.onnx  quantize_dynamic-style BERT encoder L=2 H=64 N=4 F=256 seq 16
#                                     (s8 per tensor / u8 per column / seq 1) + numpy reference cases
#   models/gen/bert_q_base.onnx       L=4 H=384 N=6 F=1536 seq 128 (s8 per tensor), _pc (per column),
#                                     _m1 (seq 1) (--bench)
#   models/gen/names.onnx             node names that need JSON escaping (trace test)
#   models/gen/vad.onnx               Silero-style VAD, LSTM(128) inside If branches, 512/256-sample chunks
#   models/gen/vad_noshape.onnx       the same at hidden 64, branch outputs declared without shapes
#   models/gen/if_small.onnx          If with outer-scope values, branches of different output shapes, a nested If
#   models/gen/if_unclaimable.onnx    the same with a Det (not claimable) in then_branch: the If stays with ORT
#   models/gen/loop_cell.onnx         a gated recurrent cell in a Loop body (outer-scope weights) + cases/loop_cell
#   models/gen/scan_cell.onnx         a tanh RNN cell in a Scan body (own weights) + cases/scan_cell
#   models/gen/genai_tiny{,_q4}.onnx  GenAI-style int4 decoder L=2 H=64 N=4/2 F=128 V=256, accuracy_level 0/4
#   models/gen/genai_tiny_f32.onnx   the same with MatMul on float32 weights (--float), cases/genai_tiny_f32/
#   models/gen/genai_qwen05b{,_q4}.onnx  Qwen2.5-0.5B-shaped GenAI int4 decoder (--bench): L=24 H=896 N=14/2
#                                     F=4864 V=151936, block 32, accuracy_level 0/4, 1024 positions (~0.9 GB each)
#   models/gen/cases/genai_tiny/      its float64 reference: prompt, greedy tokens, prefill/decode logits
#   models/gen/cases/decoder_tiny_{prefill,decode}/   ONNX-test-style cases with numpy references
set -euo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3
OUT=models/gen
BENCH=0
for a in "$@"; do
  case "$a" in
    --bench) BENCH=1 ;;
    *) echo "usage: $0 [--bench]" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"

# stale OUTPUT GENERATOR [DEPENDENCY...]: true when OUTPUT must be (re)built
stale() {
  local out=$1; shift
  [ -e "$out" ] || return 0
  local dep
  for dep in "$@"; do [ "$dep" -nt "$out" ] && return 0; done
  return 1
}

# gen OUTPUT GENERATOR ARGS...: build atomically (tmp file + rename) when stale
gen() {
  local out=$1 script=$2; shift 2
  stale "$out" "$script" || return 0
  local tmp="$out.tmp.$$"
  "$PY" "$script" "$@" --out "$tmp"
  mv -f "$tmp" "$out"
}

gen "$OUT/decoder_tiny.onnx" models/gen_decoder.py --layers 2 --hidden 64 --heads 4 --ffn 128 --vocab 256
gen "$OUT/decoder_small.onnx" models/gen_decoder.py --layers 4 --hidden 256 --heads 8 --ffn 512 --vocab 2048
gen "$OUT/cnn_small.onnx" models/gen_cnn.py --size 64 --widths 8,16,32,64 --blocks 1,1,1,1
gen "$OUT/cnn_resnet18ish.onnx" models/gen_cnn.py --size 224 --widths 64,128,256,512 --blocks 2,2,2,2
gen "$OUT/names.onnx" models/gen_names.py
# Silero-style VAD: STFT-as-Conv1d, convs, an LSTM inside If branches by sample rate, state in/out
gen "$OUT/vad.onnx" models/gen_vad.py --chunk 512 --hidden 128
gen "$OUT/vad_noshape.onnx" models/gen_vad.py --chunk 512 --hidden 64 --no-branch-shapes
gen "$OUT/if_small.onnx" models/gen_if.py
gen "$OUT/if_unclaimable.onnx" models/gen_if.py --unclaimable
gen "$OUT/loop_cell.onnx" models/gen_control_flow.py --kind loop --hidden 32 --steps 12 --cases "$OUT/cases/loop_cell"
gen "$OUT/scan_cell.onnx" models/gen_control_flow.py --kind scan --hidden 32 --steps 12 --cases "$OUT/cases/scan_cell"
gen "$OUT/loop_e2e.onnx" models/gen_loop_scan.py --kind loop --cases "$OUT/cases/loop_e2e"
gen "$OUT/scan_e2e.onnx" models/gen_loop_scan.py --kind scan --cases "$OUT/cases/scan_e2e"
gen "$OUT/misc_e2e.onnx" models/gen_loop_scan.py --kind misc --cases "$OUT/cases/misc_e2e"
gen "$OUT/nested_e2e.onnx" models/gen_loop_scan.py --kind nested --cases "$OUT/cases/nested_e2e"
# quantize_dynamic-style U-Net and its numpy reference (input.npy / logits.npy)
gen "$OUT/unet_q_small.onnx" models/gen_unet_q.py --size 64 --widths 8,16,32 --convs 2 --cases "$OUT/cases/unet_q_small"
# quantize_dynamic-style BERT encoders (MatMulInteger) and their numpy references (input.npy / last_hidden.npy)
BERT_TINY="--layers 2 --hidden 64 --heads 4 --ffn 256"
gen "$OUT/bert_q_tiny.onnx" models/gen_bert_q.py $BERT_TINY --seq 16 --cases "$OUT/cases/bert_q_tiny"
gen "$OUT/bert_q_tiny_pc_u8.onnx" models/gen_bert_q.py $BERT_TINY --seq 16 --wtype u8 --per-channel \
  --cases "$OUT/cases/bert_q_tiny_pc_u8"
gen "$OUT/bert_q_tiny_m1.onnx" models/gen_bert_q.py $BERT_TINY --seq 1 --cases "$OUT/cases/bert_q_tiny_m1"
# GenAI-style int4 decoder (com.microsoft ops) at accuracy_level 0 and 4, plus its float64 reference
GENAI_TINY="--layers 2 --hidden 64 --heads 4 --kv-heads 2 --ffn 128 --vocab 256"
gen "$OUT/genai_tiny.onnx" models/gen_genai.py $GENAI_TINY --accuracy-level 0 --cases "$OUT/cases/genai_tiny"
gen "$OUT/genai_tiny_q4.onnx" models/gen_genai.py $GENAI_TINY --accuracy-level 4
gen "$OUT/genai_tiny_f32.onnx" models/gen_genai.py $GENAI_TINY --float --cases "$OUT/cases/genai_tiny_f32"
if [ "$BENCH" = 1 ]; then
  gen "$OUT/decoder_100m.onnx" models/gen_decoder.py --layers 12 --hidden 768 --heads 12 --ffn 2048 --vocab 16384
  GENAI_QWEN="--layers 24 --hidden 896 --heads 14 --kv-heads 2 --ffn 4864 --vocab 151936 --max-pos 1024"
  gen "$OUT/genai_qwen05b.onnx" models/gen_genai.py $GENAI_QWEN --accuracy-level 0
  gen "$OUT/genai_qwen05b_q4.onnx" models/gen_genai.py $GENAI_QWEN --accuracy-level 4
  gen "$OUT/unet_q_1024.onnx" models/gen_unet_q.py --size 1024 --widths 16,32,64,128,256 --convs 11
  BERT_BASE="--layers 4 --hidden 384 --heads 6 --ffn 1536"
  gen "$OUT/bert_q_base.onnx" models/gen_bert_q.py $BERT_BASE --seq 128
  gen "$OUT/bert_q_base_pc.onnx" models/gen_bert_q.py $BERT_BASE --seq 128 --per-channel
  gen "$OUT/bert_q_base_m1.onnx" models/gen_bert_q.py $BERT_BASE --seq 1
fi

# reference cases for the tiny decoder (numpy forward, checked against a graph interpreter)
stamp="$OUT/cases/decoder_tiny.stamp"
if stale "$stamp" models/check_decoder.py "$OUT/decoder_tiny.onnx"; then
  "$PY" models/check_decoder.py --model "$OUT/decoder_tiny.onnx" --cases "$OUT/cases"
  touch "$stamp"
fi
echo "[models] ok ($OUT)"
