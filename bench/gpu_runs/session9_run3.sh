#!/usr/bin/env bash
# session 9, call 3: trace check + overhead (issue 10), Qwen and 12-layer decoders vs torch
set -u
cd "$(dirname "$0")/.."
tar -xJf .gpu_s9/b.tar.xz && tar -xzf .gpu_s9/off.tgz
export LD_LIBRARY_PATH=$PWD/lib:$PWD/.deps/lib:/usr/local/cuda/lib64
ln -sfn $PWD/testdata /usr/share/libonnx-testdata 2>/dev/null
D=/tmp/fusebox_genai_bench; mkdir -p $D
G="python3 models/gen_genai.py"
( $G --layers 24 --hidden 896 --heads 14 --kv-heads 2 --ffn 4864 --vocab 151936 --max-pos 1024 --out $D/q.tmp >/dev/null 2>&1 && mv $D/q.tmp $D/genai_qwen05b.onnx
  $G --layers 12 --hidden 768 --heads 12 --kv-heads 12 --ffn 2048 --vocab 32000 --max-pos 1024 --float --out $D/f.tmp >/dev/null 2>&1 && mv $D/f.tmp $D/genai_l12_f32.onnx
  $G --layers 12 --hidden 768 --heads 12 --kv-heads 12 --ffn 2048 --vocab 32000 --max-pos 1024 --out $D/i.tmp >/dev/null 2>&1 && mv $D/i.tmp $D/genai_l12_q4.onnx ) &
[ -f models/gen/decoder_small.onnx ] || python3 models/gen_decoder.py --layers 4 --hidden 256 --heads 8 --ffn 512 --vocab 2048 --out models/gen/decoder_small.onnx
echo "== trace check"
REPS=3 REPS_GENAI=3 REPS_GRAPHS=0 REPS_EXTCORR=0 EXTCORR_TRACE=0 timeout 220 scripts/gpu_trace_check.sh build 2>&1 | grep -vE "^\s*$" | tail -40
wait
echo "== torch qwen"
BENCH_GROUPS=qwen PAST=128,512 timeout 160 bench/gpu_genai_torch.sh build --torch-modes compile --dtypes bf16 2>&1 | grep -E "^\|" | head -12
echo "== torch l12"
BENCH_GROUPS=l12 PAST=128,512 timeout 200 bench/gpu_genai_torch.sh build --torch-modes compile 2>&1 | grep -E "^\||PASS|FAIL" | head -20
