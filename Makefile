# Ferry's entry points. `make demo` and `make test` work on a fresh Debian
# machine: both install what is missing first.
BUILD ?= build
JOBS ?= $(shell nproc)
CUDA_PATH ?= /usr/local/cuda
export PATH := $(PATH):$(CUDA_PATH)/bin

.PHONY: deps deps-fuzz deps-bench model build python demo test test-run test-gpu sanitize asan asan-build asan-run tsan tsan-build tsan-run fuzz fuzz-build fuzz-run bench-tcp bench-http bench-route bench-route-peers format clean

deps:
	bash scripts/install-deps.sh

# The same, plus clang and libFuzzer's runtime (only `make fuzz` needs them).
deps-fuzz:
	bash scripts/install-deps.sh --fuzz

# The same, plus wrk and nginx (the HTTP benchmark's client and baseline).
deps-bench:
	bash scripts/install-deps.sh --bench

# all-MiniLM-L6-v2 for the embedding tests and benchmarks (scripts/fetch-model.sh).
model: deps
	bash scripts/fetch-model.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(BUILD) -j$(JOBS)

# The Python package, installed as a user would (`pip install ./python`) into a
# virtual environment of the build's own, with NumPy and pytest for its tests.
# The build folder persists, so a second install compiles only what changed.
PYVENV := $(BUILD)/venv
python: deps
	test -x $(PYVENV)/bin/python || python3 -m venv $(PYVENV)
	$(PYVENV)/bin/pip install -q numpy pytest
	$(PYVENV)/bin/pip install -q -C build-dir=$(abspath $(BUILD))/python-wheel ./python
	# NIXL itself, for the DOCA_DMA_PROXY plugin's tests: its libraries and
	# plugins only (--no-deps: torch is imported only for tensors).
	$(PYVENV)/bin/pip install -q --no-deps nixl-cu12==1.5.1

demo: build
	$(BUILD)/apps/ferry/ferry demo

# The whole suite; GPU tests exit 77 (reported as skipped) where there is no GPU.
# Each suite is a build target and a run target (test-run, asan-run, tsan-run,
# fuzz-run), so that CI (.ci/run) can run one configuration's tests while the
# next one builds; `make test` and the others do both, in that order.
test: build model python
	$(MAKE) --no-print-directory test-run
test-run:
	cd $(BUILD) && ctest --output-on-failure -j1
	FERRY_BIN=$(BUILD)/apps/ferry/ferry FERRY_NIXL_PLUGIN_DIR=$(abspath $(BUILD))/nixl-plugins \
	  $(PYVENV)/bin/python -m pytest -q tests/python

test-gpu: build
	cd $(BUILD) && ctest --output-on-failure -L gpu

# ASan+UBSan over the whole suite; TSan over the lock-free code, the store's
# stress test and the agent's concurrent sessions.
sanitize: asan tsan

# Debug (assertions on) at -O1: at -O0 the checksums and copies of the end-to-end
# tests ran ~30x slower than the release build, most of CI's time. -g1 (line
# tables: sanitizer reports still name file and line) compiles ~28% faster than
# -g. Built with clang (which make fuzz needs anyway): with these sanitizers on,
# clang compiles the suite in a little over half of GCC's time, and its UBSan
# checks more (pointer arithmetic on null, for one); the main build keeps GCC.
asan: asan-build model
	$(MAKE) --no-print-directory asan-run
asan-build: deps-fuzz
	cmake -S . -B $(BUILD)-asan -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-g1 -O1" -DFERRY_ENABLE_CUDA=OFF \
	  -DFERRY_BUILD_BENCH=OFF -DFERRY_SANITIZE=address,undefined
	cmake --build $(BUILD)-asan -j$(JOBS)
asan-run:
	cd $(BUILD)-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  FERRY_FUZZ_MESSAGES=500000 ctest --output-on-failure -j1 -LE gpu

# TSan: the lock-free code (label lockfree), and (label tsan, registered in TSan
# builds only) the store's stress test, the file tier's helper threads, the data
# mover and the agent's concurrent sessions, a TSan-built `ferry agent` included
# (tests/xfer/CMakeLists.txt), the server threads under a user's framing, a
# TSan-built `ferry http` (tests/http/), the deferred-response mailbox, the embedding batcher and
# `ferry http --model` (tests/infer/service/), the NIXL plugin's engine under
# several threads (tests/xfer/nixl/), and the redis-cluster tier under a reshard
# and a failover (tests/xfer/store/redis/). Built with clang, as make asan is:
# these targets compile in about four fifths of GCC's time with TSan on.
tsan: tsan-build model
	$(MAKE) --no-print-directory tsan-run
tsan-build: deps-fuzz
	cmake -S . -B $(BUILD)-tsan -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DFERRY_ENABLE_CUDA=OFF -DFERRY_BUILD_BENCH=OFF -DFERRY_SANITIZE=thread
	cmake --build $(BUILD)-tsan -j$(JOBS) --target slot_ring_fuzz_test comm_list_test packet_worker_test spin_mutex_test arena_control_test route_ring_fuzz_test \
	  xfer_store_stress_test xfer_file_tier_test xfer_mover_test xfer_e2e_test offload_framing_test deferred_mailbox_test http_e2e_test embedding_service_test embed_e2e_test ferry \
	  nixl_engine_threads_test xfer_store_redis_cluster_test
tsan-run:
	cd $(BUILD)-tsan && TSAN_OPTIONS=halt_on_error=1 FERRY_FUZZ_MESSAGES=1000000 ctest --output-on-failure -L 'lockfree|tsan'

# libFuzzer over every parser of peer input (fuzz/; docs/security.md, "Fuzzing"),
# built with clang, ASan and UBSan. Each target runs from its seed corpus
# (fuzz/corpus/TARGET) for FUZZ_SECONDS or FUZZ_RUNS inputs, whichever ends
# first; inputs that found new coverage go to $(BUILD)-fuzz/corpus/TARGET, a
# crashing input to $(BUILD)-fuzz/artifacts. Fails at the first crash, leak,
# broken property or input slower than 10 s. A libFuzzer run is one process on
# one core, so FUZZ_JOBS targets run at once (default: one per core), each
# still for its full FUZZ_SECONDS; -O prints each target's lines together.
FUZZ_TARGETS := wire_fuzz control_link_fuzz metrics_request_fuzz xfer_protocol_fuzz json_flags_fuzz resp_fuzz redis_info_fuzz cluster_slots_fuzz http_fuzz infer_api_fuzz safetensors_fuzz tokenizer_fuzz route_run_fuzz
FUZZ_SECONDS ?= 30
FUZZ_RUNS ?= 1000000
FUZZ_JOBS ?= $(JOBS)
fuzz: fuzz-build
	$(MAKE) --no-print-directory fuzz-run
fuzz-build: deps-fuzz
	cmake -S . -B $(BUILD)-fuzz -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DFERRY_BUILD_FUZZ=ON -DFERRY_BUILD_TESTS=OFF -DFERRY_BUILD_BENCH=OFF -DFERRY_ENABLE_CUDA=OFF
	cmake --build $(BUILD)-fuzz -j$(JOBS) --target fuzz_targets
fuzz-run:
	mkdir -p $(BUILD)-fuzz/artifacts
	$(MAKE) --no-print-directory -j$(FUZZ_JOBS) -O $(addprefix fuzz-run-,$(FUZZ_TARGETS))
fuzz-run-%:
	@mkdir -p $(BUILD)-fuzz/corpus/$*
	@echo "== fuzz $*: $(FUZZ_SECONDS) s or $(FUZZ_RUNS) inputs"
	@$(BUILD)-fuzz/fuzz/$* -max_total_time=$(FUZZ_SECONDS) -runs=$(FUZZ_RUNS) -timeout=10 \
	  -artifact_prefix=$(BUILD)-fuzz/artifacts/$*- $(BUILD)-fuzz/corpus/$* fuzz/corpus/$* \
	  > $(BUILD)-fuzz/$*.log 2>&1 \
	  || { tail -n 80 $(BUILD)-fuzz/$*.log; echo "fuzz: $* failed (log: $(BUILD)-fuzz/$*.log)"; exit 1; }
	@grep -E '^Done|DONE' $(BUILD)-fuzz/$*.log | tail -n 2

bench-tcp: build
	python3 bench/tcp_bench.py --build-dir $(BUILD)

# ferry http against nginx, wrk on the same machine; on a machine with more cores
# give them apart (bench/http_bench.py --help).
bench-http: build deps-bench
	python3 bench/http_bench.py --build-dir $(BUILD)

# Message routing: every app in every mode (small sizes; scripts/device/route-device.sh runs the full one).
bench-route: build
	python3 bench/route/route_bench.py --build-dir $(BUILD) --out $(BUILD)/route-results

# Ferry's route beside YGM and bale's conveyors (docs/bench/route-peers.md): their
# apps are built where the configure got -DFERRY_YGM_INCLUDE / -DFERRY_CONVEY_PREFIX;
# missing ones are skipped with a message.
bench-route-peers: build
	python3 bench/route/peers_bench.py --build $(BUILD) --json-out $(BUILD)/route-peers.json

format:
	clang-format -i $$(git ls-files '*.h' '*.cpp' '*.cu' '*.cuh')

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-tsan $(BUILD)-fuzz
