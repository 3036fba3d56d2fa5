#!/usr/bin/env bash
# session 11, call 7 (call 6 was cut off when the machine was taken back; 373 s of device time were
# left): the CPU suite of the final tree on the H200 host's Xeon, its ISA, and the quantized BERT
# encoder (the integer GEMM's new epilogue) at 16 threads and 2 pinned.
set -u
cd "$(dirname "$0")/../.."
tar -xJf .gpu_s11/b.tar.xz
export LD_LIBRARY_PATH=$PWD/lib:$PWD/.deps/lib:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64
ln -sfn $PWD/testdata /usr/share/libonnx-testdata 2>/dev/null
lscpu | grep -E 'Model name|^CPU\(s\)'; lscpu | grep -o -E 'avx512[a-z_0-9]*|amx[a-z_0-9]*|avx2' | sort -u | tr '\n' ' '; echo
echo "== CPU suite (release build) on this Xeon"; date -u +%H:%M:%S
timeout 185 scripts/run_tests.sh build > /tmp/suite.log 2>&1; echo "exit $?"
grep -E 'passed|FAIL' /tmp/suite.log | tail -4; tail -2 /tmp/suite.log; date -u +%H:%M:%S
M=/tmp/fbx_bench_models; mkdir -p $M
timeout 20 python3 models/gen_bert_q.py --layers 4 --hidden 384 --heads 6 --ffn 1536 --seq 128 --out $M/bert_q_base.onnx > /dev/null 2>&1
for t in 16 2; do pin=""; [ $t = 2 ] && pin="taskset -c 0,1"
  echo "== quantized BERT seq 128, $t threads"; timeout 15 $pin build/fusebox bench $M/bert_q_base.onnx --threads $t --iters 40 --block 20 2>&1 | tail -3
done
