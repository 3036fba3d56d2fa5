#!/usr/bin/env bash
# session 11, call 5: the 12-layer GenAI-style decoder (issue 9's shape) against torch.compile with
# this tree's CUDA libraries (build-new3/: the session-10 decode attention kernel was not measured on
# this shape), then where a traced fp32 decode step's device time goes at past 512.
set -u
cd "$(dirname "$0")/../.."
tar -xJf .gpu_s11/b.tar.xz
tar -xzf .gpu_s11/extra4.tgz
cp build-new3/libfusebox_ep.so build-new3/libfusebox_cuda.so build/
export LD_LIBRARY_PATH=$PWD/lib:$PWD/.deps/lib:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader; lscpu | grep -E 'Model name|^CPU\(s\)'
export MODEL_DIR=/tmp/m
BENCH_GROUPS=l12 PAST=128,512 timeout 420 bench/gpu_genai_torch.sh build --torch-modes compile --dtypes fp32,bf16 --no-ort-cpu 2>&1 | grep -vE "^\[fusebox\]   |^ +[0-9]+\. " | tail -45
echo "== traced fp32 decode, past 512"
FUSEBOX_VERBOSE=0 FUSEBOX_TRACE=/tmp/l12.json FUSEBOX_GPU_DETAIL=40 timeout 100 python3 bench/gpu_genai_torch.py --ep-lib $PWD/build/libfusebox_ep.so \
  --model /tmp/m/genai_l12_f32.onnx --past 512 --steps 24 --dtypes none --no-ort-cpu --fusebox-logits device 2>&1 | tail -4
build/fusebox trace summarize /tmp/l12.json --top 16 2>&1 | grep -A18 "device time" | head -20
python3 bench/gpu_runs/trace_evals.py /tmp/l12.json 38 2>&1 | tail -5 | cut -c1-200
python3 - <<'PY'
import json, collections
d = json.load(open("/tmp/l12.json"))["traceEvents"]
by = collections.defaultdict(list)
for e in d:
    if e.get("cat") == "gpu.kernel": by[e.get("args", {}).get("eval")].append(e)
last = sorted(k for k in by if k is not None)[-10:]
c = collections.defaultdict(float); n = collections.Counter()
for v in last:
    for x in by[v]: c[x["name"][:72]] += x.get("dur", 0); n[x["name"][:72]] += 1
print("kernels of the last %d recorded evals (us per eval, launches per eval):" % len(last))
for name, t in sorted(c.items(), key=lambda kv: -kv[1])[:18]: print("  %8.1f %4d  %s" % (t / len(last), n[name] // len(last), name))
PY
