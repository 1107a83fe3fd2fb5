/* libFuzzer target: markup_parse and markup_render on arbitrary bytes.
 *
 *   make fuzz-markup FUZZ_SECONDS=600
 *
 * The first input byte's bit 0 reads the rest as a whole document instead of a fragment;
 * bit 1 links each segment's word i to its word n - 1 - i instead of to itself, so every tag
 * moves. Properties beyond "no crash, no leak, no undefined behaviour": the render is
 * balanced HTML (tests/markup_check.h), every segment's text is there again when the
 * identity render is parsed, non-space characters in order. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "markup_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    const int document = data[0] & 1, reverse = (data[0] >> 1) & 1;
    char err[128];
    markup_doc *d = markup_parse((const char *)data + 1, size - 1, document, err, sizeof err);
    if (!d) abort();
    char *out = markup_render_linked(d, reverse);
    if (!out) abort();
    const char *bad = markup_balance_error(out, strlen(out));
    if (bad) {
        fprintf(stderr, "unbalanced: %s\n%s\n", bad, out);
        abort();
    }
    if (!reverse) {
        markup_doc *again = markup_parse(out, strlen(out), document, err, sizeof err);
        if (!again) abort();
        char *a = markup_nonspace(d), *b = markup_nonspace(again);
        if (strcmp(a, b)) {
            fprintf(stderr, "text changed:\n%s\nbecame\n%s\nin %s\n", a, b, out);
            abort();
        }
        free(a), free(b), markup_free(again);
    }
    free(out);
    markup_free(d);
    return 0;
}
