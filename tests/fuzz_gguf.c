/* libFuzzer target: the checkpoint loader on arbitrary bytes.
 *
 *   make fuzz-gguf FUZZ_SECONDS=600       (corpus in build-fuzz/corpus/gguf, seeds: tests/data)
 *
 * Runs the whole load path on the buffer (GGUF container, config keys, tensor binding and
 * shapes, vocabularies, SentencePiece models), then verify, and when a model loads, one
 * translation with it. Properties beyond "no crash": a refused file has a non-empty
 * one-line message; a loaded file's tensors lie inside the buffer. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/translate.h"

static void check_message(const char *err) {
    if (!err[0] || strchr(err, '\n')) {
        fprintf(stderr, "bad error message: '%s'\n", err);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512] = "";
    /* a private copy: its end is exactly the end of the "file" for ASan */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    s2s_model *m = s2s_load_buffer(buf, size, err, sizeof err);
    if (!m) {
        check_message(err);
        free(buf);
        return 0;
    }
    for (uint64_t i = 0; i < gguf_tensor_count(m->file); i++) {
        const gguf_tensor *t = gguf_tensor_at(m->file, i);
        const uint8_t *p = t->data;
        if (p < buf || p + t->nbytes > buf + size) abort();
    }
    err[0] = 0;
    if (s2s_verify(m, err, sizeof err)) check_message(err);
    /* odd sizes translate with packed weights, as attend_load does; even ones row-major */
    if ((size & 1) && s2s_pack(m, err, sizeof err)) check_message(err);
    /* the model loaded: its tokenizer and weights must survive a translation */
    const char *text = "Hallo Welt, wie geht es dir?";
    int *ids = NULL, n = 0, trunc = 0;
    char **pieces = NULL;
    if (s2s_encode_text(m, text, strlen(text), &ids, &n, &pieces, &trunc, err, sizeof err) == 0) {
        s2s_source src = {ids, n, NULL, 0};
        s2s_opts o = {.max_length = 8, .want_scores = 1, .want_attention = 1};
        s2s_output out;
        at_set_threads(1);
        if (s2s_translate_ids(m, &src, 1, &o, &out, err, sizeof err) == 0) {
            char *s = s2s_decode_text(m, out.ids, out.n);
            free(s);
            s2s_output_free(&out);
        }
        for (int i = 0; i < n; i++) free(pieces[i]);
        free(pieces);
        free(ids);
    }
    s2s_free(m);
    free(buf);
    return 0;
}
