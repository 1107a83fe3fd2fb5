/* Tests of model/token_times.c and model/token_words.c (their sources included, to reach the
 * DTW, the median filter and the UTF-8 decoder): DTW paths worked out by hand, the median
 * filter against a qsort version, token times equal to tools/reference_whisper_timing.py
 * on fixed matrices (the expected times printed by that reference for the same arrays:
 * token_timestamps(a, num_frames, width)[1:]), edge cases, and HF's word merges.
 *
 * Run: build/tests/test_token_times. With --times or --words it reads cases on standard
 * input and prints the results instead (tests/test_whisper_reference.py compares them with
 * the reference on random cases):
 *   --times: "heads rows frames audio_frames width precision" then heads*rows*frames floats;
 *            prints the rows' times.
 *   --words: "n unicode_split" then n lines "hex-bytes start end" (a lone "-" for no bytes);
 *            prints one line per word: "first n start end hex-text". */
#include "../model/token_times.c"
#include "../model/token_words.c"

#include <math.h>

#include "check.h"

/* ---------------------------------------------------------------------------------------
 * DTW and the median filter */

/* m = [[1, 0, 0], [0, 1, 1]]: cumulative costs -1 at (1,1); (2,1) from above (-1);
 * (2,2) with three equal neighbours goes left; so row 1 is first reached at column 0. */
static void test_dtw_by_hand(void) {
    const float m[] = {1, 0, 0, 0, 1, 1};
    int first[2] = {9, 9};
    CHECK(dtw_first_columns(m, 2, 3, first) == 0);
    CHECKF(first[0] == 0 && first[1] == 0, "first %d %d, want 0 0", first[0], first[1]);
    /* m = [[1, 0], [-1, 0]]: at (2,2) the diagonal (-1) ties the upper cell (-1) and the
     * left (0) is larger: HF's rule takes the left cell anyway (no strict minimum) */
    const float t[] = {1, 0, -1, 0};
    CHECK(dtw_first_columns(t, 2, 2, first) == 0);
    CHECKF(first[0] == 0 && first[1] == 0, "tie: first %d %d, want 0 0", first[0], first[1]);
    /* a diagonal of 5s: costs -5 at (1,1), (2,1), (1,2); (2,2) sees three -5s and goes left
     * (-10); (3,2) takes the -10 above; (2,3) the -10 on its left; (3,3) ties again, left.
     * Back from (3,3): left, up, left, up, diagonal: rows first reached at 0, 0, 1. */
    const float d[] = {5, 0, 0, 0, 5, 0, 0, 0, 5};
    int f3[3];
    CHECK(dtw_first_columns(d, 3, 3, f3) == 0);
    CHECKF(f3[0] == 0 && f3[1] == 0 && f3[2] == 1, "diagonal: %d %d %d", f3[0], f3[1], f3[2]);
}

static int compare_torch(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return sorts_before(x, y) ? -1 : sorts_before(y, x) ? 1 : 0;
}

/* The median filter, written the long way: pad by reflection into a new row, qsort each
 * window, take the middle. */
static void naive_median(const float *x, int n, int width, float *y) {
    const int pad = width / 2;
    if (n <= pad) {
        memcpy(y, x, sizeof(float) * (size_t)n);
        return;
    }
    float padded[64], win[16];
    for (int i = 0; i < n + 2 * pad; i++) {
        int k = i - pad;
        padded[i] = x[k < 0 ? -k : k >= n ? 2 * n - 2 - k : k];
    }
    for (int i = 0; i < n; i++) {
        memcpy(win, padded + i, sizeof(float) * (size_t)width);
        qsort(win, (size_t)width, sizeof(float), compare_torch);
        y[i] = win[pad];
    }
}

static void test_median(void) {
    unsigned seed = 12345;
    int same = 1;
    for (int n = 1; n <= 20; n++)
        for (int width = 1; width <= 9; width += 2)
            for (int rep = 0; rep < 5; rep++) {
                float x[20], a[20], b[20], win[9];
                for (int i = 0; i < n; i++) {
                    seed = seed * 1103515245u + 12345u;
                    x[i] = (float)((seed >> 16) % 7) - 3.0f; /* few values: many ties */
                    if (rep == 4 && i % 5 == 2) x[i] = NAN;
                }
                median_row(x, n, width, win, a);
                naive_median(x, n, width, b);
                for (int i = 0; i < n; i++) same &= (isnan(a[i]) && isnan(b[i])) || a[i] == b[i];
            }
    CHECKF(same, "median filter differs from the qsort version");
    /* NaN sorts last: windows {NaN, 1, NaN}, {1, NaN, 2}, {NaN, 2, NaN} (edges reflected) */
    const float x[] = {1, NAN, 2};
    float win[3], y[3];
    median_row(x, 3, 3, win, y);
    CHECKF(isnan(y[0]) && y[1] == 2 && isnan(y[2]), "NaN order: %g %g %g", y[0], y[1], y[2]);
}

/* ---------------------------------------------------------------------------------------
 * Token times */

static int times_equal(const double *got, const double *want, int n) {
    for (int i = 0; i < n; i++)
        if (fabs(got[i] - want[i]) > 1e-9) return 0;
    return 1;
}

/* Fixed random matrices (4 decimals), the reference's times for each. */
static void test_reference_cases(void) {
    static const float a[] = {
        0.6251f, 0.8972f, 0.7757f, 0.2252f, 0.3002f, 0.8736f, 0.0053f, 0.8212f, 0.7971f, 0.4679f, 0.3030f, 0.2784f,
        0.2549f, 0.4451f, 0.5045f, 0.5535f, 0.9955f, 0.7927f, 0.6222f, 0.9890f, 0.2153f, 0.1602f, 0.6125f, 0.0439f,
        0.0357f, 0.5149f, 0.4662f, 0.9172f, 0.6292f, 0.5141f, 0.4969f, 0.2475f, 0.0118f, 0.1924f, 0.6920f, 0.2006f,
        0.3695f, 0.0037f, 0.8300f, 0.1545f, 0.2676f, 0.8803f, 0.5098f, 0.8472f, 0.6397f, 0.7418f, 0.0915f, 0.5411f,
        0.5078f, 0.8713f, 0.3613f, 0.5982f, 0.0593f, 0.3876f, 0.3230f, 0.1502f, 0.8163f, 0.3794f, 0.9787f, 0.5900f,
        0.6051f, 0.6380f, 0.6765f, 0.1508f, 0.4403f, 0.2396f, 0.4025f, 0.0967f, 0.9678f, 0.2150f, 0.6718f, 0.3004f,
        0.8741f, 0.6622f, 0.1316f, 0.8451f, 0.9449f, 0.9039f, 0.5697f, 0.1455f, 0.1925f, 0.9279f, 0.5523f, 0.1806f,
        0.8841f, 0.6416f, 0.5697f, 0.3763f, 0.4110f, 0.2395f, 0.0381f, 0.8762f, 0.4677f, 0.5476f, 0.3222f, 0.7513f};
    static const float c[] = {0.7691f, 0.0676f, 0.4734f, 0.0326f, 0.3138f, 0.3122f, 0.7197f, 0.4550f, 0.0568f,
                              0.9954f, 0.8887f, 0.9163f, 0.2466f, 0.3941f, 0.2272f, 0.1249f, 0.0330f, 0.5033f,
                              0.1231f, 0.1763f, 0.8605f, 0.4842f, 0.1837f, 0.6699f, 0.2659f, 0.5269f, 0.2830f};
    double got[5];
    char err[256];
    const double want_a[] = {0.0, 0.06, 0.06, 0.12};
    CHECK(token_times(a, 2, 4, 12, 0, 3, 0.02, got, err, sizeof err) == 0);
    CHECKF(times_equal(got, want_a, 4), "case A: %g %g %g %g", got[0], got[1], got[2], got[3]);
    const double want_c[] = {0.0, 0.0, 0.08};
    CHECK(token_times(c, 1, 3, 9, 0, 7, 0.02, got, err, sizeof err) == 0);
    CHECKF(times_equal(got, want_c, 3), "case C: %g %g %g", got[0], got[1], got[2]);
    /* case A read with audio_frames 6: the reference with num_frames 12 */
    const double want_crop[] = {0.0, 0.06, 0.06, 0.10};
    CHECK(token_times(a, 2, 4, 12, 6, 3, 0.02, got, err, sizeof err) == 0);
    CHECKF(times_equal(got, want_crop, 4), "case A cropped: %g %g %g %g", got[0], got[1], got[2], got[3]);
}

static void test_edges(void) {
    double got[4];
    char err[256];
    const float one_frame[] = {0.2f, 0.5f, 0.3f}; /* 3 rows, 1 frame: all at 0 */
    CHECK(token_times(one_frame, 1, 3, 1, 0, 7, 0.02, got, err, sizeof err) == 0);
    CHECKF(got[0] == 0 && got[1] == 0 && got[2] == 0, "one frame: %g %g %g", got[0], got[1], got[2]);
    const float one_row[] = {0.2f, 0.5f, 0.3f, 0.9f}; /* std 0 -> NaN, as HF; the row starts at 0 */
    CHECK(token_times(one_row, 1, 1, 4, 0, 7, 0.02, got, err, sizeof err) == 0);
    CHECKF(got[0] == 0, "one row: %g", got[0]);
    float equal[2 * 3 * 5]; /* every row the same: NaN everywhere, HF's path runs up column 0 */
    const float row[5] = {0.1f, 0.7f, 0.2f, 0.5f, 0.3f};
    for (int i = 0; i < 6; i++) memcpy(equal + 5 * i, row, sizeof row);
    CHECK(token_times(equal, 2, 3, 5, 0, 3, 0.02, got, err, sizeof err) == 0);
    CHECKF(got[0] == -0.02 && got[1] == -0.02 && got[2] == -0.02, "equal rows: %g %g %g", got[0], got[1], got[2]);
    const float flat[] = {0.1f, 0.1f, 0.1f, 0.1f, 0.3f, 0.3f, 0.3f, 0.3f}; /* ties along each row */
    CHECK(token_times(flat, 1, 2, 4, 0, 3, 0.02, got, err, sizeof err) == 0);
    CHECKF(got[0] == 0 && got[1] == 0, "flat rows: %g %g", got[0], got[1]);
    float bad[] = {0.1f, 0.2f, NAN, 0.4f};
    CHECK(token_times(bad, 1, 2, 2, 0, 7, 0.02, got, err, sizeof err) == -1 && strstr(err, "not a finite number"));
    CHECKF(strstr(err, "row 1, frame 0") != NULL, "%s", err);
    CHECK(token_times(bad, 1, 1, 2, 0, 7, 0.02, got, err, sizeof err) == 0); /* the NaN lies in no row read */
    float cropped[] = {0.1f, 0.2f, NAN, 0.4f, 0.5f, INFINITY};          /* nor in a column cropped away */
    CHECK(token_times(cropped, 1, 2, 3, 2, 7, 0.02, got, err, sizeof err) == 0);
    CHECK(token_times(one_row, 1, 1, 4, 0, 4, 0.02, got, err, sizeof err) == -1 && strstr(err, "odd"));
    CHECK(token_times(one_row, 1, 0, 4, 0, 7, 0.02, got, err, sizeof err) == -1 && strstr(err, "at least 1"));
    CHECK(token_times(one_row, 1, 1, 4, 0, 7, 0.0, got, err, sizeof err) == -1 && strstr(err, "precision"));
}

/* ---------------------------------------------------------------------------------------
 * Words */

/* Words of the tokens (NUL-terminated strings), token i timed [i, i + 1) seconds; checks
 * their texts (joined with '|') and token ranges ("first+n ..."). */
static void check_words(const char *what, const char *const *tok, int n, int unicode_split, const char *texts,
                        const char *ranges) {
    int len[16];
    double start[16], end[16];
    float prob[16];
    for (int i = 0; i < n; i++) len[i] = (int)strlen(tok[i]), start[i] = i, end[i] = i + 1, prob[i] = 0.5f;
    timed_word *w;
    char err[256], got[512] = "", got_ranges[256] = "";
    const int k = token_words(tok, len, n, start, end, prob, unicode_split, &w, err, sizeof err);
    CHECKF(k >= 0, "%s: %s", what, err);
    for (int i = 0; i < k; i++) {
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", i ? "|" : "", w[i].text);
        snprintf(got_ranges + strlen(got_ranges), sizeof got_ranges - strlen(got_ranges), "%s%d+%d", i ? " " : "",
                 w[i].first, w[i].n);
        CHECKF(w[i].start == w[i].first && w[i].end == w[i].first + w[i].n, "%s: word %d times %g..%g", what, i,
               w[i].start, w[i].end);
        CHECKF(w[i].probability == 0.5f, "%s: probability %g", what, w[i].probability);
    }
    CHECKF(!strcmp(got, texts), "%s: words '%s', want '%s'", what, got, texts);
    CHECKF(!strcmp(got_ranges, ranges), "%s: tokens '%s', want '%s'", what, got_ranges, ranges);
    timed_words_free(w, k);
}

static void test_words(void) {
    const char *hello[] = {" Hello", ",", " wor", "ld", "!"};
    check_words("appended punctuation", hello, 5, 0, " Hello,| world!", "0+2 2+3");
    const char *paren[] = {" (", " Hi", ")", " there"};
    check_words("prepended punctuation", paren, 4, 0, " ( Hi)| there", "0+3 3+1");
    const char *quote[] = {" \"", "Hi", "\""}; /* "Hi" joins the quote's group, which opened a word */
    check_words("quote", quote, 3, 0, " \"Hi\"", "0+3");
    /* 你好 (e4 bd a0, e5 a5 bd) cut across three tokens: one group of whole characters */
    const char *chars[] = {"\xe4\xbd", "\xa0\xe5", "\xa5\xbd"};
    check_words("split characters", chars, 3, 1, "\xe4\xbd\xa0\xe5\xa5\xbd", "0+3");
    const char *mixed[] = {"\xe4\xbd\xa0", "\xe5\xa5\xbd", "\xe3\x80\x82"}; /* 你 好 。 */
    check_words("unicode split", mixed, 3, 1, "\xe4\xbd\xa0|\xe5\xa5\xbd\xe3\x80\x82", "0+1 1+2");
    const char *bad[] = {" a", "\xff", "b"}; /* an invalid byte closes its own group */
    check_words("invalid byte", bad, 3, 0, " a\xef\xbf\xbd" "b", "0+3");
    /* a character cut by the end is U+FFFD in the whole text too: its group closes */
    const char *open_end[] = {" a", " b", "\xe4\xbd"};
    check_words("incomplete end", open_end, 3, 0, " a| b\xef\xbf\xbd", "0+1 1+2");
    const char *space[] = {" one", " ", " two"}; /* a lone space strips to "", in any list */
    check_words("lone space", space, 3, 0, " one|  two", "0+1 1+2");
    const char *none[] = {"x"};
    check_words("no tokens", none, 0, 0, "", "");
    CHECK(token_words_unicode_language("ja") && token_words_unicode_language("yue"));
    CHECK(!token_words_unicode_language("en") && !token_words_unicode_language(NULL));
    int neg = -1;
    timed_word *w;
    char err[128];
    CHECK(token_words(none, &neg, 1, NULL, NULL, NULL, 0, &w, err, sizeof err) == -1 && strstr(err, "negative"));
    /* U+00E9 as a bad two-byte start then 'a': Python's decoder gives U+FFFD then 'a' */
    uint32_t cp[4];
    CHECK(decode_utf8((const unsigned char *)"\xc3" "a", 2, cp) == 2 && cp[0] == REPLACEMENT && cp[1] == 'a');
    CHECK(decode_utf8((const unsigned char *)"\xe0\x80", 2, cp) == 2 && cp[0] == REPLACEMENT && cp[1] == REPLACEMENT);
    CHECK(decode_utf8((const unsigned char *)"\xf0\x9f\x98", 3, cp) == 1 && cp[0] == REPLACEMENT);
    CHECK(decode_utf8((const unsigned char *)"\xf0\x9f\x98\x80", 4, cp) == 1 && cp[0] == 0x1f600);
}

/* ---------------------------------------------------------------------------------------
 * Standard-input modes (for the Python comparison) */

static int run_times(void) {
    int heads, rows, frames, audio, width;
    double precision;
    if (scanf("%d %d %d %d %d %lf", &heads, &rows, &frames, &audio, &width, &precision) != 6) return 2;
    if (heads < 1 || rows < 1 || frames < 1 || (long)heads * rows * frames > 50000000) return 2;
    float *a = malloc(sizeof(float) * (size_t)heads * rows * frames);
    double *t = malloc(sizeof(double) * (size_t)rows);
    for (size_t i = 0; a && i < (size_t)heads * rows * frames; i++)
        if (scanf("%f", &a[i]) != 1) return 2;
    char err[256];
    if (!a || !t || token_times(a, heads, rows, frames, audio, width, precision, t, err, sizeof err)) {
        printf("error: %s\n", a && t ? err : "out of memory");
        return 1;
    }
    for (int r = 0; r < rows; r++) printf("%s%.17g", r ? " " : "", t[r]);
    putchar('\n');
    free(a);
    free(t);
    return 0;
}

static int unhex(const char *s, char *out) {
    int n = 0;
    if (!strcmp(s, "-")) return 0;
    for (unsigned v; s[0] && s[1] && sscanf(s, "%2x", &v) == 1; s += 2) out[n++] = (char)v;
    return n;
}

static int run_words(void) {
    int n, unicode_split;
    if (scanf("%d %d", &n, &unicode_split) != 2 || n < 0 || n > 100000) return 2;
    char **tok = calloc((size_t)n + 1, sizeof *tok), hex[1024];
    int *len = calloc((size_t)n + 1, sizeof *len);
    double *start = calloc((size_t)n + 1, sizeof *start), *end = calloc((size_t)n + 1, sizeof *end);
    for (int i = 0; i < n; i++) {
        tok[i] = malloc(sizeof hex / 2);
        if (scanf("%1023s %lf %lf", hex, &start[i], &end[i]) != 3) return 2;
        len[i] = unhex(hex, tok[i]);
    }
    timed_word *w;
    char err[256];
    const int k = token_words((const char *const *)tok, len, n, start, end, NULL, unicode_split, &w, err, sizeof err);
    for (int i = 0; i < k; i++) {
        printf("%d %d %.17g %.17g ", w[i].first, w[i].n, w[i].start, w[i].end);
        for (const unsigned char *p = (const unsigned char *)w[i].text; *p; p++) printf("%02x", *p);
        putchar('\n');
    }
    timed_words_free(w, k);
    for (int i = 0; i < n; i++) free(tok[i]);
    free(tok), free(len), free(start), free(end);
    return k < 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--times")) return run_times();
    if (argc > 1 && !strcmp(argv[1], "--words")) return run_words();
    test_dtw_by_hand();
    test_median();
    test_reference_cases();
    test_edges();
    test_words();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
