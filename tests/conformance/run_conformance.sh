#!/usr/bin/env bash
# Runs the ONNX backend node tests (and the generated decoder cases in models/gen/cases)
# through ORT's CPU EP alone and with Fusebox registered, and writes
# tests/conformance/REPORT.md.
#
#   tests/conformance/run_conformance.sh [BUILD_DIR] [test_conformance options...]
#     BUILD_DIR defaults to build; options e.g. --filter test_add, --no-fusebox, -v
#
# Exit status: 0 when no case that Fusebox claims is wrong, 1 otherwise, 2 on setup errors.
# FUSEBOX_ORT_LIB / FUSEBOX_EP_LIB select the ORT library / EP library (see tests/common/ort_host.h).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=build
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then BUILD=$1; shift; fi
BIN="$BUILD/tests/test_conformance"
if [ ! -x "$BIN" ]; then
  echo "run_conformance: $BIN not built (make build)" >&2
  exit 2
fi
if [ -x scripts/make_models.sh ] && [ ! -e models/gen/cases/decoder_tiny.stamp ]; then
  scripts/make_models.sh >/dev/null
fi
exec "$BIN" "$@"
