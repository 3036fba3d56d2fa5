#!/usr/bin/env bash
# session 11, call 1: tracing cost on GPU decode with a 300 ms warm-up per worker (issue 10), and
# without CUPTI (host side alone); the norm-in-GEMV patch (bench/gpu_runs/wip/normgemv.patch, its
# libraries under build-norm/): unit cases, traced variants, Qwen decode A/B; PP-OCR det with tf32.
set -u
cd "$(dirname "$0")/../.."
tar -xJf .gpu_s11/b.tar.xz
tar -xzf .gpu_s11/extra.tgz
export LD_LIBRARY_PATH=$PWD/lib:$PWD/.deps/lib:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64
ln -sfn $PWD/testdata /usr/share/libonnx-testdata 2>/dev/null
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader; lscpu | grep -E 'Model name|^CPU\(s\)'
M=/tmp/qwen; mkdir -p $M
python3 models/gen_genai.py --layers 24 --hidden 896 --heads 14 --kv-heads 2 --ffn 4864 --vocab 151936 --max-pos 1024 --out $M/q.onnx > $M/gen.log 2>&1 &
GEN=$!
python3 models/gen_decoder.py --layers 4 --hidden 256 --heads 8 --ffn 512 --vocab 2048 --out models/gen/decoder_small.onnx > /dev/null 2>&1
B=build/bench/bench_trace; L=$PWD/build/libfusebox_ep.so; LO=$PWD/build-traceoff/libfusebox_ep.so
for m in decoder_small genai_tiny; do
  echo "== bench_trace $m (warm-up 300 ms, 7 counted rounds of 64 steps)"
  timeout 140 $B --lib $L --lib-off $LO --device cuda --model $PWD/models/gen/$m.onnx --reps 5 --steps 64 --rounds 8 --warmup-ms 300 2>&1 | tail -9
done
echo "== bench_trace decoder_small, FUSEBOX_CUPTI_LIB=/nonexistent (trace on without CUPTI)"
FUSEBOX_CUPTI_LIB=/nonexistent timeout 100 $B --lib $L --lib-off $LO --device cuda --model $PWD/models/gen/decoder_small.onnx --reps 4 --steps 64 --rounds 8 --warmup-ms 300 2>&1 | tail -6
A=.deps/ocr/package/assets
for t in off on; do
  echo "== det 640 tf32=$t"; timeout 60 build/fusebox bench $A/ch_PP-OCRv4_det_infer.onnx --ep-devices gpu --ep-option device=cuda --ep-option tf32=$t --shape x=1x3x640x640 --iters 30 --block 10 2>&1 | grep -E 'Fusebox|ORT|ratio|rror' | head -3
done
echo "== norm: test_cuda_genai"
LD_LIBRARY_PATH=$PWD/build-norm:$LD_LIBRARY_PATH timeout 90 build-norm/tests/test_cuda_genai 2>&1 | tail -2
wait $GEN
G="build/fusebox generate $M/q.onnx --ep-devices gpu --kv-buffer shared --prompt-len 128 --new-tokens 64 --no-ort"
echo "== norm traced"
FUSEBOX_EP_LIB=$PWD/build-norm/libfusebox_ep.so FUSEBOX_TRACE=/tmp/qn.json $G > /tmp/qn.out 2> /tmp/qn.err
grep -E "Fusebox  " /tmp/qn.out; grep -o '"kernel_variant":"[^"]*norm[^"]*"' /tmp/qn.json | sort | uniq -c | head; grep -E -A8 'slowest ops' /tmp/qn.err | head -9
echo "== qwen decode A/B: main / norm / main / norm ..."
for i in 1 2 3; do for v in build build-norm; do echo -n "$v: "; FUSEBOX_EP_LIB=$PWD/$v/libfusebox_ep.so timeout 60 $G 2>&1 | grep -E "Fusebox  |tokens \(" | tr "\n" " "; echo; done; done
