#!/usr/bin/env bash
# scripts/run_tests.sh BUILD_DIR — every unit test program, then the end-to-end checks.
#
#   1. every BUILD_DIR/tests/test_* program (test_e2e_* ones once per ORT library: 1.29 and 1.30)
#   2. `fusebox check` (Fusebox vs ORT CPU EP) and `fusebox info --min-claimed 90` on the generated
#      models and the three PP-OCR models, with both ORT libraries.
# Prints one line per case and finally exactly "N passed, N failed"; exit 1 on any failure.
# FBX_SANITIZED=1 (an ASan+UBSan build): leak checking on, with tests/lsan.supp for ORT's own leaks.
set -u
BUILD=${1:?usage: scripts/run_tests.sh BUILD_DIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$BUILD" && pwd) || { echo "no build dir $1"; exit 1; }
cd "$ROOT"
ORT129=$ROOT/.deps/lib/libonnxruntime.1.29.so
ORT130=$ROOT/.deps/lib/libonnxruntime.1.30.so
export FUSEBOX_EP_LIB=${FUSEBOX_EP_LIB:-$BUILD/libfusebox_ep.so}
export FUSEBOX_REPO=$ROOT
unset FUSEBOX_TRACE FUSEBOX_VERBOSE FUSEBOX_CLAIM_DEBUG
SAN=${FBX_SANITIZED:-0}
if [ "$SAN" = 1 ]; then
  # Leak checking stays on; tests/lsan.supp names only leaks inside ORT and OpenBLAS.
  # intercept_tls_get_addr=0: up to GCC 13 / LLVM 16 the runtime's __tls_get_addr interceptor
  # takes a dynamic TLS block whose start lies 16 bytes into a page for a pre-2.25 glibc block
  # with a header and reads two words before it. ORT's thread_local blocks (a dlopen'd library)
  # land there by chance, and LSan's tracer then dies at exit ("Tracer caught signal 11",
  # addr=0x23x0), the same way on a rerun. The blocks stay reachable through the DTV, so leaks
  # are still reported (checked: a planted 77-byte leak is found with the flag set).
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:intercept_tls_get_addr=0}
  export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$ROOT/tests/lsan.supp:print_suppressions=0}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
fi
TIMEOUT=${FBX_TEST_TIMEOUT:-900}
LOG=$(mktemp -d /tmp/fusebox_tests.XXXXXX)
PASS=0
FAIL=0
FAILED=()
RETRIED=()  # cases run twice because LeakSanitizer itself failed the first time

# ---- sanitizer findings ---------------------------------------------------------------------
# A sanitizer report fails its case whatever the exit code. The build stops at the first UBSan
# report (-fno-sanitize-recover=undefined: exit 1) and ASan/LSan exit non-zero too, but only in
# the process that hit it: a report in a forked child (the conformance and trace tests fork)
# can end in a parent that exits 0. So every case's log is scanned for UBSan's
# "file:line:col: runtime error: " and for ASan/LSan/UBSan "==pid==ERROR: ...Sanitizer" and
# "SUMMARY: ...Sanitizer" lines (applied to every build; a release build never prints them).
SAN_REPORT_RE=': runtime error: |==[0-9]+==ERROR: [A-Za-z]*Sanitizer|^SUMMARY: [A-Za-z]*Sanitizer'
# san_scan LOG — prints the first sanitizer report line of LOG; status 0 when there is one.
san_scan() { grep -m1 -E "$SAN_REPORT_RE" "$1"; }
# san_scan_selfcheck — the scan finds each kind of report and nothing in clean output.
san_scan_selfcheck() {
  local d; d=$(mktemp -d /tmp/fusebox_san_check.XXXXXX) || return 1
  printf 'ok\nsrc/ir/exec_run.c:41:18: runtime error: signed integer overflow: 4611686018427387905 * 4 cannot be represented in type long int\n' >"$d/ubsan"
  printf '=================\n==4242==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x602000000015\n' >"$d/asan"
  printf '\n==4243==ERROR: LeakSanitizer: detected memory leaks\n\nSUMMARY: AddressSanitizer: 77 byte(s) leaked in 1 allocation(s).\n' >"$d/lsan"
  printf 'ops: 598 passed, 0 failed\nORT: RUNTIME_EXCEPTION: std::runtime_error: bad shape\n' >"$d/clean"
  printf 'Tracer caught signal 11: addr=0x2370 pc=0x7f47f28e80f0 sp=0x7f47eb6fad10\n==17981==LeakSanitizer has encountered a fatal error.\n' >"$d/lsan_internal"
  local ok=0
  for k in ubsan asan lsan; do san_scan "$d/$k" >/dev/null || { echo "sanitizer scan missed the $k report"; ok=1; }; done
  if san_scan "$d/clean" >/dev/null; then echo "sanitizer scan flagged clean output"; ok=1; fi
  if san_scan "$d/lsan_internal" >/dev/null; then echo "sanitizer scan took LSan's own failure for a report"; ok=1; fi
  lsan_internal_failure "$d/lsan_internal" || { echo "LSan's own failure not recognised"; ok=1; }
  for k in ubsan asan lsan clean; do
    if lsan_internal_failure "$d/$k"; then echo "the $k log taken for LSan's own failure"; ok=1; fi
  done
  rm -rf "$d"
  return $ok
}
# lsan_internal_failure LOG — status 0 when LeakSanitizer itself failed (no verdict on leaks).
lsan_internal_failure() { grep -q -E '==[0-9]+==LeakSanitizer has encountered a fatal error' "$1"; }
export SAN_REPORT_RE
export -f san_scan san_scan_selfcheck lsan_internal_failure  # run_case runs commands under timeout(1): not functions
# ---- end of sanitizer findings --------------------------------------------------------------

# run_case NAME CMD... — runs CMD, output to $LOG/NAME.log (shown on failure)
run_case() {
  local name=$1; shift
  local log="$LOG/${name//\//_}.log"
  local t0=$(date +%s%N)
  timeout "$TIMEOUT" "$@" >"$log" 2>&1
  local rc=$?
  # LeakSanitizer's own failure (its ptrace-based tracer crashing, "Tracer caught signal 11",
  # seen once under a load of ~15 on 2 cores) is not a finding and says nothing about the code:
  # the case runs once more and that run alone decides. A real report is never retried.
  if [ $rc -ne 0 ] && lsan_internal_failure "$log" && ! san_scan "$log" >/dev/null; then
    RETRIED+=("$name")
    mv "$log" "$log.lsan-internal"
    timeout "$TIMEOUT" "$@" >"$log" 2>&1
    rc=$?
  fi
  local ms=$((($(date +%s%N) - t0) / 1000000))
  local dt="$((ms / 1000)).$((ms % 1000 / 100))"
  # a sanitizer report in the log fails the case; exit status 86 stands for "0, but a report"
  local san; san=$(san_scan "$log") && { [ $rc -ne 0 ] || rc=86; echo "[run_tests] sanitizer report: $san" >>"$log"; }
  if [ $rc -eq 0 ]; then
    PASS=$((PASS + 1)); printf 'PASS  %-60s %6ss\n' "$name" "$dt"
  else
    FAIL=$((FAIL + 1)); FAILED+=("$name")
    printf 'FAIL  %-60s %6ss (exit %d)\n' "$name" "$dt" "$rc"
    tail -n 25 "$log" | sed 's/^/      | /'
  fi
}

# ---- test backend (the engine's device paths): FUSEBOX_TEST_BACKEND=opaque runs the whole
# suite with the EP on the opaque backend (CPU kernels behind buffers the host cannot read);
# the third pass of `make test`. Unset or "cpu": the CPU backend.
if [ -n "${FUSEBOX_TEST_BACKEND:-}" ] && [ "$FUSEBOX_TEST_BACKEND" != cpu ]; then
  echo "== backend: FUSEBOX_TEST_BACKEND=$FUSEBOX_TEST_BACKEND (every EP session of this pass runs on it) =="
fi
# ---- end of test backend block ----

echo "== unit tests ($BUILD/tests) =="
run_case "sanitizer log scan finds reports" bash -c san_scan_selfcheck
shopt -s nullglob
for t in "$BUILD"/tests/test_*; do
  [ -x "$t" ] || continue
  n=$(basename "$t")
  case "$n" in
    test_e2e_*)
      run_case "$n [ORT 1.30]" env FUSEBOX_ORT_LIB="$ORT130" "$t"
      run_case "$n [ORT 1.29]" env FUSEBOX_ORT_LIB="$ORT129" "$t" ;;
    *) run_case "$n" "$t" ;;
  esac
done

echo "== end-to-end: fusebox check / info =="
FB=$BUILD/fusebox
OCR=$ROOT/.deps/ocr/package/assets
# model | extra options
CASES=(
  "models/gen/decoder_tiny.onnx|"
  "models/gen/cnn_small.onnx|"
  "models/gen/unet_q_small.onnx|"
  "$OCR/ch_PP-OCRv4_det_infer.onnx|--shape x=1x3x224x224"
  "$OCR/ch_PP-OCRv4_rec_infer.onnx|--shape x=1x3x48x320"
  "$OCR/ch_ppocr_mobile_v2.0_cls_infer.onnx|--shape x=1x3x48x192"
)
if [ ! -x "$FB" ]; then
  FAIL=$((FAIL + 1)); FAILED+=("fusebox binary"); echo "FAIL  $FB not built"
else
  for lib in "$ORT130" "$ORT129"; do
    v=$(basename "$lib" .so); v=${v#libonnxruntime.}
    for c in "${CASES[@]}"; do
      m=${c%%|*}; opts=${c#*|}
      name=$(basename "$m" .onnx)
      if [ ! -f "$m" ]; then
        FAIL=$((FAIL + 1)); FAILED+=("$name: model missing"); echo "FAIL  $m missing (scripts/make_models.sh / make deps)"; continue
      fi
      # shellcheck disable=SC2086
      run_case "check $name [ORT $v]" "$FB" check "$m" --ort "$lib" $opts
      run_case "info  $name >= 90% claimed [ORT $v]" "$FB" info "$m" --ort "$lib" --min-claimed 90
    done
  done
  run_case "generate decoder_tiny identical tokens [ORT 1.30]" \
    "$FB" generate models/gen/decoder_tiny.onnx --ort "$ORT130" --prompt-len 8 --new-tokens 16
fi

echo "logs: $LOG"
if [ ${#RETRIED[@]} -gt 0 ]; then
  echo "run twice (LeakSanitizer's own tracer failed the first time; the second run decided):"
  for f in "${RETRIED[@]}"; do echo "  - $f"; done
fi
if [ $FAIL -gt 0 ]; then
  echo "failed:"; for f in "${FAILED[@]}"; do echo "  - $f"; done
fi
echo "$PASS passed, $FAIL failed"
[ $FAIL -eq 0 ]
