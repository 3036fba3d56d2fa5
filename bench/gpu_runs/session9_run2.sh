#!/usr/bin/env bash
# session 9, call 2: glu GEMV correctness + decode + torch
set -u
cd "$(dirname "$0")/.."
tar -xJf .gpu_s9/b.tar.xz
export LD_LIBRARY_PATH=$PWD/lib:$PWD/.deps/lib:/usr/local/cuda/lib64
ln -sfn $PWD/testdata /usr/share/libonnx-testdata 2>/dev/null
M=/tmp/fusebox_genai_bench; mkdir -p $M
( python3 models/gen_genai.py --layers 24 --hidden 896 --heads 14 --kv-heads 2 --ffn 4864 --vocab 151936 --max-pos 1024 --out $M/genai_qwen05b.onnx.tmp > /tmp/gen.log 2>&1 && mv $M/genai_qwen05b.onnx.tmp $M/genai_qwen05b.onnx ) &
GEN=$!
echo "== test_cuda_genai"; timeout 120 build/tests/test_cuda_genai 2>&1 | grep -E "FAIL|fail|passed" | head -8
echo "== memcheck"; timeout 150 compute-sanitizer --tool memcheck build/tests/test_cuda_genai 2>&1 | tail -2
echo "== racecheck"; timeout 150 compute-sanitizer --tool racecheck build/tests/test_cuda_genai 2>&1 | tail -1
echo "== e2e devkv"; FBX_TEST_REAL_GPU=1 timeout 120 build/tests/test_e2e_genai_devkv 2>&1 | tail -1
echo "== e2e genai"; FBX_TEST_REAL_GPU=1 timeout 120 build/tests/test_e2e_genai 2>&1 | tail -1
wait $GEN
Q=$M/genai_qwen05b.onnx
for r in 1 2; do
  echo "== qwen decode round $r"
  build/fusebox generate $Q --ep-devices gpu --kv-buffer shared --prompt-len 128 --new-tokens 64 $([ $r = 2 ] && echo --no-ort) 2>&1 | grep -E "Fusebox  |ORT CPU  |ratio|IDENT|differ|rror" | head -5
done
echo "== traced qwen 16 tokens"
FUSEBOX_TRACE=/tmp/q.json build/fusebox generate $Q --ep-devices gpu --kv-buffer shared --prompt-len 128 --new-tokens 16 --no-ort 2>&1 | grep -E "gpu:|busy|slowest|MatMulNBits|device time" | head -20
python3 - <<'PY'
import json,collections
ev=json.load(open('/tmp/q.json'))
ev=ev['traceEvents'] if isinstance(ev,dict) else ev
k=collections.defaultdict(lambda:[0,0.0,0.0])
for e in ev:
  if e.get('cat')=='gpu.kernel':
    n=e['name'][:60]; k[n][0]+=1; k[n][1]+=e.get('dur',0); k[n][2]+=e.get('args',{}).get('early_start_us',0)
for n,v in sorted(k.items(),key=lambda x:-x[1][1])[:12]: print("%-60s %6d %9.1f us  early %8.1f"%(n,v[0],v[1],v[2]))
dv=[e for e in ev if e.get('name')=='fusebox.eval' and e.get('cat')=='device']
print("device evals",len(dv), "last 3 (span, dev, op, idle):",[(round(e['args']['span_us'],1),round(e['args']['dev_us'],1),round(e['args']['op_us'],1),round(e['args']['idle_us'],1)) for e in dv[-3:]])
PY
echo "== torch"
BENCH_GROUPS=qwen PAST=128,512 timeout 280 bench/gpu_genai_torch.sh build --torch-modes compile --dtypes bf16 2>&1 | grep -vE "^\[fusebox\]|Warning|warn" | tail -25
