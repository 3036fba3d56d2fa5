#!/usr/bin/env bash
# session 10, call 2: the decode kernel's fix (H 128 partial loads), sampled device records
# (FUSEBOX_GPU_SAMPLE) and where tracing's cost goes, a traced Qwen step (busy vs idle).
set -u
cd "$(dirname "$0")/../.."
tar -xJf .gpu_s10/b.tar.xz
mkdir -p build-traceoff build_base && tar -xzf .gpu_s10/extra.tgz
export LD_LIBRARY_PATH=$PWD/lib:$PWD/.deps/lib:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64
ln -sfn $PWD/testdata /usr/share/libonnx-testdata 2>/dev/null
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader; lscpu | grep 'Model name'
M=/tmp/qwen; mkdir -p $M
( python3 models/gen_genai.py --layers 24 --hidden 896 --heads 14 --kv-heads 2 --ffn 4864 --vocab 151936 --max-pos 1024 --out $M/q.onnx > $M/gen.log 2>&1 ) &
GEN=$!
python3 models/gen_decoder.py --layers 4 --hidden 256 --heads 8 --ffn 512 --vocab 2048 --out models/gen/decoder_small.onnx > /dev/null 2>&1
echo "== test_cuda_genai"; timeout 250 build/tests/test_cuda_genai 2>&1 | grep -E 'FAIL|passed' | head -20
echo "== memcheck test_cuda_genai"; timeout 200 compute-sanitizer --tool memcheck build/tests/test_cuda_genai 2>&1 | tail -2
echo "== racecheck test_cuda_genai"; timeout 200 compute-sanitizer --tool racecheck build/tests/test_cuda_genai 2>&1 | tail -2
for t in test_trace_gpu test_trace_gpu_exec test_cuda_graph test_e2e_genai; do echo "== $t"; timeout 200 build/tests/$t 2>&1 | tail -2; done
echo "== bench GQA"; build/bench/bench_cuda_genai 400 GQA 2>&1 | grep GQA
echo "== cupti mode 6 (graph trace, kernels on every 16th) / 0 / 4"
for m in 6 0 4; do timeout 60 .gpu_s10/cupti_modes $m 150 2000 16 sync 2>&1 | tail -1; done
export FUSEBOX_REPO=$PWD FUSEBOX_ORT_LIB=$PWD/.deps/lib/libonnxruntime.1.30.so
BT() { env "$@" build/bench/bench_trace --lib $PWD/build/libfusebox_ep.so --lib-off $PWD/build-traceoff/libfusebox_ep.so --device cuda --reps 3 --steps 64 --rounds 3 2>&1 | grep -E 'median|overhead|fastest' | sed 's/^/   /'; }
for mdl in decoder_small genai_tiny; do
  for cfg in "X=1" "FUSEBOX_GPU_SAMPLE=1" "FUSEBOX_GPU_SAMPLE=64" "FUSEBOX_CUPTI_LIB=/nonexistent"; do
    echo "== overhead $mdl $cfg"; BT $cfg --model $PWD/models/gen/$mdl.onnx
  done
done
echo "== gpu_trace_check (checks; sampled by default)"
REPS=3 REPS_GENAI=0 GENAI_MODEL= REPS_GRAPHS=0 REPS_EXTCORR=0 EXTCORR_TRACE=0 FBX_GPU_LOG=$OUT/trace timeout 200 scripts/gpu_trace_check.sh build 2>&1 | grep -v '^ok' | tail -30
rm -f $OUT/trace/*.json
wait $GEN; tail -1 $M/gen.log
for r in 1 2; do for B in build build_base; do
  echo "== qwen decode $B round $r"
  $B/fusebox generate $M/q.onnx --ep-devices gpu --kv-buffer shared --prompt-len 128 --new-tokens 64 --no-ort 2>&1 | grep -E "Fusebox  |error" | head -3
done; done
echo "== qwen traced (sampled)"
FUSEBOX_TRACE=/tmp/q.json build/fusebox generate $M/q.onnx --ep-devices gpu --kv-buffer shared --prompt-len 128 --new-tokens 64 --no-ort > /tmp/qt.out 2> /tmp/qt.err
grep -E "Fusebox  " /tmp/qt.out; grep -E -A14 'slowest ops' /tmp/qt.err | head -24
