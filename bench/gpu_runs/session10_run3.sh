#!/usr/bin/env bash
# session 10, call 3: why sampled device records (CUPTI kinds switched per eval) gave evals of
# 100 ms busy; tracing cost by configuration.
set -u
cd "$(dirname "$0")/../.."
tar -xJf .gpu_s10/b.tar.xz
mkdir -p build-traceoff && tar -xzf .gpu_s10/extra.tgz
export LD_LIBRARY_PATH=$PWD/lib:$PWD/.deps/lib:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64
python3 models/gen_decoder.py --layers 4 --hidden 256 --heads 8 --ffn 512 --vocab 2048 --out models/gen/decoder_small.onnx > /dev/null 2>&1
echo "== cupti modes: 1 all, 4 every 16th, 6 graph-trace + every 16th; TSCB = our clock"
for m in 1 4 6; do timeout 60 .gpu_s10/cupti_modes $m 150 1000 16 sync 2>&1 | tail -2; TSCB=1 timeout 60 .gpu_s10/cupti_modes $m 150 1000 16 sync 2>&1 | tail -2; done
GEN=(build/fusebox generate models/gen/decoder_small.onnx --ort $PWD/.deps/lib/libonnxruntime.1.30.so --no-ort --prompt-len 16 --new-tokens 64 --rounds 1 --ep-option device=cuda)
for S in 16 1; do
  echo "== decoder_small traced, FUSEBOX_GPU_SAMPLE=$S"
  FUSEBOX_GPU_SAMPLE=$S FUSEBOX_TRACE=/tmp/d$S.json "${GEN[@]}" > /tmp/d$S.out 2> /tmp/d$S.err
  grep -E 'Fusebox  ' /tmp/d$S.out; grep -E 'gpu:|device records' /tmp/d$S.err
  python3 bench/gpu_runs/trace_evals.py /tmp/d$S.json 14
done
xz -T4 -c /tmp/d16.json > $OUT/d16.json.xz
export FUSEBOX_REPO=$PWD FUSEBOX_ORT_LIB=$PWD/.deps/lib/libonnxruntime.1.30.so
BT() { local m=$1; shift; env "$@" build/bench/bench_trace --lib $PWD/build/libfusebox_ep.so --lib-off $PWD/build-traceoff/libfusebox_ep.so --device cuda --reps 3 --steps 64 --rounds 3 --model $PWD/models/gen/$m.onnx 2>&1 | grep -E 'median|overhead' | sed 's/^/   /'; }
for mdl in genai_tiny decoder_small; do
  for cfg in "X=1" "FUSEBOX_GPU_SAMPLE=1" "FUSEBOX_CUPTI_LIB=/nonexistent"; do
    echo "== overhead $mdl $cfg"; BT $mdl $cfg
  done
done
