# attend — build, test, install. `make help` lists the targets.
PYTHON  ?= /usr/bin/python3
CC      ?= cc
CXX     ?= g++
PREFIX  ?= /usr/local
BUILD   ?= build
OPT     ?= -O2
CFLAGS  ?= $(OPT) -g
CXXFLAGS?= $(OPT) -g
ALL_CFLAGS   = $(CFLAGS) -std=c11 -D_GNU_SOURCE -Wall -Wextra -fopenmp -fPIC
ALL_CXXFLAGS = $(CXXFLAGS) -std=c++17 -Wall -Wextra -fPIC
LDLIBS  = -fopenmp -lsentencepiece -lz -lm

LIB_C   = engine/kernels.c engine/kernels_avx2.c engine/kernels_avx512.c engine/isa.c weights/gguf.c tokenizer/vocab.c \
          model/marian.c model/translate.c model/text.c model/api.c model/align.c
LIB_CXX = tokenizer/spm.cc
CLI_C   = tools/attend.c tools/cli.c tools/cmd_translate.c tools/cmd_info.c tools/cmd_bench.c tools/npz.c \
          tools/cmd_align.c tools/heatmap.c
LIB_OBJ = $(LIB_C:%.c=$(BUILD)/%.o) $(LIB_CXX:%.cc=$(BUILD)/%.o)
CLI_OBJ = $(CLI_C:%.c=$(BUILD)/%.o)
HEADERS = $(wildcard engine/*.h weights/*.h tokenizer/*.h model/*.h tools/*.h)

# Debian packages the build and the tests need.
DEB_PKGS = gcc g++ make libsentencepiece-dev zlib1g-dev python3-torch python3-numpy \
           python3-sentencepiece unzip

.PHONY: all deps test test-c test-py install clean help

all: $(BUILD)/attend $(BUILD)/libattend.a $(BUILD)/libattend.so

help:
	@echo "make            build build/attend, build/libattend.a and .so"
	@echo "make deps       install missing Debian packages (apt-get; root)"
	@echo "make test       install what is missing, build, run every test"
	@echo "make install    PREFIX=$(PREFIX): binary, library, header, shipped model"

$(BUILD)/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/%.o: %.cc $(HEADERS)
	@mkdir -p $(dir $@)
	$(CXX) $(ALL_CXXFLAGS) -c $< -o $@

$(BUILD)/libattend.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/libattend.so: $(LIB_OBJ)
	$(CXX) -shared -o $@ $^ $(LDLIBS)

$(BUILD)/attend: $(CLI_OBJ) $(BUILD)/libattend.a
	$(CXX) -o $@ $(CLI_OBJ) $(BUILD)/libattend.a $(LDLIBS)

# Install missing packages; without root, print the command to run.
deps:
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "missing packages; run: sudo apt-get install -y$$missing"; exit 1; \
	  fi; \
	fi

# --- tests ---------------------------------------------------------------------------
TEST_BINS = $(BUILD)/tests/test_kernels $(BUILD)/tests/test_align

$(BUILD)/tests/%: tests/%.c $(BUILD)/libattend.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(BUILD)/libattend.a -lstdc++ $(LDLIBS)

test: deps
	$(MAKE) all $(TEST_BINS)
	$(MAKE) test-c test-py

test-c: $(TEST_BINS)
	@for t in $(TEST_BINS); do echo "== $$t"; $$t || exit 1; done

test-py: $(BUILD)/attend
	$(PYTHON) tests/run_python_tests.py

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include \
	  $(DESTDIR)$(PREFIX)/share/attend
	install -m 755 $(BUILD)/attend $(DESTDIR)$(PREFIX)/bin/attend
	install -m 644 $(BUILD)/libattend.a $(BUILD)/libattend.so $(DESTDIR)$(PREFIX)/lib/
	install -m 644 model/attend.h $(DESTDIR)$(PREFIX)/include/attend.h
	if [ -f models/de-en.gguf ]; then install -m 644 models/de-en.gguf $(DESTDIR)$(PREFIX)/share/attend/; fi

clean:
	rm -rf $(BUILD)
