#!/usr/bin/env bash
# scripts/bench.sh BUILD_DIR [bench_models options] — Fusebox vs ORT's CPU EP on the benchmark
# models (decode tok/s of models/gen/decoder_100m.onnx; latency of the CNNs and PP-OCR
# det/rec/cls), same threads, interleaved in one process, with both ORT libraries.
# Results go to stdout; record them in bench/RESULTS.md.
set -eu
BUILD=${1:?usage: scripts/bench.sh BUILD_DIR [--threads N] [--iters N] ...}
shift
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$BUILD" && pwd)
cd "$ROOT"
export FUSEBOX_EP_LIB=${FUSEBOX_EP_LIB:-$BUILD/libfusebox_ep.so}
export FUSEBOX_REPO=$ROOT
unset FUSEBOX_TRACE FUSEBOX_VERBOSE
BIN=$BUILD/bench/bench_models
[ -x "$BIN" ] || { echo "bench: $BIN not built"; exit 1; }
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -m), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
rc=0
for v in 1.30 1.29; do
  echo
  echo "## ORT $v"
  FUSEBOX_ORT_LIB=$ROOT/.deps/lib/libonnxruntime.$v.so "$BIN" "$@" || rc=1
done
exit $rc
