#!/usr/bin/env bash
# session 10, call 5: device records for a window of evals (FUSEBOX_GPU_DETAIL, then off):
# checks incl. device evals inside their host windows, tracing cost; a traced Qwen step.
set -u
cd "$(dirname "$0")/../.."
tar -xJf .gpu_s10/b.tar.xz
mkdir -p build-traceoff && tar -xzf .gpu_s10/extra.tgz
export LD_LIBRARY_PATH=$PWD/lib:$PWD/.deps/lib:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64
ln -sfn $PWD/testdata /usr/share/libonnx-testdata 2>/dev/null
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader; lscpu | grep 'Model name'
M=/tmp/qwen; mkdir -p $M
( python3 models/gen_genai.py --layers 24 --hidden 896 --heads 14 --kv-heads 2 --ffn 4864 --vocab 151936 --max-pos 1024 --out $M/q.onnx > $M/gen.log 2>&1 ) &
GEN=$!
python3 models/gen_decoder.py --layers 4 --hidden 256 --heads 8 --ffn 512 --vocab 2048 --out models/gen/decoder_small.onnx > /dev/null 2>&1
for t in test_trace_gpu test_trace_gpu_exec test_cuda_genai; do echo "== $t"; timeout 100 build/tests/$t 2>&1 | tail -1; done
echo "== gpu_trace_check (window 16 by default, capture eval 5)"
REPS=5 REPS_GENAI=5 REPS_GRAPHS=0 REPS_EXTCORR=0 EXTCORR_TRACE=0 FBX_GPU_LOG=/tmp/gt timeout 330 scripts/gpu_trace_check.sh build 2>&1 | grep -vE '^ok|^      [0-9]+\.' | tail -32
python3 bench/gpu_runs/trace_evals.py /tmp/gt/decode.json 18 | head -19 | cut -c1-150
wait $GEN
echo "== qwen traced (window)"
FUSEBOX_TRACE=/tmp/q.json build/fusebox generate $M/q.onnx --ep-devices gpu --kv-buffer shared --prompt-len 128 --new-tokens 64 --no-ort > /tmp/qt.out 2> /tmp/qt.err
grep -E "Fusebox  " /tmp/qt.out; grep -E -A8 'slowest ops' /tmp/qt.err | head -10; grep -E 'gpu:|busy attr|device records' /tmp/qt.err
python3 bench/gpu_runs/trace_evals.py /tmp/q.json 17 | cut -c1-110
for r in 1 2; do echo "== qwen untraced"; build/fusebox generate $M/q.onnx --ep-devices gpu --kv-buffer shared --prompt-len 128 --new-tokens 64 --no-ort 2>&1 | grep -E "Fusebox  "; done
