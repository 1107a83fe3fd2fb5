/* libFuzzer target: tokenize, translate and detokenize arbitrary bytes on a tiny model.
 *
 *   make fuzz-translate FUZZ_SECONDS=600   (model: tests/data/tiny-v1.gguf, or $FUZZ_MODEL)
 *
 * The first input byte picks what else runs: bit 0 force-decodes the input's second half as
 * a target translation, bit 1 feeds the bytes to the detokenizer as ids, bit 2 asks for
 * scores and attention. Properties beyond "no crash, no leak, no undefined behaviour": every
 * line gives a result with 1..max_positions source ids, or a one-line error. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/attend.h"
#include "../model/translate.h"

#ifndef FUZZ_MODEL_DEFAULT
#define FUZZ_MODEL_DEFAULT "tests/data/tiny-v1.gguf"
#endif

static attend_model *model;
static s2s_model *inner; /* the same file loaded for the internal text functions */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *path = getenv("FUZZ_MODEL");
    if (!path) path = FUZZ_MODEL_DEFAULT;
    char err[512];
    model = attend_load(path, err, sizeof err);
    inner = model ? s2s_load(path, err, sizeof err) : NULL;
    if (!model || !inner) {
        fprintf(stderr, "fuzz_translate: %s: %s\n", path, err);
        exit(1);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0 || size > 4096) return 0;
    const int mode = data[0];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    char *target = NULL;
    if (mode & 1) { /* second half as a NUL-terminated target sentence */
        size_t half = len / 2;
        target = malloc(len - half + 1);
        if (!target) return 0;
        memcpy(target, text + half, len - half);
        target[len - half] = 0;
        len = half;
    }
    /* a private copy so ASan sees reads past the line's end */
    char *line = malloc(len ? len : 1);
    if (!line) return 0;
    memcpy(line, text, len);
    attend_params p = attend_default_params();
    p.threads = 1;
    p.max_length = 12;
    p.want_scores = p.want_attention = mode & 4 ? 1 : 0;
    /* bits 3-5: the search (greedy, beams with an n-best list and processors, sampling) */
    const int search = (mode >> 3) & 7;
    if (search >= 1 && search <= 4) {
        p.num_beams = search + 1;
        p.n_best = search;
        p.early_stopping = ATTEND_EARLY_MODEL + search % 4;
        p.set_min_length = search == 3, p.min_length = 4;
        p.set_no_repeat_ngram_size = search == 4, p.no_repeat_ngram_size = 2;
        p.repetition_penalty = search == 2 ? 1.3f : 0;
    } else if (search >= 5) {
        p.sample = 1;
        p.n_best = search - 4;
        p.top_k = search == 6 ? 3 : 0;
        p.top_p = search == 7 ? 0.5f : 0;
        p.seed = size;
    }
    const char *lines[1] = {line};
    const char *targets[1] = {target};
    attend_result r;
    char err[512];
    if (attend_translate(model, lines, &len, 1, target ? targets : NULL, &p, &r, err, sizeof err) == 0) {
        if (!r.text || r.n_src < 1 || r.n_src > attend_get_config(model)->max_position_embeddings) abort();
        if (r.n_best < 1 || !r.nbest || r.nbest[0].n != r.n_tgt) abort();
        attend_result_free(&r);
    } else if (!err[0] || strchr(err, '\n')) {
        abort();
    }
    if (mode & 2) { /* the detokenizer on arbitrary ids, in and out of range */
        int n = (int)(size / 2);
        int *ids = malloc(sizeof(int) * (size_t)(n + 1));
        if (ids) {
            for (int i = 0; i < n; i++) ids[i] = (int)((data[2 * i] | data[2 * i + 1] << 8) % 600) - 50;
            free(s2s_decode_text(inner, ids, n));
            free(ids);
        }
    }
    free(line);
    free(target);
    return 0;
}
