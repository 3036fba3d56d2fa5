#!/usr/bin/env bash
# scripts/gpu_bundle.sh BUILD_DIR OUT_TAR — pack what a machine with a GPU but no internet needs to
# run scripts/gpu_check.sh, scripts/run_tests.sh and the benchmarks from a build made here.
#
# The tar (xz) holds BUILD_DIR (programs and libraries, no object files) as build/, the ORT
# libraries and libjansson as lib/, the PP-OCR models (.deps/ocr), the generated models
# (models/gen) and the ONNX node test data as testdata/. On the GPU machine, from a checkout of
# the same commit (FBX_BUNDLE_MODEL_MAX, default 60M: generated models at least that large stay out):
#   tar -xJf OUT_TAR && export LD_LIBRARY_PATH=$PWD/lib && scripts/gpu_check.sh build
# (the node tests: ln -s $PWD/testdata /usr/share/libonnx-testdata).
set -euo pipefail
BUILD=${1:?usage: scripts/gpu_bundle.sh BUILD_DIR OUT_TAR}
OUTTAR=${2:?usage: scripts/gpu_bundle.sh BUILD_DIR OUT_TAR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STAGE=$(mktemp -d /tmp/fusebox_bundle.XXXXXX)
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/build" "$STAGE/lib" "$STAGE/.deps/lib"
(cd "$BUILD" && find . -path ./CMakeFiles -prune -o -type f ! -name '*.o' ! -name '*.a' ! -name '*.log' \
   ! -name 'CMakeCache.txt' -print | grep -v '/CMakeFiles/' | tar -cf - -T - | tar -C "$STAGE/build" -xf -)
cp -L "$ROOT"/.deps/lib/*.so "$STAGE/.deps/lib/"
cp -L /usr/lib/x86_64-linux-gnu/libjansson.so.4 "$STAGE/lib/"
for l in /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0 /usr/lib/x86_64-linux-gnu/libgfortran.so.5; do
  [ -e "$l" ] && cp -L "$l" "$STAGE/lib/"
done
[ -d "$ROOT/.deps/ocr" ] && cp -rL "$ROOT/.deps/ocr" "$STAGE/.deps/ocr"
if [ -d "$ROOT/models/gen" ]; then
  mkdir -p "$STAGE/models"
  (cd "$ROOT/models" && find gen -type f -size -"${FBX_BUNDLE_MODEL_MAX:-60M}" | tar -cf - -T - | tar -C "$STAGE/models" -xf -)
fi
[ -d /usr/share/libonnx-testdata ] && cp -rL /usr/share/libonnx-testdata "$STAGE/testdata"
tar -C "$STAGE" -cJf "$OUTTAR" .
echo "[bundle] $OUTTAR ($(du -h "$OUTTAR" | cut -f1))"
