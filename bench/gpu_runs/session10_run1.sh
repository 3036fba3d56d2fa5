#!/usr/bin/env bash
# session 10, call 1: warp-per-head decode attention (correctness, kernel, end to end vs the
# session-start library), CUPTI mode costs on a replayed PDL graph, tracing overhead with a
# compiled-out library built from the same commit.
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
# the session-start library beside this one: same programs, old libfusebox_cuda.so
cp -r build/bench build_base/; cp build/fusebox build/libfusebox_ep.so build_base/; cp .gpu_s10/base_cuda.so build_base/libfusebox_cuda.so
echo "== test_cuda_genai"; timeout 250 build/tests/test_cuda_genai 2>&1 | grep -E 'FAIL|passed' | head -20
echo "== memcheck test_cuda_genai"; timeout 200 compute-sanitizer --tool memcheck build/tests/test_cuda_genai 2>&1 | tail -2
echo "== racecheck test_cuda_genai"; timeout 200 compute-sanitizer --tool racecheck build/tests/test_cuda_genai 2>&1 | tail -2
echo "== bench GQA new / base"
for r in 1 2; do build/bench/bench_cuda_genai 400 GQA 2>&1 | grep GQA; build_base/bench/bench_cuda_genai 400 GQA 2>&1 | grep GQA; done
echo "== ncu"
timeout 120 ncu --set full -k regex:'decode_kernel|attend_kernel' -c 2 build/bench/bench_cuda_genai 3 GQA > $OUT/ncu_new.txt 2>&1
timeout 120 ncu --set full -k regex:'attend_kernel' -c 2 build_base/bench/bench_cuda_genai 3 GQA > $OUT/ncu_base.txt 2>&1
grep -E 'Duration|Elapsed Cycles|Registers|Stall|Achieved Occupancy' $OUT/ncu_new.txt | head -12
echo "== cupti modes (0 none, 1 kernel, 2 graph, 3 graph+kernel every 16th, 4 kernel every 16th, 5 both)"
for m in 0 1 2 3 4 5; do timeout 60 .gpu_s10/cupti_modes $m 150 2000 16 sync 2>&1 | tail -1; done
for m in 0 1 4; do timeout 60 .gpu_s10/cupti_modes $m 150 2000 4 sync 2>&1 | tail -1; done
wait $GEN; tail -1 $M/gen.log
for r in 1 2; do for B in build build_base; do
  echo "== qwen decode $B round $r"
  $B/fusebox generate $M/q.onnx --ep-devices gpu --kv-buffer shared --prompt-len 128 --new-tokens 64 --no-ort 2>&1 | grep -E "Fusebox|decode|error" | head -3
done; done
echo "== trace overhead (compiled out = same commit)"
REPS=3 REPS_GENAI=3 REPS_GRAPHS=2 REPS_EXTCORR=0 EXTCORR_TRACE=0 FBX_GPU_LOG=$OUT/trace timeout 280 scripts/gpu_trace_check.sh build 2>&1 | tail -40
rm -f $OUT/trace/*.json
