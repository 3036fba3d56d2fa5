#!/usr/bin/env bash
# session 11, call 2: CUDA graphs re-captured when CUPTI recording switches (build-new/: the graph
# epoch includes the recording generation) against the call-1 libraries (build/): tracing cost on
# GPU decode after FUSEBOX_GPU_DETAIL's window, old and new alternating; then the trace checks, the
# device-KV decode test and a traced Qwen decode with the new libraries.
set -u
cd "$(dirname "$0")/../.."
tar -xJf .gpu_s11/b.tar.xz
tar -xzf .gpu_s11/extra.tgz
tar -xzf .gpu_s11/extra2.tgz
export LD_LIBRARY_PATH=$PWD/lib:$PWD/.deps/lib:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64
ln -sfn $PWD/testdata /usr/share/libonnx-testdata 2>/dev/null
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader; lscpu | grep -E 'Model name|^CPU\(s\)'
M=/tmp/qwen; mkdir -p $M
python3 models/gen_genai.py --layers 24 --hidden 896 --heads 14 --kv-heads 2 --ffn 4864 --vocab 151936 --max-pos 1024 --out $M/q.onnx > $M/gen.log 2>&1 &
GEN=$!
python3 models/gen_decoder.py --layers 4 --hidden 256 --heads 8 --ffn 512 --vocab 2048 --out models/gen/decoder_small.onnx > /dev/null 2>&1
B=build/bench/bench_trace; LO=$PWD/build-traceoff/libfusebox_ep.so
for m in decoder_small genai_tiny; do
  for v in build build-new build build-new; do
    echo "== bench_trace $m, libraries $v (warm-up 300 ms, 7 counted rounds of 64 steps)"
    timeout 80 $B --lib $PWD/$v/libfusebox_ep.so --lib-off $LO --device cuda --model $PWD/models/gen/$m.onnx --reps 3 --steps 64 --rounds 8 --warmup-ms 300 2>&1 | tail -7
  done
done
cp build-new/libfusebox_ep.so build-new/libfusebox_cuda.so build/; cp build-new/tests/test_e2e_genai_devkv build/tests/
echo "== test_trace_gpu_exec"; timeout 60 build/tests/test_trace_gpu_exec 2>&1 | tail -1
echo "== test_e2e_genai_devkv real GPU"; FBX_TEST_REAL_GPU=1 timeout 120 build/tests/test_e2e_genai_devkv 2>&1 | grep -E "decode:|FAIL|passed" | head -8
echo "== gpu_trace_check"
REPS=0 REPS_GENAI=0 REPS_GRAPHS=0 REPS_EXTCORR=0 EXTCORR_TRACE=0 FBX_GPU_LOG=/tmp/gt timeout 150 scripts/gpu_trace_check.sh build 2>&1 | grep -vE '^ok|^      [0-9]+\.' | tail -14
grep -c graph.invalidated /tmp/gt/decode.json
wait $GEN
G="build/fusebox generate $M/q.onnx --ep-devices gpu --kv-buffer shared --prompt-len 128 --new-tokens 256 --no-ort"
for i in 1 2; do
  echo -n "qwen traced: "; FUSEBOX_TRACE=/tmp/q.json timeout 60 $G 2>/tmp/q.err | grep -E "Fusebox  "
  echo -n "qwen untraced: "; timeout 60 $G 2>&1 | grep -E "Fusebox  "
done
grep -E 'graph:|device records' /tmp/q.err
