# Tidemark — two commands on a fresh machine: `make demo` and `make test`.
BUILD      ?= build
ASAN_BUILD ?= build-asan
BUILD_TYPE ?= RelWithDebInfo
JOBS       ?= $(shell nproc)
WERROR     ?= $(if $(TIDEMARK_WERROR),$(TIDEMARK_WERROR),OFF)
CMAKE_ARGS ?=

.PHONY: deps configure build demo test test-fast test-sanitize bench format clean

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DTIDEMARK_WERROR=$(WERROR) $(CMAKE_ARGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@$(BUILD)/samples/memory_tour
	@echo
	@echo "== training samples/train_mlp, recorded into $(BUILD)/train_mlp.db"
	@rm -f $(BUILD)/train_mlp.db $(BUILD)/train_mlp.db-wal $(BUILD)/train_mlp.db-shm
	@TIDEMARK_OUTPUT=$(BUILD)/train_mlp.db TIDEMARK_STACKS=16 $(BUILD)/samples/train_mlp 300

# Every test: the optimised build, then the ASan+UBSan build.
test: test-fast test-sanitize

test-fast: build
	@ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-sanitize: deps
	@cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTIDEMARK_SANITIZE=ON \
	  -DTIDEMARK_BENCH=OFF -DTIDEMARK_WERROR=$(WERROR) $(CMAKE_ARGS) >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS)

bench: build
	@scripts/run-benchmarks.sh $(BUILD)

format:
	@git ls-files '*.h' '*.cpp' '*.cu' '*.cuh' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
