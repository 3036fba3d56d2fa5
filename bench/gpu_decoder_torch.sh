#!/usr/bin/env bash
# bench/gpu_decoder_torch.sh BUILD_DIR [extra bench/gpu_decoder_torch.py options]
#
# On a machine with an NVIDIA GPU, PyTorch and onnxruntime >= 1.29 (the H200 device machine):
# generates the 12-layer hidden-768 vocab-32000 decoder (models/gen_decoder.py) once, then runs
# bench/gpu_decoder_torch.py on it: Fusebox device=cuda through onnxruntime's Python client,
# PyTorch eager and torch.compile(mode="reduce-overhead") with a static KV cache, fp32 (TF32 off)
# and bf16, batch 1, past $PAST (default 128), $STEPS decode steps (default 64), in one process.
# FUSEBOX_VERBOSE=1 prints Fusebox's session summary (graph captures / replays) at teardown.
# Environment: MODEL_DIR (default /tmp/fusebox_bench), PAST, STEPS.
set -euo pipefail
BUILD=$(cd "${1:?usage: bench/gpu_decoder_torch.sh BUILD_DIR [options]}" && pwd)
shift
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${MODEL_DIR:-/tmp/fusebox_bench}
mkdir -p "$DIR"
MODEL=$DIR/decoder_l12_h768_v32000.onnx
PY=${PYTHON:-python3}
[ -e "$MODEL" ] || "$PY" "$ROOT/models/gen_decoder.py" --layers 12 --hidden 768 --heads 12 --ffn 2048 \
  --vocab 32000 --out "$MODEL"
export PYTHONUNBUFFERED=1
FUSEBOX_VERBOSE=${FUSEBOX_VERBOSE:-1} "$PY" "$ROOT/bench/gpu_decoder_torch.py" --model "$MODEL" \
  --ep-lib "$BUILD/libfusebox_ep.so" --past "${PAST:-128}" --steps "${STEPS:-64}" "$@"
