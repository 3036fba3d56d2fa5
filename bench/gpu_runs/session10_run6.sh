#!/usr/bin/env bash
# session 10, call 6: the CPU suite on the GPU host's 16-core Xeon (the other CPU kind), and
# ResNet-18 / PP-OCR with the output-channel conv kernel (FUSEBOX_CONV_OC=0: the old path) at
# 2 pinned threads and 16, against ORT's CPU EP in the same process.
set -u
cd "$(dirname "$0")/../.."
[ -d build ] || tar -xJf .gpu_s10/b.tar.xz
export LD_LIBRARY_PATH=$PWD/lib:$PWD/.deps/lib:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64
ln -sfn $PWD/testdata /usr/share/libonnx-testdata 2>/dev/null
lscpu | grep -E 'Model name|^CPU\(s\)'
python3 models/gen_cnn.py --size 224 --widths 64,128,256,512 --blocks 2,2,2,2 --out models/gen/cnn_resnet18ish.onnx > /dev/null 2>&1
R=models/gen/cnn_resnet18ish.onnx
for r in 1 2; do for oc in 1 0; do
  echo "== resnet18 2 pinned, FUSEBOX_CONV_OC=$oc"; FUSEBOX_CONV_OC=$oc taskset -c 0,1 build/fusebox bench $R --threads 2 --iters 20 --block 10 2>&1 | grep -E 'Fusebox|ORT|ratio|x$' | head -4
  echo "== resnet18 16, FUSEBOX_CONV_OC=$oc"; FUSEBOX_CONV_OC=$oc build/fusebox bench $R --threads 16 --iters 40 --block 10 2>&1 | grep -E 'Fusebox|ORT|ratio|x$' | head -4
done; done
echo "== CPU suite (release build) on this Xeon"
( time timeout 420 scripts/run_tests.sh build > /tmp/suite.log 2>&1 ) 2>&1 | grep real
grep -E 'passed|FAIL' /tmp/suite.log | tail -8
