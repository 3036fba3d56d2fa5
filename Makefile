# Fusebox: the two commands a newcomer needs are `make demo` and `make test`.
# Each installs what is missing (scripts/deps.sh), builds, and runs.

BUILD     ?= build
BUILD_SAN ?= build-asan
BUILD_FUZZ ?= build-fuzz
ORT_INC   := $(CURDIR)/.deps/ort129/include
JOBS      ?= $(shell nproc)
CMAKE_ARGS = -DFBX_ORT_INCLUDE=$(ORT_INC)

.PHONY: all deps build build-asan build-fuzz fuzz demo test test-fast bench clean models

all: build

deps:
	@scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD) $(CMAKE_ARGS) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@echo "[build] $(BUILD) (Release, -Wall -Wextra -Werror; log: $(BUILD)/build.log)"
	@cmake --build $(BUILD) -j $(JOBS) >$(BUILD)/build.log 2>&1 || { tail -n 60 $(BUILD)/build.log; exit 1; }

build-asan: deps
	@cmake -S . -B $(BUILD_SAN) $(CMAKE_ARGS) -DCMAKE_BUILD_TYPE=Debug -DFBX_SANITIZE=ON >/dev/null
	@echo "[build] $(BUILD_SAN) (ASan+UBSan; log: $(BUILD_SAN)/build.log)"
	@cmake --build $(BUILD_SAN) -j $(JOBS) >$(BUILD_SAN)/build.log 2>&1 || { tail -n 60 $(BUILD_SAN)/build.log; exit 1; }

# clang, libFuzzer coverage + ASan+UBSan: the library and tests/fuzz/fuzz_*.c only.
build-fuzz: deps
	@CC=clang cmake -S . -B $(BUILD_FUZZ) $(CMAKE_ARGS) -DCMAKE_BUILD_TYPE=Debug -DFBX_FUZZ=ON >/dev/null
	@echo "[build] $(BUILD_FUZZ) (clang, libFuzzer + ASan+UBSan; log: $(BUILD_FUZZ)/build.log)"
	@cmake --build $(BUILD_FUZZ) -j $(JOBS) >$(BUILD_FUZZ)/build.log 2>&1 || { tail -n 60 $(BUILD_FUZZ)/build.log; exit 1; }

models: deps
	@scripts/make_models.sh

# The main job: a generated decoder through ORT with Fusebox, trace on, summary printed.
demo: build models
	@scripts/demo.sh $(BUILD)

# The whole test suite, then once more under ASan+UBSan, then once more (release) on the
# opaque test backend, whose buffers the host cannot read (the engine's device code paths),
# then the bounded fuzz run (fixed corpus, ASan+UBSan, halt on the first finding: scripts/fuzz.sh).
test: build build-asan build-fuzz models
	@scripts/run_tests.sh $(BUILD)
	@FBX_SANITIZED=1 scripts/run_tests.sh $(BUILD_SAN)
	@FUSEBOX_TEST_BACKEND=opaque scripts/run_tests.sh $(BUILD)
	@echo "== fuzz: Fusebox vs ORT CPU on generated models (scripts/fuzz.sh) =="
	@scripts/fuzz.sh $(BUILD_FUZZ)

# A longer fuzz run: make fuzz FUZZ_RUNS=100000 [FBX_FUZZ_CLASSES=all FBX_FUZZ_KEEP=dir]
FUZZ_RUNS ?= 50000
fuzz: build-fuzz models
	@scripts/fuzz.sh $(BUILD_FUZZ) $(FUZZ_RUNS)

# One pass, no sanitizer build (for quick local iterations).
test-fast: build models
	@scripts/run_tests.sh $(BUILD)

# Benchmarks (also generates the ~100M-parameter decoder, 440 MB): see bench/RESULTS.md.
bench: build
	@scripts/make_models.sh --bench
	@scripts/bench.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(BUILD_SAN) $(BUILD_FUZZ)
