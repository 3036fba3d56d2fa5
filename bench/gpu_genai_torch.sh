#!/usr/bin/env bash
# bench/gpu_genai_torch.sh BUILD_DIR [extra bench/gpu_genai_torch.py options]
#
# On a machine with an NVIDIA GPU, PyTorch, numpy, onnx and onnxruntime >= 1.29 (the H200 device
# machine): generates the GenAI-style decoders it needs (models/gen_genai.py; each generation is
# timed) and runs bench/gpu_genai_torch.py on them: Fusebox device=cuda through onnxruntime's Python
# client with the KV cache as one shared max-length GPU buffer (past_key_values.* = present.*),
# ORT's CPU EP, PyTorch eager and torch.compile(mode="reduce-overhead") with a static KV cache, fp32
# (TF32 off) and bf16, batch 1, past $PAST (default 128,512), $STEPS decode steps (default 64).
# Groups ($BENCH_GROUPS, default "tiny l12"), one process each:
#   tiny  genai_tiny int4 and --float (L=2 H=64 N=4/2 F=128 V=256), with their float64 reference
#         cases; torch eager only (a correctness run)
#   l12   12-layer hidden-768 heads-12 (kv 12) ffn-2048 vocab-32000, --float then int4 (issue 9's
#         shape; the int4 model reuses the float one's torch timings: same shape)
#   qwen  Qwen2.5-0.5B shape int4 (L=24 H=896 N=14/2 F=4864 V=151936; generation takes minutes)
# Fusebox runs twice (--fusebox-logits host,device): logits in host memory (ORT copies them out each
# step, numpy takes the argmax) and logits bound in the GPU's memory with the argmax taken there by
# torch, as torch's own decode loop does.
# FUSEBOX_VERBOSE=1 (default here) makes Fusebox print its session summary (graph captures /
# replays, allocations, syncs), which the script reports. Environment: MODEL_DIR (default
# /tmp/fusebox_genai_bench), BENCH_GROUPS, PAST, STEPS, PYTHON.
set -euo pipefail
BUILD=$(cd "${1:?usage: bench/gpu_genai_torch.sh BUILD_DIR [options]}" && pwd)
shift
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${MODEL_DIR:-/tmp/fusebox_genai_bench}
PY=${PYTHON:-python3}
GROUPS_=${BENCH_GROUPS:-tiny l12}
mkdir -p "$DIR"
export PYTHONUNBUFFERED=1 FUSEBOX_VERBOSE=${FUSEBOX_VERBOSE:-1}

TINY="--layers 2 --hidden 64 --heads 4 --kv-heads 2 --ffn 128 --vocab 256 --max-pos 1024"
L12="--layers 12 --hidden 768 --heads 12 --kv-heads 12 --ffn 2048 --vocab 32000 --max-pos 1024"
QWEN="--layers 24 --hidden 896 --heads 14 --kv-heads 2 --ffn 4864 --vocab 151936 --max-pos 1024"

# gen OUT ARGS...: generate OUT once (tmp + rename), print how long it took
gen() {
  local out=$1; shift
  [ -e "$out" ] && return 0
  local t0=$SECONDS
  "$PY" "$ROOT/models/gen_genai.py" "$@" --out "$out.tmp.$$"
  mv -f "$out.tmp.$$" "$out"
  echo "[gen] $(basename "$out"): $((SECONDS - t0)) s ($(du -h "$out" | cut -f1))"
}

bench() { "$PY" "$ROOT/bench/gpu_genai_torch.py" --ep-lib "$BUILD/libfusebox_ep.so" --past "${PAST:-128,512}" \
  --steps "${STEPS:-64}" "$@"; }

# the big models are generated in the background while the tiny ones run
pids=()
case " $GROUPS_ " in *" l12 "*)
  (gen "$DIR/genai_l12_f32.onnx" $L12 --float && gen "$DIR/genai_l12_q4.onnx" $L12) & pids+=($!) ;; esac
case " $GROUPS_ " in *" qwen "*) (gen "$DIR/genai_qwen05b.onnx" $QWEN) & pids+=($!) ;; esac

rc=0
for g in $GROUPS_; do
  case $g in
    tiny)
      gen "$DIR/genai_tiny.onnx" $TINY --cases "$DIR/cases_tiny"
      gen "$DIR/genai_tiny_f32.onnx" $TINY --float --cases "$DIR/cases_tiny_f32"
      echo "===== group tiny"
      bench --model "$DIR/genai_tiny.onnx" --cases "$DIR/cases_tiny" --model "$DIR/genai_tiny_f32.onnx" \
        --cases "$DIR/cases_tiny_f32" --torch-modes eager "$@" || rc=1 ;;
    l12)
      wait "${pids[0]}"
      echo "===== group l12"
      bench --model "$DIR/genai_l12_f32.onnx" --model "$DIR/genai_l12_q4.onnx" "$@" || rc=1 ;;
    qwen)
      wait "${pids[-1]}"
      echo "===== group qwen"
      bench --model "$DIR/genai_qwen05b.onnx" "$@" || rc=1 ;;
    *) echo "gpu_genai_torch.sh: unknown group '$g' (tiny, l12, qwen)" >&2; exit 2 ;;
  esac
done
exit $rc
