#!/usr/bin/env bash
# session 10, call 7 (final): the window of device records with its lead-out: checks and
# tracing cost, a traced Qwen step; ResNet-18 on the host's Xeon (output-channel conv kernel
# on / off), then the CPU suite there for as long as the call allows.
set -u
cd "$(dirname "$0")/../.."
tar -xJf .gpu_s10/b.tar.xz
mkdir -p build-traceoff && tar -xzf .gpu_s10/extra.tgz
export LD_LIBRARY_PATH=$PWD/lib:$PWD/.deps/lib:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64
ln -sfn $PWD/testdata /usr/share/libonnx-testdata 2>/dev/null
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader; lscpu | grep -E 'Model name|^CPU\(s\)'
M=/tmp/qwen; mkdir -p $M
( python3 models/gen_genai.py --layers 24 --hidden 896 --heads 14 --kv-heads 2 --ffn 4864 --vocab 151936 --max-pos 1024 --out $M/q.onnx > $M/gen.log 2>&1;
  python3 models/gen_cnn.py --size 224 --widths 64,128,256,512 --blocks 2,2,2,2 --out models/gen/cnn_resnet18ish.onnx > /dev/null 2>&1 ) &
GEN=$!
python3 models/gen_decoder.py --layers 4 --hidden 256 --heads 8 --ffn 512 --vocab 2048 --out models/gen/decoder_small.onnx > /dev/null 2>&1
for t in test_trace_gpu test_trace_gpu_exec; do echo "== $t"; timeout 100 build/tests/$t 2>&1 | tail -1; done
echo "== gpu_trace_check (window 16 + lead-out, capture eval 5)"
REPS=4 REPS_GENAI=4 REPS_GRAPHS=0 REPS_EXTCORR=0 EXTCORR_TRACE=0 FBX_GPU_LOG=/tmp/gt timeout 250 scripts/gpu_trace_check.sh build 2>&1 | grep -vE '^ok|^      [0-9]+\.' | tail -30
python3 bench/gpu_runs/trace_evals.py /tmp/gt/decode.json 18 | tail -3 | cut -c1-150
wait $GEN
echo "== qwen traced"
FUSEBOX_TRACE=/tmp/q.json build/fusebox generate $M/q.onnx --ep-devices gpu --kv-buffer shared --prompt-len 128 --new-tokens 64 --no-ort > /tmp/qt.out 2> /tmp/qt.err
grep -E "Fusebox  " /tmp/qt.out; grep -E -A6 'slowest ops' /tmp/qt.err | head -7; grep -E 'gpu:|busy attr|device records' /tmp/qt.err
python3 bench/gpu_runs/trace_evals.py /tmp/q.json 17 | tail -4 | cut -c1-110
echo "== qwen untraced"; build/fusebox generate $M/q.onnx --ep-devices gpu --kv-buffer shared --prompt-len 128 --new-tokens 64 --no-ort 2>&1 | grep -E "Fusebox  "
R=models/gen/cnn_resnet18ish.onnx
for oc in 1 0; do
  echo "== resnet18 2 pinned, FUSEBOX_CONV_OC=$oc"; FUSEBOX_CONV_OC=$oc taskset -c 0,1 build/fusebox bench $R --threads 2 --iters 20 --block 10 2>&1 | grep -E 'Fusebox|ORT|ratio' | head -3
  echo "== resnet18 16, FUSEBOX_CONV_OC=$oc"; FUSEBOX_CONV_OC=$oc build/fusebox bench $R --threads 16 --iters 40 --block 10 2>&1 | grep -E 'Fusebox|ORT|ratio' | head -3
done
echo "== CPU suite (release build) on this Xeon, 200 s at most"
timeout 200 scripts/run_tests.sh build > /tmp/suite.log 2>&1; echo "exit $?"
grep -cE '^(PASS|ok)' /tmp/suite.log; grep -E 'passed|FAIL' /tmp/suite.log | tail -6; tail -2 /tmp/suite.log
