#!/usr/bin/env bash
# scripts/demo.sh BUILD_DIR — the demo: a generated decoder through ONNX Runtime with Fusebox,
# greedy decode with a KV cache, checked against ORT's CPU EP, trace on (the session summary
# is printed to stderr at teardown).
set -eu
BUILD=${1:?usage: scripts/demo.sh BUILD_DIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$BUILD" && pwd)
cd "$ROOT"
MODEL=models/gen/decoder_small.onnx
[ -f "$MODEL" ] || { echo "demo: $MODEL missing: run scripts/make_models.sh (make models)"; exit 1; }
mkdir -p out
TRACE=$ROOT/out/demo_trace.json
rm -f "$TRACE"
export FUSEBOX_EP_LIB=${FUSEBOX_EP_LIB:-$BUILD/libfusebox_ep.so}
echo "== fusebox generate $MODEL --prompt-len 16 --new-tokens 32 (FUSEBOX_TRACE=out/demo_trace.json)"
rc=0
FUSEBOX_TRACE=$TRACE "$BUILD/fusebox" generate "$MODEL" --prompt-len 16 --new-tokens 32 || rc=$?
echo
if [ -f "$TRACE" ]; then
  echo "trace written: $TRACE"
  echo "  open it at https://ui.perfetto.dev (Open trace file) or chrome://tracing"
  echo "  or summarize it here: $BUILD/fusebox trace summarize $TRACE"
else
  echo "no trace was written to $TRACE"
fi
exit $rc
