/* libFuzzer target: the sentence and clause splitters on arbitrary bytes.
 *
 *   make fuzz-split FUZZ_SECONDS=600
 *
 * The first input byte picks the language (de, en, zh, none) and the clause limit; the rest
 * is the text. Properties beyond "no crash, no leak, no undefined behaviour": spans are in
 * order, inside the text, not empty, with no ASCII blank at either end and only whitespace
 * (ASCII blanks, NUL, or bytes of multi-byte characters) between them; a clause longer than
 * the limit holds no ASCII space. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../text/sentences.h"

static int blank(unsigned char c) {
    return c == ' ' || (c >= '\t' && c <= '\r') || c == 0;
}

/* Abort (a libFuzzer finding) unless s[0..n) is a trimmed, ordered partition of t. */
static void check(const char *t, size_t len, const attend_span *s, int n) {
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        if (s[i].begin < at || s[i].end <= s[i].begin || s[i].end > len) abort();
        if (blank((unsigned char)t[s[i].begin]) || blank((unsigned char)t[s[i].end - 1])) abort();
        for (size_t j = at; j < s[i].begin; j++)
            if ((unsigned char)t[j] < 0x80 && !blank((unsigned char)t[j])) abort();
        at = s[i].end;
    }
    for (size_t j = at; j < len; j++)
        if ((unsigned char)t[j] < 0x80 && !blank((unsigned char)t[j])) abort();
}

static int fits(void *user, const char *s, size_t n) {
    (void)s;
    return n <= *(size_t *)user;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    static const char *const langs[] = {"de", "en", "zh", NULL};
    const char *lang = langs[data[0] & 3];
    size_t limit = (size_t)(data[0] >> 2) + 1;
    const char *t = (const char *)data + 1;
    size_t len = size - 1;
    attend_span *s;
    int n = attend_split_sentences(t, len, lang, &s, NULL, 0);
    if (n < 0) abort();
    check(t, len, s, n);
    free(s);
    n = attend_split_clauses(t, len, lang, fits, &limit, &s, NULL, 0);
    if (n < 0) abort();
    check(t, len, s, n);
    for (int i = 0; i < n; i++)
        if (s[i].end - s[i].begin > limit && memchr(t + s[i].begin, ' ', s[i].end - s[i].begin)) abort();
    free(s);
    return 0;
}
