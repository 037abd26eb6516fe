# The quick start: `make run` and `make test` install what is missing, build, and run.
BUILD ?= build
ASAN_BUILD ?= build-asan
ARM64_BUILD ?= build-arm64
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
ARGS ?=

.PHONY: all deps deps-test deps-asan deps-arm64 build run run-fake test asan-configure test-asan fuzz bench \
  clean format deb image build-arm64 test-arm64 deb-arm64

all: build

# What each command installs (scripts/install-deps.sh, which starts no service): `make build`, `make run`,
# `make deb` and `make image` only what building and running gpud needs; `make test` and `make bench` also the
# programs the tests start themselves; `make test-asan` and `make fuzz` also clang.
deps:
	@./scripts/install-deps.sh build

deps-test:
	@./scripts/install-deps.sh test

deps-asan:
	@./scripts/install-deps.sh asan

deps-arm64:
	@./scripts/install-deps.sh arm64

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

run: build
	./$(BUILD)/gpud run $(ARGS)

# The daemon against the fake libnvidia-ml.so.1 (testing/fake_nvml); pick another scenario with
# FAKE_NVML_SCENARIO=testing/fixtures/nvml/<name>.json.
FAKE_NVML_SCENARIO ?= testing/fixtures/nvml/h100x8-healthy.json
run-fake: build
	FAKE_NVML_SCENARIO=$(FAKE_NVML_SCENARIO) ./$(BUILD)/gpud run --nvml-lib $(BUILD)/libnvidia-ml.so.1 $(ARGS)

test: deps-test build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 300

# The sanitizer build: clang, ASan and UBSan, with the libFuzzer targets (fuzz/) in the same build,
# so `make test-asan` and `make fuzz` share one instrumented build. A build folder configured
# otherwise (an older gcc sanitizer build) is configured afresh.
ASAN_CONFIGURE = CC=clang-14 CXX=clang++-14 cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug \
  -DGPUD_SANITIZE=ON -DGPUD_FUZZ=ON $(CMAKE_FLAGS)
asan-configure: deps-asan
	@if ! grep -qs '^GPUD_FUZZ:BOOL=ON' $(ASAN_BUILD)/CMakeCache.txt; then \
	  $(ASAN_CONFIGURE) --fresh; fi

# Leaves out the tests labelled "external" (their subject is another program: promtool,
# Prometheus, Alertmanager, docker, kubectl, chromium, cpack; see CMakeLists.txt).
test-asan: asan-configure
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS) --timeout 600 \
	  --label-exclude external

# The libFuzzer targets (fuzz/) of the sanitizer build, each run for FUZZ_SECONDS from seeds made
# of the fixtures and the checked-in regressions; a crash fails it and leaves its input in
# $(ASAN_BUILD)/fuzz-crashes/<target>/.
FUZZ_SECONDS ?= 60
fuzz: asan-configure
	FUZZ_BUILD=$(ASAN_BUILD) FUZZ_SECONDS=$(FUZZ_SECONDS) JOBS=$(JOBS) ./scripts/fuzz.sh

# The container image (OCI layout + docker-archive in one tarball), $(BUILD)/image/gpud-image.tar,
# tagged gpud:<version>: `docker load -i` / `podman load -i` / `ctr images import` it. An image index
# of two images, linux/amd64 and linux/arm64 (the cross build's), from which the runtime takes its
# machine's. Builds only the gpud binaries and their CRI client modules, then
# scripts/build-image.sh assembles the image with umoci (as root).
image: deps-arm64 $(BUILD)/CMakeCache.txt $(ARM64_BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) --target gpud gpud_cri_module
	cmake --build $(ARM64_BUILD) -j $(JOBS) --target gpud gpud_cri_module
	./scripts/build-image.sh $(BUILD) $(BUILD)/image $(ARM64_BUILD)

# The Debian package, gpud_<version>_amd64.deb, in $(BUILD)/packages/ (CPack; see CMakeLists.txt).
deb: build
	cd $(BUILD) && cpack -G DEB --config CPackConfig.cmake
	@ls -1 $(BUILD)/packages/*.deb

# arm64 (NVIDIA Grace, docs/ARM64.md): the cross build in $(ARM64_BUILD) with Debian's toolchain
# (cmake/toolchain-aarch64-linux-gnu.cmake), its tests under qemu-user (the label "emulated": the
# unit tests and an e2e set), and gpud_<version>_arm64.deb.
$(ARM64_BUILD)/CMakeCache.txt: | deps-arm64
	cmake -S . -B $(ARM64_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_TOOLCHAIN_FILE=$(CURDIR)/cmake/toolchain-aarch64-linux-gnu.cmake $(CMAKE_FLAGS)

build-arm64: deps-arm64 $(ARM64_BUILD)/CMakeCache.txt
	cmake --build $(ARM64_BUILD) -j $(JOBS)

# Builds only what the emulated tests run (gpud, the fakes, the unit and e2e test programs).
test-arm64: deps-arm64 $(ARM64_BUILD)/CMakeCache.txt
	cmake --build $(ARM64_BUILD) -j $(JOBS) --target gpud gpud_unit_tests gpud_e2e_tests
	cd $(ARM64_BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900 --label-regex '^emulated$$'

# dpkg-shlibdeps computes Depends from the arm64 libraries' packages (libc6:arm64, ...).
deb-arm64: build-arm64
	cd $(ARM64_BUILD) && DEB_HOST_ARCH=arm64 cpack -G DEB --config CPackConfig.cmake
	@ls -1 $(ARM64_BUILD)/packages/*.deb

bench: deps-test build
	cmake --build $(BUILD) -j $(JOBS) --target gpud_bench fake_nvml
	./bench/run-bench.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(ARM64_BUILD) $(FUZZ_BUILD)

format:
	find src tests bench testing -name '*.cpp' -o -name '*.h' | xargs clang-format -i
