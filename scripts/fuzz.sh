#!/usr/bin/env bash
# scripts/fuzz.sh BUILD_FUZZ [RUNS] — the fuzz run of `make test` (no RUNS) and `make fuzz`.
#
# Runs BUILD_FUZZ/fuzz/fuzz_model (libFuzzer, ASan+UBSan, coverage: `make build-fuzz`) and stops
# at the first finding (crash, sanitizer report, hang, Fusebox-only error, output mismatch
# against ORT's CPU EP; see tests/fuzz/fuzz_model.c). The corpus is made here, fresh, from:
#   - the generated models in models/gen (those under 1 MB), as raw models ('R' + bytes);
#   - every 16th ONNX backend node test model (/usr/share/libonnx-testdata/data/node), raw;
#   - the inputs of past findings (tests/fuzz/regress);
#   - FBX_FUZZ_INPUTS (default 6000) graph descriptions of 16-256 bytes from a fixed-seed
#     generator (FBX_FUZZ_SEED, default 1): the same inputs on every machine.
# Without RUNS (make test): every corpus input is run once (-runs=0), so the verdict depends on
#   the tree only: deterministic, about a minute on the 2-core machines.
# With RUNS (make fuzz): then RUNS coverage-guided mutations (-seed=FBX_FUZZ_SEED). Those are
#   not identical from run to run past the first ~1,000 (a few branches in ORT/Fusebox depend
#   on more than the input), which is why CI does not use them.
# Inputs whose graph would make a valid tensor of over 2^24 elements (bigint: ConstantOfShape
# of 2^32, ...) are not run; the summary counts them.
# FBX_FUZZ_CLASSES (default all; see below and the README's testing section), FBX_FUZZ_KEEP_GOING=1
# (print every finding and go on: a survey, exit 1 at the end if there were any), FBX_FUZZ_KEEP=DIR (keep corpus and artifacts), FBX_FUZZ_FLAGS (more
# libFuzzer flags). Prints "fuzz: N inputs ..., no finding" and exits 0, or the finding and 1.
set -u
BUILD=${1:?usage: scripts/fuzz.sh BUILD_FUZZ [RUNS]}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$BUILD" && pwd) || { echo "no build dir $1"; exit 1; }
FUZZ=$BUILD/fuzz/fuzz_model
RUNS=${2:-0}
SEED=${FBX_FUZZ_SEED:-1}
INPUTS=${FBX_FUZZ_INPUTS:-6000}
# Every class runs (default FBX_FUZZ_CLASSES=all): where a class makes ORT part from the spec
# (nan: Clip with a NaN bound, NaN through MaxPool; bigint: Slice ends past INT64_MAX; samepad:
# dilated SAME pools; invalid: a pool window wider than its input), Fusebox passes when the
# independent reference of tests/fuzz/fz_ref.h agrees with it (a counted NOTE, the rule of
# tests/ops: common/od_judge.h), and a model that crashes ORT itself (empty: a reflect Pad of
# an empty dim) is judged by the reference alone. FBX_FUZZ_CLASSES= (empty) runs none.
CLASSES=${FBX_FUZZ_CLASSES-all}
[ -x "$FUZZ" ] || { echo "fuzz: $FUZZ not built (make build-fuzz)"; exit 1; }

WORK=${FBX_FUZZ_KEEP:-$(mktemp -d /tmp/fusebox_fuzz.XXXXXX)}
mkdir -p "$WORK/seeds" "$WORK/corpus" "$WORK/artifacts"
SEEDS=$WORK/seeds
# raw models: 'R' then the model bytes
raw_seed() { { printf 'R'; cat "$1"; } >"$SEEDS/$2"; }
for m in "$ROOT"/models/gen/*.onnx; do
  [ -f "$m" ] && [ "$(stat -c %s "$m")" -lt 1048576 ] && raw_seed "$m" "gen_$(basename "$m" .onnx)"
done
NODE=/usr/share/libonnx-testdata/data/node
if [ -d "$NODE" ]; then
  i=0
  for d in $(LC_ALL=C ls "$NODE" | LC_ALL=C sort); do
    [ $((i++ % 16)) -eq 0 ] && [ -f "$NODE/$d/model.onnx" ] && raw_seed "$NODE/$d/model.onnx" "node_$d"
  done
fi
# inputs of past findings, fixed since (tests/fuzz/regress: one file per finding, named for it)
for f in "$ROOT"/tests/fuzz/regress/*; do [ -f "$f" ] && cp "$f" "$SEEDS/regress_$(basename "$f")"; done
# graph descriptions from a fixed-seed generator (the same bytes on every machine)
/usr/bin/python3 -c '
import random, sys
r = random.Random(int(sys.argv[3]))
for k in range(int(sys.argv[2])):
    n = r.randint(16, 256)
    open("%s/desc_%05d" % (sys.argv[1], k), "wb").write(bytes(r.getrandbits(8) for _ in range(n)))
' "$SEEDS" "$INPUTS" "$SEED"
echo "[fuzz] $(ls "$SEEDS" | wc -l) inputs, then $RUNS mutations; seed $SEED, classes '${CLASSES}' (log: $WORK/fuzz.log)"

export FUSEBOX_EP_LIB=${FUSEBOX_EP_LIB:-$BUILD/libfusebox_ep.so}
export FUSEBOX_ORT_LIB=${FUSEBOX_ORT_LIB:-$ROOT/.deps/lib/libonnxruntime.1.30.so}
export FBX_FUZZ_CLASSES=$CLASSES
unset FUSEBOX_TRACE FUSEBOX_VERBOSE FUSEBOX_CLAIM_DEBUG
# halt_on_error: the first report ends the run. Leaks are checked at exit only (libFuzzer's
# per-input leak check counts ORT's lazily built caches as leaks); ORT's and OpenBLAS's own
# one-off allocations are suppressed (tests/fuzz/lsan.supp).
# intercept_tls_get_addr=0: see scripts/run_tests.sh (LSan's tracer crashing on ORT's dynamic TLS).
export ASAN_OPTIONS=halt_on_error=1:allocator_may_return_null=1:detect_leaks=1:intercept_tls_get_addr=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export LSAN_OPTIONS=suppressions=$ROOT/tests/fuzz/lsan.supp:print_suppressions=0
# Address-space randomisation off where the system allows it: a hash keyed by a pointer would
# otherwise change which branches an input takes, and with them the fixed-seed run's path.
NORAND=""
setarch "$(uname -m)" -R true 2>/dev/null && NORAND="setarch $(uname -m) -R"
t0=$(date +%s)
$NORAND "$FUZZ" -seed="$SEED" -runs="$RUNS" -timeout=30 -max_len=1100000 -use_counters=0 -detect_leaks=0 ${FBX_FUZZ_FLAGS:-} \
  -rss_limit_mb=6144 -malloc_limit_mb=4096 -print_final_stats=1 \
  -artifact_prefix="$WORK/artifacts/" "$WORK/corpus" "$SEEDS" >"$WORK/fuzz.log" 2>&1
rc=$?
dt=$(($(date +%s) - t0))
if [ $rc -ne 0 ]; then
  echo "[fuzz] FINDING after ${dt}s (exit $rc): the input is in $WORK/artifacts/; reproduce with"
  echo "       $FUZZ $WORK/artifacts/<file>   (FBX_FUZZ_DUMP=DIR writes its model)"
  grep -v 'onnxruntime:, sequential_executor' "$WORK/fuzz.log" |
    grep -A30 -m1 'FINDING\|ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error\|ERROR: libFuzzer' | sed 's/^/      | /'
  exit 1
fi
runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$WORK/fuzz.log" | grep -o '[0-9]*$')
cov=$(grep -ao 'cov: [0-9]*' "$WORK/fuzz.log" | tail -n 1)
ro=$(grep -ao 'report-only total: [0-9]*' "$WORK/fuzz.log" | grep -o '[0-9]*$')
echo "fuzz: ${runs:-?} inputs run in ${dt}s ($(ls "$SEEDS" | wc -l) corpus + $RUNS mutations), no finding ($cov;" \
  "${ro:-0} report-only: ORT alone failed, Fusebox returned numbers)"
# the reference's word: NOTEs (ORT disagrees, the independent reference agrees), per class
grep -a 'fuzz_model: reference total\|fuzz_model: class ' "$WORK/fuzz.log" | sed 's/^fuzz_model: /      /'

[ -n "${FBX_FUZZ_KEEP:-}" ] || rm -rf "$WORK"
