#!/usr/bin/env bash
# scripts/gpu_trace_check.sh BUILD_DIR — GPU observability on the device machine (issue 10).
#
#   1. test_trace_gpu, test_trace_gpu_exec (its CUDA case must run, not skip);
#   2. a traced CUDA decode of the generated decoder (FUSEBOX_TRACE + FUSEBOX_GPU_CAPTURE of
#      eval index 5, i.e. the 5th decode step after the prefill), checked by
#      scripts/gpu_trace_check.py: GPU counters, a GPU track with kernels, every kernel
#      attributed, per eval the sum of op device times within 10% of the device-side eval
#      span, slowest ops in device time, the capture file = exactly eval 5's kernels;
#   3. overhead on GPU decode: `fusebox generate --no-ort` with tracing unset vs FUSEBOX_TRACE
#      on, paired runs alternating order (PAIRS pairs, default 5); median decode tok/s of each.
# Environment: FUSEBOX_ORT_LIB (default .deps/lib/libonnxruntime.1.30.so), FBX_GPU_LOG (log
# folder, default a fresh /tmp/fusebox_gputrace.XXXXXX), MODEL (default
# models/gen/decoder_small.onnx), PAIRS. Exit 1 on any failed check.
set -u
BUILD=${1:?usage: scripts/gpu_trace_check.sh BUILD_DIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$BUILD" && pwd) || { echo "no build dir $1"; exit 1; }
cd "$ROOT"
ORT=${FUSEBOX_ORT_LIB:-$ROOT/.deps/lib/libonnxruntime.1.30.so}
LOG=${FBX_GPU_LOG:-$(mktemp -d /tmp/fusebox_gputrace.XXXXXX)}
MODEL=${MODEL:-models/gen/decoder_small.onnx}
PAIRS=${PAIRS:-5}
mkdir -p "$LOG"
export FUSEBOX_EP_LIB=$BUILD/libfusebox_ep.so
unset FUSEBOX_TRACE FUSEBOX_VERBOSE FUSEBOX_CLAIM_DEBUG FUSEBOX_GPU_CAPTURE FUSEBOX_GPU_CAPTURE_EVAL
FAIL=0
[ -f "$MODEL" ] || scripts/make_models.sh >/dev/null

echo "== device =="
nvidia-smi -L 2>&1 || echo "nvidia-smi not found"
echo "== unit tests =="
"$BUILD/tests/test_trace_gpu" || FAIL=1
"$BUILD/tests/test_trace_gpu_exec" | tee "$LOG/test_trace_gpu_exec.log" || FAIL=1
if grep -q "no GPU" "$LOG/test_trace_gpu_exec.log"; then echo "FAIL  the CUDA case skipped on the device machine"; FAIL=1; fi

GEN=("$BUILD/fusebox" generate "$MODEL" --ort "$ORT" --no-ort --prompt-len 16 --new-tokens 64 --rounds 1
     --ep-option device=cuda)
echo "== traced CUDA decode: $MODEL =="
FUSEBOX_TRACE="$LOG/decode.json" FUSEBOX_GPU_CAPTURE="$LOG/capture_eval5.json" FUSEBOX_GPU_CAPTURE_EVAL=5 \
  "${GEN[@]}" >"$LOG/decode.out" 2>"$LOG/decode.err" || { echo "FAIL  traced decode (exit $?)"; tail -20 "$LOG/decode.err"; FAIL=1; }
grep -h "decode" "$LOG/decode.out" | head -3 | sed 's/^/      /'
/usr/bin/python3 scripts/gpu_trace_check.py "$LOG/decode.json" "$LOG/capture_eval5.json" "$LOG/decode.err" 5 || FAIL=1

echo "== overhead on GPU decode: tracing unset vs FUSEBOX_TRACE on ($PAIRS pairs, order alternating) =="
tps() { sed -n 's/.*Fusebox.*decode *\([0-9.]*\) tok\/s.*/\1/p' "$1" | head -1; }
OFF=(); ON=()
for i in $(seq 1 "$PAIRS"); do
  for which in off on; do
    [ $((i % 2)) = 0 ] && which=$([ "$which" = off ] && echo on || echo off)
    if [ "$which" = on ]; then
      FUSEBOX_TRACE="$LOG/ovh_$i.json" "${GEN[@]}" >"$LOG/ovh_on_$i.out" 2>/dev/null; ON+=("$(tps "$LOG/ovh_on_$i.out")")
    else
      "${GEN[@]}" >"$LOG/ovh_off_$i.out" 2>/dev/null; OFF+=("$(tps "$LOG/ovh_off_$i.out")")
    fi
  done
  rm -f "$LOG/ovh_$i.json"
done
/usr/bin/python3 - "${OFF[*]}" "${ON[*]}" <<'PY'
import statistics, sys
off = [float(x) for x in sys.argv[1].split() if x]
on = [float(x) for x in sys.argv[2].split() if x]
if off and on:
    mo, mn = statistics.median(off), statistics.median(on)
    print("      decode tok/s median: unset %.1f, FUSEBOX_TRACE on %.1f: on costs %+.1f%% (goal <= 5%%)" %
          (mo, mn, 100.0 * (mo / mn - 1.0)))
    print("      unset runs: %s" % " ".join("%.1f" % x for x in off))
    print("      on runs:    %s" % " ".join("%.1f" % x for x in on))
else:
    print("      no decode figures parsed")
PY
echo "logs and traces in $LOG"
[ $FAIL = 0 ] && echo "gpu_trace_check: all checks passed" || echo "gpu_trace_check: FAILED"
exit $FAIL
