# kiln — the two Quick start commands: `make demo` and `make test`. Each one installs what
# is missing (scripts/install-deps.sh), configures and builds before doing its job.
BUILD ?= build
JOBS  ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build demo test sanitize fuzz install clean

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/build.ninja: | deps
	cmake -S . -B $(BUILD) -G Ninja \
	  -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 $(CMAKE_FLAGS)

configure: deps $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# The demo keeps its kernel cache in the build tree, emptied first, so its first compile is cold.
DEMO_CACHE = $(BUILD)/demo-cache

demo: build
	@echo "== the kernel, traced from the C++ DSL into tile IR =="
	$(BUILD)/bin/kiln compile gemm_bias_relu --emit=tile --dtype bf16
	@echo "== trace -> compile -> run on fresh random data -> verify against Eigen (f64) =="
	@mkdir -p $(DEMO_CACHE) && $(BUILD)/bin/kiln cache clear --dir $(DEMO_CACHE) > /dev/null
	KILN_CACHE_DIR=$(DEMO_CACHE) $(BUILD)/bin/kiln run gemm_bias_relu --backend=auto --shape 257x129x65 --dtype bf16
	@echo "== the same kernel in a new process, on another shape: no compile, the disk cache has it =="
	KILN_CACHE_DIR=$(DEMO_CACHE) $(BUILD)/bin/kiln run gemm_bias_relu --backend=auto --shape 1000x77x333 --dtype bf16
	@echo "== the lifecycle table: kiln beside the framework route (Eigen on the CPU, cuBLASLt on a GPU), and the verdict at a 1.10x threshold =="
	@mkdir -p $(BUILD)/report
	KILN_CACHE_DIR=$(DEMO_CACHE) $(BUILD)/bin/kiln bench gemm_bias_relu --backend=auto --shape 257x129x65 --shape 512x512x512 --dtype bf16 \
	  --accept 1.10 --csv $(BUILD)/report/lifecycle.csv --json $(BUILD)/report/lifecycle.json --html $(BUILD)/report/lifecycle.html

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The tests again on kiln built with ASan + UBSan (SANITIZE=thread: TSan), in their own
# build tree. The GPU suites (no GPU here) and the checks of the installed, exported
# library (the sanitizer runtime is not in it) are left out; see docs/testing.md.
SANITIZE ?= address,undefined
SAN_BUILD ?= build-$(subst $(comma),-,$(SANITIZE))
comma := ,
SAN_EXCLUDE ?= ^(gpu[.]|cuda-support[.]gpu|embed[.]|fuzz[.])
# Under TSan only: the tests that compile a kernel's sm_90a twins to PTX on several threads
# without a GPU (for the driver, as `kiln warm` does). LLVM's lazily made statics (its timer
# globals, MLIR's attribute-name table) are published by guard loads inside the
# uninstrumented library, which TSan cannot see, so it reports their first use from two
# threads; ASan + UBSan still run them (docs/testing.md).
TSAN_EXCLUDE ?= ^compiled for deploy|^cli[.]warm_fills
SAN_EXCLUDE_RUN = $(SAN_EXCLUDE)$(if $(findstring thread,$(SANITIZE)),|$(TSAN_EXCLUDE))
# LLVM's headers, compiled into kiln with ASan, poison the arenas of LLVM's allocators; the
# (uninstrumented) LLVM libraries then write there legitimately: user poisoning is off.
# The sweeps over the catalogue take their first and last cases (test/sweep.hpp): their
# time is the toolkit's ptxas, which is not instrumented; `make test` takes every case.
SAN_ENV ?= KILN_TEST_SWEEP=ends ASAN_OPTIONS=allow_user_poisoning=0 UBSAN_OPTIONS=print_stacktrace=1 \
  LSAN_OPTIONS=suppressions=$(CURDIR)/test/sanitizers/lsan.supp \
  TSAN_OPTIONS=suppressions=$(CURDIR)/test/sanitizers/tsan.supp
sanitize: deps
	cmake -S . -B $(SAN_BUILD) -G Ninja -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
	  -DKILN_SANITIZE=$(SANITIZE) -DKILN_FUZZ=OFF $(CMAKE_FLAGS)
	cmake --build $(SAN_BUILD) -j $(JOBS) --target kiln-sanitized-tests
	cd $(SAN_BUILD) && $(SAN_ENV) ctest --output-on-failure -j $(JOBS) -E '$(SAN_EXCLUDE_RUN)'

# Each fuzzer for FUZZ_SECONDS from its seed corpus (ctest runs them briefly); findings
# are left as crash-*/timeout-* files in $(BUILD)/test/fuzz/long/<fuzzer>/.
FUZZ_SECONDS ?= 300
fuzz: build
	@for f in fuzz_cache_entry fuzz_tune_db fuzz_tile_ir fuzz_dsl_program; do \
	  mkdir -p $(BUILD)/test/fuzz/long/$$f && cd $(BUILD)/test/fuzz/long/$$f && \
	  ASAN_OPTIONS=allow_user_poisoning=0 $(CURDIR)/$(BUILD)/bin/$$f -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -timeout=20 . $(CURDIR)/test/fuzz/corpus/$$f \
	    || exit 1; cd $(CURDIR); \
	done

# Stripped: the library's debug sections are most of its size (docs/embedding.md).
install: build
	cmake --install $(BUILD) --strip --prefix $(or $(PREFIX),$(BUILD)/install)

clean:
	rm -rf $(BUILD)
