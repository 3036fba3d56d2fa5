#!/usr/bin/env bash
set -u
cd "$(dirname "$0")/.."
tar -xJf .gpu_s9/b.tar.xz && tar -xzf .gpu_s9/ov5.tgz
export LD_LIBRARY_PATH=$PWD/lib:$PWD/.deps/lib:/usr/local/cuda/lib64
D=/tmp/q; mkdir -p $D
( python3 models/gen_genai.py --layers 24 --hidden 896 --heads 14 --kv-heads 2 --ffn 4864 --vocab 151936 --max-pos 1024 --out $D/q.onnx >/dev/null 2>&1 ) &
echo "== test"; timeout 120 build/tests/test_cuda_genai 2>&1 | grep -E "FAIL|passed" | head
for w in 16384 1000000000 16384 1000000000; do echo "== WIDE=$w"; FUSEBOX_CUDA_MNB_WIDE=$w build/bench/bench_cuda_genai 400 MATMUL_NBITS 2>&1 | grep -E "151936|4864\)|896\) " ; done
wait
for r in 1 2; do for w in 16384 1000000000; do echo "== qwen WIDE=$w"; FUSEBOX_CUDA_MNB_WIDE=$w build/fusebox generate $D/q.onnx --ep-devices gpu --kv-buffer shared --prompt-len 128 --new-tokens 64 --no-ort 2>&1 | grep -E "Fusebox  "; done; done
