#!/usr/bin/env bash
# scripts/bench_trace.sh BUILD_DIR [bench_trace options] — the overhead of tracing on the decode
# loop of models/gen/decoder_small.onnx (bench/bench_trace.c):
#   (a) tracing built in but unset vs a library built with -DFBX_TRACE_COMPILED_OUT=ON (goal <= 0.5%)
#   (b) FUSEBOX_TRACE=<file> vs unset                                                (goal <= 5%)
# Rebuilds BUILD_DIR's libfusebox_ep.so and bench_trace and the compiled-out library in
# BUILD_DIR-traceoff (or $FBX_TRACE_OFF_BUILD; FBX_NO_BUILD=1 skips building), then runs the
# three configurations in paired, alternating processes (--reps N, default 15) and prints medians.
# Options after BUILD_DIR go to bench_trace (--reps N --steps N --prompt N --rounds N --model M).
# Record the result lines in bench/RESULTS.md.
set -eu
BUILD=${1:?usage: scripts/bench_trace.sh BUILD_DIR [--reps N] [--steps N] ...}
shift
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$BUILD" && pwd)
OFF=${FBX_TRACE_OFF_BUILD:-$BUILD-traceoff}
cd "$ROOT"
ORT_INC=$(sed -n 's/^FBX_ORT_INCLUDE:PATH=//p' "$BUILD/CMakeCache.txt")
[ -n "$ORT_INC" ] || ORT_INC=$ROOT/.deps/ort129/include
# both libraries from the same sources, now (others may have changed src/ since BUILD_DIR was built)
if [ "${FBX_NO_BUILD:-0}" != 1 ]; then
  cmake --build "$BUILD" --target fusebox_ep bench_trace -j"$(nproc)" >/dev/null
  cmake -S . -B "$OFF" -DFBX_ORT_INCLUDE="$ORT_INC" -DCMAKE_BUILD_TYPE=Release -DFBX_TRACE_COMPILED_OUT=ON >/dev/null
  cmake --build "$OFF" --target fusebox_ep -j"$(nproc)" >/dev/null
fi
if nm -D --defined-only "$OFF/libfusebox_ep.so" | grep -q fbx_trace; then
  echo "bench_trace: $OFF/libfusebox_ep.so still exports tracing symbols"; exit 1
fi
export FUSEBOX_REPO=$ROOT
export FUSEBOX_ORT_LIB=${FUSEBOX_ORT_LIB:-$ROOT/.deps/lib/libonnxruntime.1.30.so}
unset FUSEBOX_TRACE FUSEBOX_VERBOSE FUSEBOX_CLAIM_DEBUG FUSEBOX_NVTX FUSEBOX_TRACE_MAX_EVENTS
BIN=$BUILD/bench/bench_trace
[ -x "$BIN" ] || { echo "bench_trace: $BIN not built"; exit 1; }
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -m), $(nproc) cores, ORT $(basename "$FUSEBOX_ORT_LIB")"
echo "# on: $BUILD/libfusebox_ep.so   off: $OFF/libfusebox_ep.so"
exec "$BIN" --lib "$BUILD/libfusebox_ep.so" --lib-off "$OFF/libfusebox_ep.so" "$@"
