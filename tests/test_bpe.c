/* tokenizer/bpe.c's API on hand-made models: what bpe_new refuses (bad merges, a token given
 * twice, no tokens, an added token that is not UTF-8), NULL and empty tokens, unknown ids in
 * decode, the unknown id on encode, HF's merge order where it differs from merging one pair
 * at a time, a pair listed twice, added tokens found whole, NUL bytes, the timestamp filter.
 * tests/test_bpe.py compares the tokenizer with two other implementations on real files. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "../tokenizer/bpe.h"
#include "check.h"

#define SP "\xc4\xa0" /* the byte-level alphabet's space, U+0120 */

/* a model of the given tokens (kinds: NULL or one per token) and merges; err filled */
static bpe_model *make(const char *const *tok, int n, const char *const *merges, int n_merges,
                       const unsigned char *kind, char *err) {
    return bpe_new(tok, n, merges, n_merges, kind, err, 200);
}

/* whether encoding text gives exactly the n ids */
static int encodes_to(const bpe_model *m, const char *text, size_t len, const int *want, int n) {
    int *ids, got, ok = bpe_encode(m, text, len, &ids, &got) == 0 && got == n;
    for (int i = 0; ok && i < n; i++) ok = ids[i] == want[i];
    free(ids);
    return ok;
}

/* whether decoding ids gives exactly want */
static int decodes_to(const bpe_model *m, const int *ids, int n, int skip, const char *want) {
    size_t len;
    char *text = bpe_decode(m, ids, n, skip, &len);
    int ok = text && len == strlen(want) && memcmp(text, want, len) == 0;
    free(text);
    return ok;
}

static void test_refused(void) {
    const char *tok[] = {"a", "b", "ab"};
    char err[200];
    const char *bad[][1] = {{"ab"}, {" b"}, {"a "}, {"a b c"}, {"a  b"}, {NULL}, {""}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bpe_model *m = make(tok, 3, bad[i], 1, NULL, err);
        CHECKF(!m && strstr(err, "merge 0"), "merge \"%s\": %s", bad[i][0] ? bad[i][0] : "(null)", err);
        bpe_free(m);
    }
    const char *twice[] = {"a", "b", "a"};
    CHECK(!make(twice, 3, NULL, 0, NULL, err) && strstr(err, "tokens 0 and 2"));
    CHECK(!make(tok, 0, NULL, 0, NULL, err) && err[0]);
    CHECK(!make(tok, 3, NULL, -1, NULL, err) && err[0]);
    const char *broken[] = {"a", "<|\xff|>"};
    const unsigned char added[] = {0, BPE_SPECIAL};
    CHECK(!make(broken, 2, NULL, 0, added, err) && strstr(err, "UTF-8"));
    bpe_model *m = make(broken, 2, NULL, 0, NULL, err); /* a normal token may be any bytes */
    CHECKF(m != NULL, "%s", err);
    bpe_free(m);
}

static void test_lookup_and_holes(void) {
    const char *tok[] = {"a", NULL, "", "b", "<|x|>"};
    const unsigned char kind[] = {0, 0, 0, 0, BPE_ADDED};
    char err[200];
    bpe_model *m = make(tok, 5, NULL, 0, kind, err);
    CHECKF(m != NULL, "%s", err);
    if (!m) return;
    CHECK(bpe_size(m) == 5 && bpe_token_id(m, "b") == 3 && bpe_token_id(m, "<|x|>") == 4);
    CHECK(bpe_token_id(m, "") == -1 && bpe_token_id(m, NULL) == -1 && bpe_token_id(m, "c") == -1);
    CHECK(bpe_token(m, 1) == NULL && bpe_token(m, 2) == NULL && bpe_token(m, -1) == NULL && bpe_token(m, 5) == NULL);
    CHECK(strcmp(bpe_token(m, 0), "a") == 0 && bpe_token_kind(m, 4) == BPE_ADDED && bpe_token_kind(m, 1) == -1);
    int ids[] = {0, 1, -7, 2, INT_MAX, 3, 5, INT_MIN, 4, 4};
    CHECK(decodes_to(m, ids, 10, 0, "ab<|x|><|x|>"));
    CHECK(decodes_to(m, ids, 10, 1, "ab<|x|><|x|>")); /* BPE_ADDED: not skipped */
    CHECK(decodes_to(m, NULL, 0, 0, ""));
    bpe_free(m);
}

static void test_unknown_on_encode(void) {
    const char *tok[] = {"a", "b", "<|endoftext|>"};
    char err[200];
    bpe_model *m = make(tok, 3, NULL, 0, NULL, err);
    if (!m) return;
    int want[] = {0, 2, 1}; /* 'c' has no token: HF's unk_token <|endoftext|> */
    CHECK(encodes_to(m, "acb", 3, want, 3));
    CHECK(bpe_set_unk(m, 3) == -1 && bpe_set_unk(m, -2) == -1 && encodes_to(m, "acb", 3, want, 3));
    CHECK(bpe_set_unk(m, -1) == 0);
    int *ids = (int *)1, n = 5;
    CHECK(bpe_encode(m, "acb", 3, &ids, &n) == -2 && ids == NULL && n == 0);
    CHECK(bpe_encode(m, "", 0, &ids, &n) == 0 && ids == NULL && n == 0);
    bpe_free(m);
}

/* HF merges every occurrence of the best pair in one pass before looking again: "a b a b"
 * with ranks "ab a" < "a b" gives "ab ab"; merging one pair at a time would give "aba b". */
static void test_merge_order(void) {
    const char *tok[] = {"a", "b", "c", "ab", "aba", "bc"};
    const char *merges[] = {"ab a", "a b"};
    char err[200];
    bpe_model *m = make(tok, 6, merges, 2, NULL, err);
    CHECKF(m != NULL, "%s", err);
    if (!m) return;
    int want[] = {3, 3};
    CHECK(encodes_to(m, "abab", 4, want, 2));
    CHECK(encodes_to(m, "aba", 3, (int[]){4}, 1)); /* (a, b), then (ab, a) */
    bpe_free(m);
    /* a pair listed twice takes its last rank: (b, c) at 1 beats (a, b) at 2 */
    const char *twice[] = {"a b", "b c", "a b"};
    m = make(tok, 6, twice, 3, NULL, err);
    CHECKF(m != NULL, "%s", err);
    if (!m) return;
    CHECK(encodes_to(m, "abc", 3, (int[]){0, 5}, 2));
    bpe_free(m);
}

/* Added tokens found whole (longest first), NUL inside text, decode around them. */
static void test_added_tokens(void) {
    const char *tok[] = {"a", SP, "<|e|>", "<|en|>", "<|endoftext|>", "\xc4\x80" /* byte 0 */, "<", "|", ">", "e", "n"};
    const unsigned char kind[] = {0, 0, BPE_SPECIAL, BPE_SPECIAL, BPE_SPECIAL, 0, 0, 0, 0, 0, 0};
    char err[200];
    bpe_model *m = bpe_new(tok, 11, NULL, 0, kind, err, sizeof err);
    CHECKF(m != NULL, "%s", err);
    if (!m) return;
    CHECK(encodes_to(m, "a<|en|><|endoftext|> a", 22, (int[]){0, 3, 4, 1, 0}, 5));
    CHECK(encodes_to(m, "<|en|<|e|>", 10, (int[]){6, 7, 9, 10, 7, 2}, 6));
    CHECK(encodes_to(m, "a\0a", 3, (int[]){0, 5, 0}, 3));
    int ids[] = {0, 3, 1, 0, 4};
    CHECK(decodes_to(m, ids, 5, 0, "a<|en|> a<|endoftext|>"));
    CHECK(decodes_to(m, ids, 5, 1, "a a"));
    bpe_free(m);
}

/* Token bytes: the alphabet mapped back, a lone byte as U+FFFD, a character outside the
 * alphabet kept as it is; the Whisper timestamp filter in place. */
static void test_bytes_and_timestamps(void) {
    const char *tok[] = {"\xc3\xa9", "\xe2\x82\xac", "\xc3\x83", "\xc2\xa9", "<|t|>"};
    const unsigned char kind[] = {0, 0, 0, 0, BPE_ADDED};
    char err[200];
    bpe_model *m = bpe_new(tok, 5, NULL, 0, kind, err, sizeof err);
    if (!m) return;
    CHECK(decodes_to(m, (int[]){0}, 1, 0, "\xef\xbf\xbd"));            /* byte 0xE9 alone */
    CHECK(decodes_to(m, (int[]){1}, 1, 0, "\xe2\x82\xac"));            /* not in the alphabet */
    CHECK(decodes_to(m, (int[]){2, 3}, 2, 0, "\xc3\xa9"));             /* 0xC3 0xA9: "é" */
    CHECK(decodes_to(m, (int[]){2, 4, 3}, 3, 0, "\xef\xbf\xbd<|t|>\xef\xbf\xbd"));
    bpe_free(m);
    char text[] = "a<|0.00|>b<|12.5|><|1.|><|\xd9\xa3.\xd9\xa4|>c<|1.0|>";
    size_t n = bpe_strip_timestamps(text, strlen(text));
    CHECKF(n == strlen("ab<|1.|>c") && strcmp(text, "ab<|1.|>c") == 0, "%zu %s", n, text);
}

int main(void) {
    test_refused();
    test_lookup_and_holes();
    test_unknown_on_encode();
    test_merge_order();
    test_added_tokens();
    test_bytes_and_timestamps();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
