/* libFuzzer target: the byte-level BPE tokenizer (tokenizer/bpe.c) on a model and a text
 * both taken from the input.
 *
 *   make fuzz-bpe FUZZ_SECONDS=600   (seeds: tests/data/fuzz/bpe)
 *
 * Input: merge lines ("left right", '\n' between them) up to the first NUL, then the text.
 * The model: the 256 byte characters, <|endoftext|> (special), <|0.00|> (added, not special),
 * and each merge's concatenation, so every piece has an id. bpe_new may refuse the merges
 * (with a one-line message); a model it makes must encode the text, and a valid UTF-8 text
 * must decode back to itself. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../tokenizer/bpe.h"

#define MAX_MERGES 64

/* GPT-2's character for byte b, as UTF-8 into out (3 bytes), NUL-terminated */
static void byte_char(int b, char *out) {
    int keep = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    unsigned cp = (unsigned)b;
    if (!keep) {
        cp = 0x100;
        for (int c = 0; c < b; c++)
            cp += !((c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) || (c >= 0xae && c <= 0xff));
    }
    if (cp < 0x80) out[0] = (char)cp, out[1] = 0;
    else out[0] = (char)(0xc0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3f)), out[2] = 0;
}

static int valid_utf8(const char *t, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)t[i];
        size_t k = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        if (!k || i + k > n) return 0;
        for (size_t j = 1; j < k; j++)
            if (((unsigned char)t[i + j] & 0xc0) != 0x80) return 0;
        if ((c == 0xe0 && (unsigned char)t[i + 1] < 0xa0) || (c == 0xed && (unsigned char)t[i + 1] > 0x9f) ||
            (c == 0xf0 && (unsigned char)t[i + 1] < 0x90) || (c == 0xf4 && (unsigned char)t[i + 1] > 0x8f))
            return 0;
        i += k;
    }
    return 1;
}

/* tokens[n] = s unless some token already is s */
static int add_unique(char **tokens, int n, const char *s) {
    for (int i = 0; i < n; i++)
        if (strcmp(tokens[i], s) == 0) return n;
    tokens[n] = strdup(s);
    return n + 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *zero = memchr(data, 0, size);
    size_t head = zero ? (size_t)(zero - data) : 0, at = zero ? head + 1 : 0;
    char *spec = strndup((const char *)data, head), *save = NULL;
    char *merges[MAX_MERGES], *tokens[258 + MAX_MERGES], ch[4];
    unsigned char kind[258 + MAX_MERGES] = {0};
    int n_merges = 0, n_tokens = 0;
    for (int b = 0; b < 256; b++) byte_char(b, ch), n_tokens = add_unique(tokens, n_tokens, ch);
    n_tokens = add_unique(tokens, n_tokens, "<|endoftext|>");
    kind[n_tokens - 1] = BPE_SPECIAL;
    n_tokens = add_unique(tokens, n_tokens, "<|0.00|>");
    kind[n_tokens - 1] = BPE_ADDED;
    for (char *line = strtok_r(spec, "\n", &save); line && n_merges < MAX_MERGES; line = strtok_r(NULL, "\n", &save)) {
        merges[n_merges++] = line;
        char joined[256];
        size_t n = 0;
        for (const char *p = line; *p && n < sizeof joined - 1; p++)
            if (*p != ' ') joined[n++] = *p;
        joined[n] = 0;
        if (n) n_tokens = add_unique(tokens, n_tokens, joined);
    }
    char err[256] = "";
    bpe_model *m = bpe_new((const char *const *)tokens, n_tokens, (const char *const *)merges, n_merges, kind, err,
                           sizeof err);
    if (!m && (!err[0] || strchr(err, '\n'))) abort();
    const char *text = (const char *)data + at;
    size_t len = size - at;
    int *ids, n_ids;
    if (m && bpe_encode(m, text, len, &ids, &n_ids) == 0) {
        size_t out_len;
        char *back = bpe_decode(m, ids, n_ids, 0, &out_len);
        if (!back) abort();
        if (valid_utf8(text, len) && (out_len != len || memcmp(back, text, len) != 0)) abort();
        free(back);
        free(bpe_whisper_decode(m, ids, n_ids, 1, 0, 1, &out_len));
        free(ids);
    } else if (m) {
        abort(); /* every piece has an id: encode cannot fail but for memory */
    }
    bpe_free(m);
    for (int i = 0; i < n_tokens; i++) free(tokens[i]);
    free(spec);
    return 0;
}
