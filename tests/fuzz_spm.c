/* libFuzzer target: SentencePiece model bytes as they come from a checkpoint.
 *
 *   make fuzz-spm FUZZ_SECONDS=600   (seeds: the tiny model's two SentencePiece models and a
 *                                     freshly trained nmt_nfkc one, with a real charsmap)
 *
 * spm_load checks the normalization maps before libsentencepiece parses the model; a model
 * that loads must then encode and decode text without crashing. The library itself is not
 * instrumented: what this finds there are crashes, not silent out-of-bounds reads. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tokenizer/spm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char err[512] = "";
    spm_model *sp = spm_load(data, size, err, sizeof err);
    if (!sp) {
        if (!err[0] || strchr(err, '\n')) abort();
        return 0;
    }
    static const char *texts[] = {"Hallo Welt, wie geht es dir?", "\xef\xbc\xa1\xef\xac\x81 \xc3\xa4",
                                  "\xff\xfe kaputt", "", "   ", ("a\tb\x01" "c")};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        spm_pieces p;
        if (spm_encode(sp, texts[i], strlen(texts[i]), &p, err, sizeof err) == 0) {
            free(spm_decode(sp, (const char *const *)p.piece, p.n));
            spm_pieces_free(&p);
        }
    }
    spm_free(sp);
    return 0;
}
