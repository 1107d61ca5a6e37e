# Entry points (README "Quick start"):
#   make run    install deps, build, profile the whole machine for 10 s -> out/
#   make test   install deps, build (normal + ASan/UBSan + libFuzzer), run the whole suite
#   make fuzz   run every fuzz target longer (FUZZ_SECONDS each, default 300; bench/fuzz/run)
#   make deb    build the Debian packages into dist/ (docs/packaging.md)
#   make arm64  cross-build for arm64, unit tests under qemu-user (docs/deployment.md)
SHELL := /bin/bash
JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 300
OUT ?= out
DURATION ?= 10

.PHONY: all deps test-deps build asan fuzz-build fuzz run test test-fast bench deb format format-check clean arm64

all: build

deps:
	scripts/install-deps.sh build

test-deps:
	scripts/install-deps.sh test

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPOLYPROF_WERROR=ON >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DPOLYPROF_SANITIZE=ON >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)

# libFuzzer targets (fuzz/, docs/fuzzing.md): clang, its own build dir.
fuzz-build: test-deps
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DPOLYPROF_FUZZ=ON >/dev/null
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target pp_fuzzers

fuzz: fuzz-build
	bench/fuzz/run $(FUZZ_BUILD) $(FUZZ_SECONDS)

run: build
	mkdir -p $(OUT)
	./$(BUILD)/polyprof -d $(DURATION) -o $(OUT) --plugin-dir $(BUILD)/plugins \
	  --log-file $(OUT)/polyprof.log --pid-file $(OUT)/polyprof.pid
	@echo "profile: $(OUT)/last_profile.col  flame graph: $(OUT)/last_flamegraph.html"

# The sanitizer pass runs first and the normal build last, so the final
# summary printed is the full suite's, after the names of the tests that
# passed only on their retry. The main pass runs two tests at a time: the
# resource locks of tests/CMakeLists.txt keep a runtime's tests apart, and
# what measures the agent's own cost runs alone.
test: test-deps format-check build asan fuzz-build arm64
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j 2 -R "^unit\.|^integration\.test_agent_"
	ctest --test-dir $(FUZZ_BUILD) --output-on-failure -j $(JOBS) -L fuzz
	ctest --test-dir $(BUILD) --output-on-failure -j 2 --repeat until-pass:2 -E "$$(scripts/known-failing-regex)" \
	  2>&1 | tee $(BUILD)/ctest-main.log; rc=$${PIPESTATUS[0]}; \
	  scripts/ctest-retries $(BUILD)/ctest-main.log; exit $$rc

test-fast: build
	ctest --test-dir $(BUILD) --output-on-failure -j 2

bench: build
	bench/run

ARM64_BUILD ?= build-arm64
arm64:
	PP_JOBS=$(JOBS) scripts/cross-arm64.sh $(ARM64_BUILD)

# A package build compiles the whole tree: DEB_JOBS (default 2) jobs.
DEB_JOBS ?= 2
deb:
	scripts/install-deps.sh deb
	DEB_JOBS=$(DEB_JOBS) scripts/build-deb.sh dist

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

format-check: test-deps
	clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(ARM64_BUILD) $(OUT) dist
