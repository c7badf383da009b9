# trit: `make` builds build/release/trit; `make test` runs the tests; `make asan` runs them
# under AddressSanitizer + UBSan; `make fuzz` runs the reader fuzzers; `make help` lists targets.
CC      ?= cc
MODE    ?= release
BUILD   ?= build/$(MODE)
SHARED  ?= ../shared
FUZZ_SECONDS ?= 60
# each fuzz run's length: FUZZ_SECONDS of time (make fuzz), or FUZZ_RUNS inputs (make fuzz-long)
FUZZ_LIMIT ?= -max_total_time=$(FUZZ_SECONDS)
FUZZ_RUNS ?= 10000000

WARN    := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter
CFLAGS_COMMON := -std=c11 -D_XOPEN_SOURCE=700 -D_DEFAULT_SOURCE $(WARN) -MMD -MP
# The library, the tests, the fuzzers and the benchmarks see the internal headers under src/;
# cli/ and server/ see include/ alone (below), so an internal include there fails to build.
INC     := -Iinclude -Isrc
ifeq ($(MODE),asan)
  OPT := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
else ifeq ($(MODE),debug)
  OPT := -O0 -g
else
  OPT := -O2 -g
endif
COMMIT  := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
CFLAGS  := $(CFLAGS_COMMON) $(OPT) $(EXTRA_CFLAGS)
LDLIBS   = -ljansson -lutf8proc -lmicrohttpd -lcurl -lnettle -lm -lpthread $(LDLIBS_VK)
# line editing for trit chat; the library does not need it
CLI_LDLIBS := -ledit

LIB_SRC  := $(shell find src -name '*.c' | sort)
# The Vulkan backend, when the loader's headers and glslc are here (VULKAN=0 leaves it out): its
# shaders compiled to SPIR-V and embedded as one generated table; the loader is opened at run time.
VULKAN   ?= $(shell pkg-config --exists vulkan 2>/dev/null && command -v glslc >/dev/null 2>&1 && echo 1)
VK_DIR   := src/backend/vulkan
ifeq ($(VULKAN),1)
VK_MATMUL := F32 F16 BF16 Q8_0 Q1_0 Q2_0 PQ2_0 TQ2_0 TQ1_0 PTQ1_0
VK_MATMUL_Q8 := Q8_0 Q1_0 Q2_0 PQ2_0 TQ2_0 TQ1_0 PTQ1_0
VK_SPV    := $(VK_MATMUL:%=$(BUILD)/spirv/matmul_%.spv) $(VK_MATMUL_Q8:%=$(BUILD)/spirv/matmul_q8_%.spv) \
             $(VK_MATMUL_Q8:%=$(BUILD)/spirv/matmul_q8dot_%.spv) $(BUILD)/spirv/quant_act_Q8_0.spv \
             $(BUILD)/spirv/quant_act_Q8_K.spv \
             $(patsubst $(VK_DIR)/shaders/%.comp,$(BUILD)/spirv/%.spv,$(filter-out %/matmul.comp %/quant_act.comp,$(wildcard $(VK_DIR)/shaders/*.comp)))
EXTRA_DEFS += -DTRIT_VULKAN
LDLIBS_VK := -ldl
else
LIB_SRC  := $(filter-out $(VK_DIR)/%,$(LIB_SRC))
VK_TEST_OUT := tests/test_vulkan.c
endif
CLI_SRC  := $(wildcard cli/*.c)
SRV_SRC  := $(wildcard server/*.c)
TEST_SRC := $(filter-out $(VK_TEST_OUT),$(wildcard tests/*.c))
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
ifeq ($(VULKAN),1)
LIB_OBJ  += $(BUILD)/spirv/table.o
endif
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
SRV_OBJ  := $(SRV_SRC:%.c=$(BUILD)/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/%.o)
$(CLI_OBJ) $(SRV_OBJ): INC := -Iinclude

.PHONY: all test format-check asan fuzz fuzz-long e2e conformance clean help bench bench-vk bench-kernels bench-grammar bench-attn bench-serve bench-burst arm-test
all: $(BUILD)/trit $(BUILD)/trit-tests

# Each kernel variant file gets its own ISA flags and nothing else does, so one binary never runs
# an instruction the CPU lacks (src/kernels/select.c picks at run time). Off-target folders
# compile empty.
MACHINE := $(shell $(CC) -dumpmachine)
ifneq ($(findstring x86_64,$(MACHINE)),)
X86 := $(BUILD)/src/kernels/x86
$(X86)/avx2.o:        ISA := -mavx2 -mfma -mf16c
$(X86)/attn_avx2.o:   ISA := -mavx2 -mfma -mf16c
$(X86)/avxvnni.o:     ISA := -mavx2 -mfma -mf16c -mavxvnni
$(X86)/avx512.o:      ISA := -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512vnni
$(X86)/attn_avx512.o: ISA := -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512vnni
$(X86)/amx.o:         ISA := -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mgfni -mamx-tile -mamx-int8
endif
ifneq ($(findstring aarch64,$(MACHINE)),)
$(BUILD)/src/kernels/arm/%.o: ISA := -march=armv8.2-a+dotprod
endif

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(INC) $(ISA) $(EXTRA_DEFS) -c $< -o $@

# matmul.comp once per weight type, and for int8 inputs with and without the integer dot product;
# quant_act.comp once per activation type
$(BUILD)/spirv/matmul_%.spv: $(VK_DIR)/shaders/matmul.comp
	@mkdir -p $(dir $@)
	glslc --target-env=vulkan1.1 -O -DT_$* -fshader-stage=compute $< -o $@
$(BUILD)/spirv/matmul_q8_%.spv: $(VK_DIR)/shaders/matmul.comp
	@mkdir -p $(dir $@)
	glslc --target-env=vulkan1.1 -O -DT_$* -DACT_Q8 -fshader-stage=compute $< -o $@
$(BUILD)/spirv/matmul_q8dot_%.spv: $(VK_DIR)/shaders/matmul.comp
	@mkdir -p $(dir $@)
	glslc --target-env=vulkan1.1 -O -DT_$* -DACT_Q8 -DINT_DOT -fshader-stage=compute $< -o $@
$(BUILD)/spirv/quant_act_%.spv: $(VK_DIR)/shaders/quant_act.comp
	@mkdir -p $(dir $@)
	glslc --target-env=vulkan1.1 -O -D$* -fshader-stage=compute $< -o $@

# the other shaders, one variant each
$(BUILD)/spirv/%.spv: $(VK_DIR)/shaders/%.comp
	@mkdir -p $(dir $@)
	glslc --target-env=vulkan1.1 -O -fshader-stage=compute $< -o $@

$(BUILD)/spirv/table.c: $(VK_SPV) $(VK_DIR)/shaders/embed.py
	python3 $(VK_DIR)/shaders/embed.py $@ $(VK_SPV)

$(BUILD)/spirv/table.o: $(BUILD)/spirv/table.c
	$(CC) $(CFLAGS) $(INC) -c $< -o $@

# the build line of trit bench names the commit
$(BUILD)/cli/bench.o: CFLAGS += -DTRIT_BUILD_COMMIT='"$(COMMIT)"'
$(BUILD)/cli/bench.o: $(wildcard .git/HEAD .git/refs/heads/main)

# libtrit.a, the public library: its objects linked into one relocatable object in which objcopy
# makes every global symbol but trit_* local, so the library exports the API of include/ and
# nothing else (tests/test_cli.c checks). The tests, fuzzers and benchmarks call internal functions:
# they link libtrit-internal.a, the same objects with every symbol visible.
OBJCOPY ?= objcopy
$(BUILD)/libtrit.a: $(LIB_OBJ)
	@rm -f $@ $(BUILD)/libtrit.o
	$(LD) -r -o $(BUILD)/libtrit.o $^
	$(OBJCOPY) -w --keep-global-symbol='trit_*' $(BUILD)/libtrit.o
	ar rcs $@ $(BUILD)/libtrit.o

$(BUILD)/libtrit-internal.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/trit: $(CLI_OBJ) $(SRV_OBJ) $(BUILD)/libtrit.a
	$(CC) $(OPT) -o $@ $^ $(LDLIBS) $(CLI_LDLIBS)

# the serve flag table (cli/serve_flags.c) is tested directly
$(BUILD)/trit-tests: $(TEST_OBJ) $(SRV_OBJ) $(BUILD)/cli/serve_flags.o $(BUILD)/cli/args.o $(BUILD)/libtrit-internal.a
	$(CC) $(OPT) -o $@ $^ $(LDLIBS)

# Tests read ../shared and run the CLI binary; TEST= selects tests by substring.
test: all
	python3 tests/scripts/check_layers.py $(BUILD)
	TRIT_SHARED=$(SHARED) TRIT_BIN=$(BUILD)/trit $(BUILD)/trit-tests $(TEST)

# The tree follows .clang-format (clang-format 14).
FORMAT_SRC = $(shell find src cli server tests fuzz bench include -name '*.[ch]')
format-check:
	@clang-format --dry-run --Werror $(FORMAT_SRC) && echo "format: $(words $(FORMAT_SRC)) files follow .clang-format"

asan:
	$(MAKE) MODE=asan CC=clang test

# End to end: the official openai and @anthropic-ai/sdk npm clients (installed once into build/node)
# against trit serve on loopback.
NODE_DIR := build/node
OPENAI_VERSION := 6.49.0
ANTHROPIC_VERSION := 1.15.0
$(NODE_DIR)/.installed-$(OPENAI_VERSION)-$(ANTHROPIC_VERSION):
	npm install --prefix $(NODE_DIR) --no-audit --no-fund --silent openai@$(OPENAI_VERSION) \
		@anthropic-ai/sdk@$(ANTHROPIC_VERSION)
	touch $@

e2e: all $(NODE_DIR)/.installed-$(OPENAI_VERSION)-$(ANTHROPIC_VERSION)
	TRIT_BIN=$(BUILD)/trit TRIT_MODEL=$(SHARED)/data/models/stories260K.gguf NODE_DIR=$(NODE_DIR) \
		TRIT_CACHE_DIR=$(abspath $(BUILD))/repack-cache node --test tests/e2e/

# llama.cpp's own server test-suite against trit serve (../shared/conformance): the whole default
# selection must pass.
CONFORMANCE_WANT := 212
conformance: $(BUILD)/trit
	@$(SHARED)/conformance/run.sh "$(BUILD)/trit serve" | tee $(BUILD)/conformance.log; \
	 passed=$$(tail -1 $(BUILD)/conformance.log | sed -n 's/^\([0-9]*\) passed.*/\1/p'); \
	 [ "$${passed:-0}" -ge $(CONFORMANCE_WANT) ] || { echo "conformance: $${passed:-0} passed, want $(CONFORMANCE_WANT)"; exit 1; }

# Load test of trit serve (not a timed test): aggregate tok/s for 1/2/4/8 streams, TTFT p50/p95.
BENCH_MODEL ?= $(SHARED)/data/models/stories260K.gguf
bench-serve: all
	TRIT_BIN=$(BUILD)/trit node bench/serve_load.mjs $(BENCH_MODEL)
bench-burst: all
	BENCH_MODE=burst TRIT_BIN=$(BUILD)/trit node bench/serve_load.mjs $(BENCH_MODEL)

# The fuzz targets link a library built by clang with the sanitizers and libFuzzer's coverage
# (per-file ISA flags kept, so the kernel files build as in every other build; the kernels
# and the backend go uncounted, fuzz/coverage_ignore.txt).
FUZZ_BUILD := build/fuzzlib
FUZZ_CC    := clang $(CFLAGS_COMMON) $(INC) -O1 -g -fsanitize=fuzzer,address,undefined
.PHONY: fuzz-lib
fuzz-lib:
	$(MAKE) BUILD=$(FUZZ_BUILD) CC=clang \
		OPT="-O1 -g -fsanitize=fuzzer-no-link,address,undefined -fsanitize-coverage-ignorelist=fuzz/coverage_ignore.txt" \
		$(FUZZ_BUILD)/libtrit-internal.a $(SRV_SRC:%.c=$(FUZZ_BUILD)/%.o)

# Every target is fuzz/fuzz_NAME.c linked with that library and the server's objects (kept after
# a run, for reproducing a finding).
.PRECIOUS: build/fuzz/fuzz_%
build/fuzz/fuzz_%: fuzz/fuzz_%.c fuzz-lib
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -o $@ $< $(SRV_SRC:%.c=$(FUZZ_BUILD)/%.o) $(FUZZ_BUILD)/libtrit-internal.a $(LDLIBS)

# `make fuzz-NAME` runs one target: FUZZ_SEED_NAME puts its seeds into build/fuzz/corpus_NAME
# (fuzz/NAME_seeds/ by default; the GGUF seeds are cut from the golden models), FUZZ_FLAGS_NAME are its own flags (-max_len=65536 by default).
# The output goes to build/fuzz/NAME.log, an input that fails to build/fuzz/ (crash-*, timeout-*,
# slow-unit-*); the line printed at the end gives the inputs run and the coverage reached
# (docs/reliability.md has the figures).
FUZZ_TARGETS := gguf safetensors repack_cache request http hf_json tokenizer grammar json_schema toolcall jinja
FUZZ_SEED_gguf         = python3 fuzz/gguf_seeds.py $(SHARED) build/fuzz/corpus_gguf
FUZZ_FLAGS_repack_cache = -max_len=16384
FUZZ_SEED_json_schema  = python3 -c 'import json; [open("build/fuzz/corpus_json_schema/case%d.json" % i, "w").write(c["schema"]) \
	for i, c in enumerate(json.load(open("tests/data/json_schema/llama_cases.json")))]'
FUZZ_SEED_tokenizer    = cp $(SHARED)/data/vocab/*.inp build/fuzz/corpus_tokenizer/
FUZZ_FLAGS_tokenizer   = -max_len=1024
FUZZ_SEED_jinja        = python3 -c 'import json; [open("build/fuzz/corpus_jinja/seed%d" % i, "w").write(c["template"]) \
	for i, c in enumerate(json.load(open("tests/data/chat/jinja_templates.json")))]; \
	open("build/fuzz/corpus_jinja/qwen3", "w").write(json.load(open("$(SHARED)/data/tokenizers/qwen3/tokenizer_config.json"))["chat_template"])'
FUZZ_FLAGS_jinja       = -max_len=65536 -dict=fuzz/jinja.dict
# (ASan keeps memory for each thread that ended, about 2 KB for a bare thread, and the server
# runs one per connection: a long run grows by 0.3-0.6 KB an input; the release server's RSS
# stays flat over the same inputs)
FUZZ_FLAGS_http        = -max_len=65536 -dict=fuzz/http.dict -detect_leaks=0 -rss_limit_mb=8192

fuzz: $(FUZZ_TARGETS:%=fuzz-%)

# Every target to FUZZ_RUNS inputs.
fuzz-long:
	$(MAKE) fuzz FUZZ_LIMIT=-runs=$(FUZZ_RUNS)

fuzz-%: build/fuzz/fuzz_%
	@mkdir -p build/fuzz/corpus_$*
	$(if $(FUZZ_SEED_$*),$(FUZZ_SEED_$*),cp fuzz/$*_seeds/* build/fuzz/corpus_$*/)
	TRIT_SHARED=$(SHARED) $< $(FUZZ_LIMIT) -print_final_stats=1 -rss_limit_mb=2048 -timeout=10 -artifact_prefix=build/fuzz/ \
		$(or $(FUZZ_FLAGS_$*),-max_len=65536) build/fuzz/corpus_$* > build/fuzz/$*.log 2>&1 || \
		{ tail -40 build/fuzz/$*.log; exit 1; }
	@grep -E '^#[0-9]+[[:space:]]+DONE' build/fuzz/$*.log | tail -1 | sed 's/^/$*: /'

# The kernels suite alone, cross-built for aarch64 (no jansson there) and run under qemu with a
# CPU that has dotprod, then on one without (which must fall back to scalar). Needs
# gcc-aarch64-linux-gnu and qemu-user (.ci/run installs them).
ARM_CC  ?= aarch64-linux-gnu-gcc
ARM_SRC := src/kernels/scalar.c src/kernels/select.c src/kernels/attn.c src/kernels/arm/neon.c src/types/quants.c src/types/quants_ternary.c src/types/repack.c \
           src/types/types.c src/base/util.c \
           tests/test_kernels.c tests/main.c
arm-test:
	$(MAKE) BUILD=build/arm CC=$(ARM_CC) build/arm/kernels-tests
	QEMU_LD_PREFIX=/usr/aarch64-linux-gnu qemu-aarch64 -cpu max build/arm/kernels-tests
	QEMU_LD_PREFIX=/usr/aarch64-linux-gnu qemu-aarch64 -cpu cortex-a53 build/arm/kernels-tests kernels/variants

build/arm/kernels-tests: $(ARM_SRC:%.c=build/arm/%.o)
	$(CC) $(OPT) -o $@ $^ -lm -lpthread

build/arm/tests/main.o: EXTRA_DEFS := -D'SUITES(X)=X(kernels)'

# GB/s of weight streaming per type and variant, next to a plain streaming-read reference.
bench-kernels: $(BUILD)/kernels-bench
	$(BUILD)/kernels-bench

$(BUILD)/kernels-bench: $(BUILD)/bench/kernels_bench.o $(BUILD)/libtrit-internal.a
	$(CC) $(OPT) -o $@ $^ $(LDLIBS)

# the GBNF token mask per step on a 151k-token vocabulary, against the per-token test
bench-grammar: $(BUILD)/grammar-bench
	$(BUILD)/grammar-bench $(SHARED)/data/vocab/ggml-vocab-qwen2.gguf

$(BUILD)/grammar-bench: $(BUILD)/bench/grammar_bench.o $(BUILD)/libtrit-internal.a
	$(CC) $(OPT) -o $@ $^ $(LDLIBS)

# decode attention on an f16 cache per code path, against the AVX2 one
bench-attn: $(BUILD)/attn-bench
	$(BUILD)/attn-bench

$(BUILD)/attn-bench: $(BUILD)/bench/attn_bench.o $(BUILD)/libtrit-internal.a
	$(CC) $(OPT) -o $@ $^ $(LDLIBS)

# the Vulkan device's read bandwidth and each weight type's matrix-vector kernel against it
bench-vk: $(BUILD)/vk-bench
	$(BUILD)/vk-bench

$(BUILD)/vk-bench: $(BUILD)/bench/vk_bench.o $(BUILD)/libtrit-internal.a
	$(CC) $(OPT) -o $@ $^ $(LDLIBS)

$(BUILD)/bandwidth: $(BUILD)/bench/bandwidth.o
	$(CC) $(OPT) -o $@ $^ -lpthread

# trit vs llama.cpp on synthesised models of real shapes (minutes to an hour; see bench/compare.sh)
bench: all $(BUILD)/bandwidth
	bench/compare.sh

clean:
	rm -rf build

help:
	@echo "make            build build/release/trit and the test binary"
	@echo "make test       run the tests (TEST=substring selects; SHARED=../shared)"
	@echo "make asan       build with clang ASan+UBSan and run the tests"
	@echo "make format-check  check that the sources follow .clang-format"
	@echo "make fuzz       run every fuzz target for FUZZ_SECONDS; make fuzz-NAME one of them ($(FUZZ_TARGETS))"
	@echo "make fuzz-long  run every fuzz target to FUZZ_RUNS inputs (10 million)"
	@echo "make e2e        the openai npm client against trit serve (installs it into build/node)"
	@echo "make conformance  llama.cpp's server test-suite against trit serve (../shared/conformance)"
	@echo "make bench-serve  load-test trit serve (BENCH_MODEL=...)"
	@echo "make bench-burst  8 requests at once against trit serve, and BENCH_VS=llama-server beside it"
	@echo "make bench-vk     the Vulkan device's read bandwidth and matrix-vector kernels (bench/gpu.sh runs it on a GPU)"
	@echo "make arm-test   cross-build the kernels tests for aarch64 and run them under qemu"
	@echo "make bench-kernels  GB/s of the matmul kernels per type and variant"
	@echo "make bench-attn  decode attention (f16, q8_0, q4_0 caches) per code path against the AVX2 one"
	@echo "make bench-grammar  the GBNF token mask per step on a 151k-token vocabulary"
	@echo "make bench      trit vs llama.cpp against the measured bandwidth roofline (bench/compare.sh)"
	@echo "make clean      remove build/"

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(SRV_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(wildcard $(BUILD)/bench/*.d)
