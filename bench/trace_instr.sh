#!/usr/bin/env bash
# bench/trace_instr.sh BUILD_DIR BUILD_DIR_TRACEOFF [MODEL] — the host cost of tracing counted in
# instructions, not timed: wall time between two processes scatters by +-25% on a shared host
# (bench/RESULTS.md), far more than the 0.5% the "tracing off" goal asks to show.
#
# For each backend (cpu; opaque = the device code paths of the engine, as on a GPU) and each
# configuration (off = BUILD_DIR_TRACEOFF's -DFBX_TRACE_COMPILED_OUT=ON library, unset, on =
# FUSEBOX_TRACE), valgrind's callgrind counts the instructions executed inside
# fbx_host_decoder_step (one thread: ORT's and Fusebox's threads = 1) for a prefill and S decode
# steps, at S = 16 and S = 48; the difference / 32 is the instructions per decode step. Needs
# valgrind (apt-get install valgrind). About 25 s per run, 12 runs.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "${1:?usage: bench/trace_instr.sh BUILD_DIR BUILD_DIR_TRACEOFF [MODEL]}" && pwd)
BO=$(cd "${2:?usage: bench/trace_instr.sh BUILD_DIR BUILD_DIR_TRACEOFF [MODEL]}" && pwd)
MODEL=${3:-$ROOT/models/gen/decoder_small.onnx}
command -v valgrind >/dev/null || { echo "trace_instr: valgrind not found (apt-get install valgrind)"; exit 1; }
OUT=$(mktemp -d /tmp/fusebox_trace_instr.XXXXXX)
export FUSEBOX_ORT_LIB=${FUSEBOX_ORT_LIB:-$ROOT/.deps/lib/libonnxruntime.1.30.so} BENCH_TRACE_THREADS=1
count() { # BACKEND CONFIG STEPS: instructions inside fbx_host_decoder_step
  local lib=$B/libfusebox_ep.so trace=
  [ "$2" = off ] && lib=$BO/libfusebox_ep.so
  [ "$2" = on ] && trace=$OUT/trace_$1.json
  (unset FUSEBOX_TRACE FUSEBOX_VERBOSE; [ -n "$trace" ] && export FUSEBOX_TRACE=$trace
   FUSEBOX_TEST_BACKEND=$1 FUSEBOX_EP_LIB=$lib valgrind --tool=callgrind --toggle-collect=fbx_host_decoder_step \
     --callgrind-out-file="$OUT/$1.$2.$3.cg" "$B/bench/bench_trace" --worker "$MODEL" 16 "$3" 1 >"$OUT/$1.$2.$3.log" 2>&1)
  grep -o 'Collected : [0-9]*' "$OUT/$1.$2.$3.log" | grep -o '[0-9]*$'
}
echo "trace_instr: $MODEL, $(lscpu | sed -n 's/^Model name: *//p'), instructions per decode step (callgrind)"
for be in cpu opaque; do
  declare -A per
  for cfg in off unset on; do
    a=$(count $be $cfg 16); b=$(count $be $cfg 48)
    per[$cfg]=$(( (b - a) / 32 ))
  done
  awk -v be=$be -v off=${per[off]} -v un=${per[unset]} -v on=${per[on]} 'BEGIN {
    printf "  %-6s off %d  unset %d  on %d   unset vs off %+.2f%% (goal <= 0.5%%)   on vs unset %+.2f%%\n",
           be, off, un, on, 100 * (un / off - 1), 100 * (on / un - 1) }'
done
rm -rf "$OUT"
