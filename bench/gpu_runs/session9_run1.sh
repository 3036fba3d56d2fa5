#!/usr/bin/env bash
# session 9, call 1: PDL correctness + A/B
set -u
cd "$(dirname "$0")/.."
tar -xJf .gpu_s9/b.tar.xz
export LD_LIBRARY_PATH=$PWD/lib:$PWD/.deps/lib:/usr/local/cuda/lib64
ln -sfn $PWD/testdata /usr/share/libonnx-testdata 2>/dev/null
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
lscpu | grep 'Model name'
M=/tmp/qwen; mkdir -p $M
( t0=$SECONDS; python3 models/gen_genai.py --layers 24 --hidden 896 --heads 14 --kv-heads 2 --ffn 4864 --vocab 151936 --max-pos 1024 --out $M/q.onnx > $M/gen.log 2>&1; echo "[gen qwen $((SECONDS-t0)) s]" >> $M/gen.log ) &
GEN=$!
for t in test_cuda_genai test_cuda_ops test_cuda_graph test_cuda_nvrtc; do
  echo "== $t (PDL on)"; timeout 200 build/tests/$t 2>&1 | tail -3
done
echo "== test_cuda_genai PDL off"; FUSEBOX_CUDA_PDL=0 timeout 200 build/tests/test_cuda_genai 2>&1 | tail -1
echo "== racecheck/synccheck on test_cuda_genai"
timeout 150 compute-sanitizer --tool racecheck build/tests/test_cuda_genai 2>&1 | tail -3
echo "== bench_cuda_genai PDL on / off"
build/bench/bench_cuda_genai 400 2>&1 | tail -25
FUSEBOX_CUDA_PDL=0 build/bench/bench_cuda_genai 400 2>&1 | tail -25
wait $GEN; cat $M/gen.log | tail -2
for r in 1 2; do for p in 1 0; do
  echo "== qwen decode PDL=$p round $r"
  FUSEBOX_CUDA_PDL=$p build/fusebox generate $M/q.onnx --ep-devices gpu --kv-buffer shared --prompt-len 128 --new-tokens 64 $([ $r = 2 ] && echo --no-ort) 2>&1 | grep -E "Fusebox|ORT CPU|ratio|identical|differ|error" | head -5
done; done
