# Tidemark — two commands on a fresh machine: `make demo` and `make test`.
BUILD      ?= build
ASAN_BUILD ?= build-asan
BUILD_TYPE ?= RelWithDebInfo
JOBS       ?= $(shell nproc)
WERROR     ?= $(if $(TIDEMARK_WERROR),$(TIDEMARK_WERROR),OFF)
CMAKE_ARGS ?=

.PHONY: deps deps-demo configure configure-demo build build-demo demo test test-fast test-sanitize bench format format-check clean

deps:
	@scripts/install-deps.sh

deps-demo:
	@scripts/install-deps.sh --demo

# The demo builds only what it runs (the demo_programs target: the CLI, the samples, the GUI);
# tests and benchmarks are configured when their libraries are installed, built by `make test`.
configure-demo: deps-demo
	@echo "== configuring $(BUILD) (CMake, a few seconds)"
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DTIDEMARK_WERROR=$(WERROR) $(CMAKE_ARGS) >/dev/null

build-demo: configure-demo
	@echo "== building the CLI, the samples and the GUI (about 5 minutes on 2 cores from clean, seconds when built)"
	@cmake --build $(BUILD) -j $(JOBS) --target demo_programs

configure: deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DTIDEMARK_TESTS=ON -DTIDEMARK_BENCH=ON -DTIDEMARK_WERROR=$(WERROR) $(CMAKE_ARGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# OpenBLAS falls back to its slowest kernels on CPUs it does not know (scripts/openblas-coretype.sh);
# the demo's programs then run with the newest kernel set the CPU allows.
# Asked once, when the demo first needs it (after its packages are installed), then kept.
OPENBLAS_CORE = $(eval OPENBLAS_CORE := $$(shell scripts/openblas-coretype.sh))$(OPENBLAS_CORE)
BLAS_ENV = $(if $(OPENBLAS_CORE),OPENBLAS_CORETYPE=$(OPENBLAS_CORE))

demo: build-demo
	@if [ -n "$(OPENBLAS_CORE)" ]; then echo "== OpenBLAS does not know this CPU: its $(OPENBLAS_CORE) kernels instead of the slowest (OPENBLAS_CORETYPE)"; fi
	@echo "== the memory tour: tensors, views and the caching allocator (a second)"
	@$(BLAS_ENV) $(BUILD)/samples/memory_tour
	@echo
	@echo "== tidemark record -- samples/train_fashion_mnist --model mlp --epochs 1 (seconds on a quiet machine)"
	@rm -f $(BUILD)/fashion_mnist.db $(BUILD)/fashion_mnist.db-wal $(BUILD)/fashion_mnist.db-shm
	@$(BLAS_ENV) $(BUILD)/cli/tidemark record -o $(BUILD)/fashion_mnist.db -- \
	  $(BUILD)/samples/train_fashion_mnist --model mlp --epochs 1
	@echo
	@$(BUILD)/cli/tidemark summary $(BUILD)/fashion_mnist.db
	@echo
	@$(BUILD)/cli/tidemark timeline $(BUILD)/fashion_mnist.db --width 100
	@$(BUILD)/cli/tidemark timeline $(BUILD)/fashion_mnist.db --png $(BUILD)/timeline.png
	@echo
	@echo "== a memory pitfall: summing loss tensors keeps every graph alive"
	@rm -f $(BUILD)/pitfall.db $(BUILD)/pitfall.db-wal $(BUILD)/pitfall.db-shm
	@$(BLAS_ENV) $(BUILD)/cli/tidemark record -o $(BUILD)/pitfall.db -- \
	  $(BUILD)/samples/pitfall_accumulated_loss --steps 10 >/dev/null
	@$(BUILD)/cli/tidemark diagnose $(BUILD)/pitfall.db
	@echo
	@echo "== what-if: the same run replayed through the caching allocator on a 32 MiB device"
	@$(BUILD)/cli/tidemark replay $(BUILD)/pitfall.db --capacity 32MiB
	@$(BUILD)/cli/tidemark top $(BUILD)/pitfall.db --folded > $(BUILD)/pitfall-peak.folded
	@$(BUILD)/cli/tidemark export $(BUILD)/pitfall.db --format snapshot -o $(BUILD)/pitfall.pickle 2>/dev/null
	@echo
	@echo "trace: $(BUILD)/fashion_mnist.db, chart: $(BUILD)/timeline.png"
	@echo "the pitfall's peak: $(BUILD)/pitfall-peak.folded (flamegraph.pl, speedscope.app),"
	@echo "  $(BUILD)/pitfall.pickle (drop it on pytorch.org/memory_viz)"
	@if [ -x $(BUILD)/gui/tidemark-gui ]; then \
	  echo "browse it (timeline, flame graph, allocator): $(BUILD)/gui/tidemark-gui $(BUILD)/fashion_mnist.db $(BUILD)/pitfall.db"; fi
	@echo "pitfalls: $(BUILD)/samples/pitfall_* [--fixed] (docs/samples.md)"
	@echo "more: $(BUILD)/cli/tidemark --help (watch, top, leaks, syncs, steps, check, diff, replay, export)"

# Every test: the optimised build, then the ASan+UBSan build.
test: test-fast test-sanitize

# `tidemark estimate`'s tests run real PyTorch from PyPI, in a venv kept between runs
# (scripts/torch-venv.sh; several GB the first time, pip's cache after).
test-fast: build
	@TIDEMARK_TORCH_PYTHON=$$(scripts/torch-venv.sh || true) ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-sanitize: deps
	@cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTIDEMARK_SANITIZE=ON \
	  -DTIDEMARK_TESTS=ON -DTIDEMARK_BENCH=OFF -DTIDEMARK_WERROR=$(WERROR) $(CMAKE_ARGS) >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS)

bench: build
	@scripts/run-benchmarks.sh $(BUILD)

format:
	@git ls-files '*.h' '*.cpp' '*.cu' '*.cuh' | xargs clang-format -i

format-check: deps
	@scripts/check-format.sh

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
