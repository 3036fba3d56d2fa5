#!/usr/bin/env bash
# session 11, call 3: tracing cost on GPU decode, bench_trace pinned to 8 cores: build-new/ (graphs
# re-captured when CUPTI recording switches) and build-new2/ (the same, and CUPTI's callback
# subscriber given back when recording goes off) alternating; then with build-new2/ in build/: the
# trace checks, the device-KV decode test, and Qwen decode traced / unset / compiled out alternating.
set -u
cd "$(dirname "$0")/../.."
tar -xJf .gpu_s11/b.tar.xz
tar -xzf .gpu_s11/extra.tgz
tar -xzf .gpu_s11/extra3.tgz
export LD_LIBRARY_PATH=$PWD/lib:$PWD/.deps/lib:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64
ln -sfn $PWD/testdata /usr/share/libonnx-testdata 2>/dev/null
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader; lscpu | grep -E 'Model name|^CPU\(s\)|NUMA node'
M=/tmp/qwen; mkdir -p $M
python3 models/gen_genai.py --layers 24 --hidden 896 --heads 14 --kv-heads 2 --ffn 4864 --vocab 151936 --max-pos 1024 --out $M/q.onnx > $M/gen.log 2>&1 &
GEN=$!
python3 models/gen_decoder.py --layers 4 --hidden 256 --heads 8 --ffn 512 --vocab 2048 --out models/gen/decoder_small.onnx > /dev/null 2>&1
B=build/bench/bench_trace; LO=$PWD/build-traceoff/libfusebox_ep.so
for m in decoder_small genai_tiny; do
  for blk in 1 2; do for v in build-new build-new2; do
    echo "== bench_trace $m, $v, block $blk (taskset -c 2-9, warm-up 300 ms, 7 counted rounds of 64 steps)"
    taskset -c 2-9 timeout 70 $B --lib $PWD/$v/libfusebox_ep.so --lib-off $LO --device cuda --model $PWD/models/gen/$m.onnx --reps 3 --steps 64 --rounds 8 --warmup-ms 300 2>&1 | grep -E "^  rep|^overhead|^fastest"
  done; done
done
cp build-new2/libfusebox_ep.so build-new2/libfusebox_cuda.so build/; cp build-new/tests/test_e2e_genai_devkv build-new2/tests/test_trace_gpu* build/tests/
echo "== test_trace_gpu / _exec"; timeout 60 build/tests/test_trace_gpu 2>&1 | tail -1; timeout 60 build/tests/test_trace_gpu_exec 2>&1 | tail -1
echo "== test_e2e_genai_devkv real GPU"; FBX_TEST_REAL_GPU=1 timeout 120 build/tests/test_e2e_genai_devkv 2>&1 | grep -E "decode:|FAIL|passed" | head -8
echo "== gpu_trace_check"
REPS=0 REPS_GENAI=0 REPS_GRAPHS=0 REPS_EXTCORR=0 EXTCORR_TRACE=0 FBX_GPU_LOG=/tmp/gt timeout 150 scripts/gpu_trace_check.sh build 2>&1 | grep -E "PASS|FAIL|checks" | tail -14
wait $GEN
G="generate $M/q.onnx --ep-devices gpu --kv-buffer shared --prompt-len 128 --new-tokens 256 --no-ort"
for i in 1 2 3; do
  echo -n "qwen traced: "; FUSEBOX_TRACE=/tmp/q.json timeout 60 build/fusebox $G 2>/tmp/q.err | grep -E "Fusebox  "
  echo -n "qwen unset: "; timeout 60 build/fusebox $G 2>&1 | grep -E "Fusebox  "
  echo -n "qwen compiled out: "; FUSEBOX_EP_LIB=$LO timeout 60 build/fusebox $G 2>&1 | grep -E "Fusebox  "
done
grep -E 'graph:|device records' /tmp/q.err
