# trit: `make` builds build/release/trit; `make test` runs the tests; `make asan` runs them
# under AddressSanitizer + UBSan; `make fuzz` runs the GGUF fuzzer; `make help` lists targets.
CC      ?= cc
MODE    ?= release
BUILD   ?= build/$(MODE)
SHARED  ?= ../shared
FUZZ_SECONDS ?= 60

WARN    := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter
CFLAGS_COMMON := -std=c11 -D_XOPEN_SOURCE=700 -D_DEFAULT_SOURCE $(WARN) -Iinclude -Isrc -MMD -MP
ifeq ($(MODE),asan)
  OPT := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all
else ifeq ($(MODE),debug)
  OPT := -O0 -g
else
  OPT := -O2 -g
endif
COMMIT  := $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
CFLAGS  := $(CFLAGS_COMMON) $(OPT) $(EXTRA_CFLAGS)
LDLIBS  := -ljansson -lutf8proc -lmicrohttpd -lm -lpthread

LIB_SRC  := $(wildcard src/*.c)
CLI_SRC  := $(wildcard cli/*.c)
SRV_SRC  := $(wildcard server/*.c)
TEST_SRC := $(wildcard tests/*.c)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/%.o)
SRV_OBJ  := $(SRV_SRC:%.c=$(BUILD)/%.o)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/%.o)

.PHONY: all test asan fuzz fuzz-request e2e bench-serve clean help
all: $(BUILD)/trit $(BUILD)/trit-tests

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# the build line of trit bench names the commit
$(BUILD)/cli/bench.o: CFLAGS += -DTRIT_BUILD_COMMIT='"$(COMMIT)"'

$(BUILD)/libtrit.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/trit: $(CLI_OBJ) $(SRV_OBJ) $(BUILD)/libtrit.a
	$(CC) $(OPT) -o $@ $^ $(LDLIBS)

$(BUILD)/trit-tests: $(TEST_OBJ) $(SRV_OBJ) $(BUILD)/libtrit.a
	$(CC) $(OPT) -o $@ $^ $(LDLIBS)

# Tests read ../shared and run the CLI binary; TEST= selects tests by substring.
test: all
	TRIT_SHARED=$(SHARED) TRIT_BIN=$(BUILD)/trit $(BUILD)/trit-tests $(TEST)

asan:
	$(MAKE) MODE=asan CC=clang test

# End to end: the official openai npm client (installed once into build/node) against trit serve
# on loopback.
NODE_DIR := build/node
OPENAI_VERSION := 6.49.0
$(NODE_DIR)/node_modules/openai/package.json:
	npm install --prefix $(NODE_DIR) --no-audit --no-fund --silent openai@$(OPENAI_VERSION)

e2e: all $(NODE_DIR)/node_modules/openai/package.json
	TRIT_BIN=$(BUILD)/trit TRIT_MODEL=$(SHARED)/data/models/stories260K.gguf OPENAI_DIR=$(NODE_DIR) \
		node --test tests/e2e/

# Load test of trit serve (not a timed test): aggregate tok/s for 1/2/4/8 streams, TTFT p50/p95.
BENCH_MODEL ?= $(SHARED)/data/models/stories260K.gguf
bench-serve: all
	TRIT_BIN=$(BUILD)/trit node bench/serve_load.mjs $(BENCH_MODEL)

# libFuzzer target for the GGUF reader, seeded with every GGUF under $(SHARED).
FUZZ_BIN := build/fuzz/fuzz_gguf
$(FUZZ_BIN): fuzz/fuzz_gguf.c $(LIB_SRC)
	@mkdir -p $(dir $@)
	clang $(CFLAGS_COMMON) -O1 -g -fsanitize=fuzzer,address,undefined -o $@ $^ $(LDLIBS)

# libFuzzer target for the server's request parsing, seeded with fuzz/request_seeds.
FUZZ_REQ_BIN := build/fuzz/fuzz_request
$(FUZZ_REQ_BIN): fuzz/fuzz_request.c $(SRV_SRC) $(LIB_SRC)
	@mkdir -p $(dir $@)
	clang $(CFLAGS_COMMON) -O1 -g -fsanitize=fuzzer,address,undefined -o $@ $^ $(LDLIBS)

fuzz: $(FUZZ_BIN) $(FUZZ_REQ_BIN)
	@mkdir -p build/fuzz/corpus build/fuzz/corpus_request
	find $(SHARED) -name '*.gguf' -size -8M -exec cp {} build/fuzz/corpus/ \;
	cp fuzz/request_seeds/* build/fuzz/corpus_request/
	$(FUZZ_BIN) -max_total_time=$(FUZZ_SECONDS) -max_len=1048576 -rss_limit_mb=2048 build/fuzz/corpus
	$(FUZZ_REQ_BIN) -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -rss_limit_mb=2048 build/fuzz/corpus_request

fuzz-request: $(FUZZ_REQ_BIN)
	@mkdir -p build/fuzz/corpus_request
	cp fuzz/request_seeds/* build/fuzz/corpus_request/
	$(FUZZ_REQ_BIN) -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -rss_limit_mb=2048 build/fuzz/corpus_request

clean:
	rm -rf build

help:
	@echo "make            build build/release/trit and the test binary"
	@echo "make test       run the tests (TEST=substring selects; SHARED=../shared)"
	@echo "make asan       build with clang ASan+UBSan and run the tests"
	@echo "make fuzz       fuzz the GGUF reader and the server's request parser for FUZZ_SECONDS each"
	@echo "make e2e        the openai npm client against trit serve (installs it into build/node)"
	@echo "make bench-serve  load-test trit serve (BENCH_MODEL=...)"
	@echo "make clean      remove build/"

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(SRV_OBJ:.o=.d) $(TEST_OBJ:.o=.d)
