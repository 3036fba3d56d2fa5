#!/usr/bin/env bash
# session 11, call 4: CUPTI detached when recording goes off (build-new3/: cuptiFinalize from a
# cudaGetDevice exit callback, after the graph re-capture of build-new/): tracing cost on GPU decode,
# the two alternating, and trace on without CUPTI for reference; then with build-new3/ in build/:
# the trace checks, the device-KV decode test, CUDA graph tests, Qwen decode traced / unset /
# compiled out alternating.
set -u
cd "$(dirname "$0")/../.."
tar -xJf .gpu_s11/b.tar.xz
tar -xzf .gpu_s11/extra.tgz
tar -xzf .gpu_s11/extra4.tgz && cp build-new3/libfusebox_ep.so build-new/  # the same EP library; the CUDA ones differ
export LD_LIBRARY_PATH=$PWD/lib:$PWD/.deps/lib:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64
ln -sfn $PWD/testdata /usr/share/libonnx-testdata 2>/dev/null
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader; lscpu | grep -E 'Model name|^CPU\(s\)'
M=/tmp/qwen; mkdir -p $M
python3 models/gen_genai.py --layers 24 --hidden 896 --heads 14 --kv-heads 2 --ffn 4864 --vocab 151936 --max-pos 1024 --out $M/q.onnx > $M/gen.log 2>&1 &
GEN=$!
python3 models/gen_decoder.py --layers 4 --hidden 256 --heads 8 --ffn 512 --vocab 2048 --out models/gen/decoder_small.onnx > /dev/null 2>&1
B=build/bench/bench_trace; LO=$PWD/build-traceoff/libfusebox_ep.so
bt() { # LIBDIR MODEL REPS [env]
  local v=$1 m=$2 r=$3; shift 3
  echo "== bench_trace $m, $v $* (warm-up 300 ms, 7 counted rounds of 64 steps)"
  env "$@" taskset -c 2-9 timeout 70 $B --lib $PWD/$v/libfusebox_ep.so --lib-off $LO --device cuda --model $PWD/models/gen/$m.onnx --reps $r --steps 64 --rounds 8 --warmup-ms 300 2>&1 | grep -E "^  rep|^overhead|^fastest"
}
for m in decoder_small genai_tiny; do
  for blk in 1 2; do bt build-new $m 3; bt build-new3 $m 3; done
  bt build-new3 $m 3 FUSEBOX_CUPTI_LIB=/nonexistent
done
cp build-new3/libfusebox_ep.so build-new3/libfusebox_cuda.so build/; cp build-new3/tests/* build/tests/
echo "== test_trace_gpu / _exec / cuda_graph"; for t in test_trace_gpu test_trace_gpu_exec test_cuda_graph; do timeout 60 build/tests/$t 2>&1 | tail -1; done
echo "== test_e2e_genai_devkv real GPU"; FBX_TEST_REAL_GPU=1 timeout 120 build/tests/test_e2e_genai_devkv 2>&1 | grep -E "decode:|FAIL|passed" | head -8
echo "== gpu_trace_check"
REPS=0 REPS_GENAI=0 REPS_GRAPHS=0 REPS_EXTCORR=0 EXTCORR_TRACE=1 FBX_GPU_LOG=/tmp/gt timeout 150 scripts/gpu_trace_check.sh build 2>&1 | grep -E "PASS|FAIL|checks|fusebox\]" | tail -24
grep -c graph.invalidated /tmp/gt/decode.json
wait $GEN
G="generate $M/q.onnx --ep-devices gpu --kv-buffer shared --prompt-len 128 --new-tokens 256 --no-ort"
for i in 1 2 3; do
  echo -n "qwen traced: "; FUSEBOX_TRACE=/tmp/q.json timeout 60 build/fusebox $G 2>/tmp/q.err | grep -E "Fusebox  "
  echo -n "qwen unset: "; timeout 60 build/fusebox $G 2>&1 | grep -E "Fusebox  "
  echo -n "qwen compiled out: "; FUSEBOX_EP_LIB=$LO timeout 60 build/fusebox $G 2>&1 | grep -E "Fusebox  "
done
grep -E 'graph:|device records|fusebox\]' /tmp/q.err | head -5
