#!/usr/bin/env bash
# session 10, call 4: per-kernel records for a window of evals (FUSEBOX_GPU_DETAIL), then whole
# graph replays: checks (incl. device evals inside their host windows) and tracing cost; the
# Qwen-shaped decode vs torch.compile with the warp-per-head attention.
set -u
cd "$(dirname "$0")/../.."
tar -xJf .gpu_s10/b.tar.xz
mkdir -p build-traceoff && tar -xzf .gpu_s10/extra.tgz
export LD_LIBRARY_PATH=$PWD/lib:$PWD/.deps/lib:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader; lscpu | grep 'Model name'
python3 models/gen_decoder.py --layers 4 --hidden 256 --heads 8 --ffn 512 --vocab 2048 --out models/gen/decoder_small.onnx > /dev/null 2>&1
for t in test_trace_gpu test_trace_gpu_exec; do echo "== $t"; timeout 100 build/tests/$t 2>&1 | tail -3; done
echo "== gpu_trace_check (window 16 by default, capture eval 5)"
REPS=5 REPS_GENAI=5 REPS_GRAPHS=0 REPS_EXTCORR=0 EXTCORR_TRACE=0 FBX_GPU_LOG=/tmp/gt timeout 300 scripts/gpu_trace_check.sh build 2>&1 | grep -vE '^ok|^      [0-9]+\.' | tail -40
python3 bench/gpu_runs/trace_evals.py /tmp/gt/decode.json 20 | head -22 | cut -c1-160
export FUSEBOX_REPO=$PWD FUSEBOX_ORT_LIB=$PWD/.deps/lib/libonnxruntime.1.30.so
BT() { local m=$1; shift; env "$@" build/bench/bench_trace --lib $PWD/build/libfusebox_ep.so --lib-off $PWD/build-traceoff/libfusebox_ep.so --device cuda --reps 5 --steps 64 --rounds 3 --model $PWD/models/gen/$m.onnx 2>&1 | grep -E 'median|overhead' | sed 's/^/   /'; }
for mdl in genai_tiny decoder_small; do echo "== overhead $mdl FUSEBOX_GPU_DETAIL=all (every eval per kernel)"; BT $mdl FUSEBOX_GPU_DETAIL=all; done
echo "== python client vs torch.compile bf16, Qwen shape"
BENCH_GROUPS=qwen PAST=128,512 timeout 280 bench/gpu_genai_torch.sh build --torch-modes compile --dtypes bf16 2>&1 | grep -E "^\||PASS|FAIL" | head -16
