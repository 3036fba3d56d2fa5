# Fusebox: the two commands a newcomer needs are `make demo` and `make test`.
# Each installs what is missing (scripts/deps.sh), builds, and runs.

BUILD     ?= build
BUILD_SAN ?= build-asan
ORT_INC   := $(CURDIR)/.deps/ort129/include
JOBS      ?= $(shell nproc)
CMAKE_ARGS = -DFBX_ORT_INCLUDE=$(ORT_INC)

.PHONY: all deps build build-asan demo test test-fast bench clean models

all: build

deps:
	@scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD) $(CMAKE_ARGS) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

build-asan: deps
	@cmake -S . -B $(BUILD_SAN) $(CMAKE_ARGS) -DCMAKE_BUILD_TYPE=Debug -DFBX_SANITIZE=ON >/dev/null
	@cmake --build $(BUILD_SAN) -j $(JOBS)

models: deps
	@scripts/make_models.sh

# The main job: a generated decoder through ORT with Fusebox, trace on, summary printed.
demo: build models
	@scripts/demo.sh $(BUILD)

# The whole test suite, then once more under ASan+UBSan.
test: build build-asan models
	@scripts/run_tests.sh $(BUILD)
	@FBX_SANITIZED=1 scripts/run_tests.sh $(BUILD_SAN)

# One pass, no sanitizer build (for quick local iterations).
test-fast: build models
	@scripts/run_tests.sh $(BUILD)

bench: build models
	@scripts/bench.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(BUILD_SAN)
