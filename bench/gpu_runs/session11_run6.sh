#!/usr/bin/env bash
# session 11, call 6 (final): the final tree on the H200 host's Xeon — issue 12's CPU rows
# (scripts/cpu_bench_set.sh, 16 threads and 2 pinned), where a 16-thread fp32 decode step's time
# goes (traced: the eval against the whole step), the CPU suite (the CUDA libraries are call 4's
# code: tracing's GPU cost was measured there).
set -u
cd "$(dirname "$0")/../.."
tar -xJf .gpu_s11/b.tar.xz
tar -xzf .gpu_s11/extra.tgz
export LD_LIBRARY_PATH=$PWD/lib:$PWD/.deps/lib:/usr/local/cuda/lib64:/usr/local/cuda/extras/CUPTI/lib64
ln -sfn $PWD/testdata /usr/share/libonnx-testdata 2>/dev/null
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader; lscpu | grep -E 'Model name|^CPU\(s\)|^Flags' | cut -c1-120
lscpu | grep -o -E 'avx512[a-z_0-9]*|amx[a-z_0-9]*|avx2' | sort -u | tr '\n' ' '; echo
echo "== cpu_bench_set (16, 2 pinned)"; date -u +%H:%M:%S
timeout 240 scripts/cpu_bench_set.sh build 16 2 2>&1 | grep -vE '^\[gen\]'
date -u +%H:%M:%S
echo "== traced fp32 decode, 16 threads"
FUSEBOX_TRACE=/tmp/dc16.json timeout 60 build/fusebox generate /tmp/fbx_bench_models/dec32k.onnx --prompt-len 128 --new-tokens 32 --rounds 1 --threads 16 --no-ort 2>&1 | grep -E "decode"
python3 - <<'PY'
import json, collections
d = json.load(open("/tmp/dc16.json"))["traceEvents"]
ev = [e for e in d if e.get("name") == "fusebox.eval"][-20:]
main = ev[0].get("tid"); c = collections.defaultdict(float); by = collections.defaultdict(float); n = collections.Counter()
for e in ev:
    t0, t1 = e["ts"], e["ts"] + e["dur"]
    for x in d:
        if x.get("cat") == "op" and x.get("tid") == main and t0 <= x["ts"] <= t1:
            k = (x["name"], x["args"].get("kernel_variant", "")[:24], x["args"].get("input_shapes", "")[:30])
            c[k] += x["dur"]; by[k] += x["args"].get("bytes", 0); n[k] += 1
E = len(ev); print("eval ms %.3f over %d evals; ops ms %.3f" % (sum(e["dur"] for e in ev) / E / 1e3, E, sum(c.values()) / E / 1e3))
for k, v in sorted(c.items(), key=lambda kv: -kv[1])[:8]: print("  %7.3f ms %3d %6.1f GB/s %s" % (v / E / 1e3, n[k] // E, by[k] / v / 1e3, k))
PY
echo "== CPU suite (release build) on this Xeon"; date -u +%H:%M:%S
timeout 220 scripts/run_tests.sh build > /tmp/suite.log 2>&1; echo "exit $?"
grep -E 'passed|FAIL' /tmp/suite.log | tail -4; tail -2 /tmp/suite.log; date -u +%H:%M:%S
