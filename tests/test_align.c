/* Unit tests of model/align.c on hand-made matrices with known answers: view parsing and
 * reduction (last:0, penultimate:avg, shift, all:avg, explicit lists), word merging at "▁",
 * argmax hard alignment with </s> excluded, word links and Pharaoh text, and the links of
 * two directions together.
 * Run: build/tests/test_align (prints "N passed, 0 failed"; exit status 1 on failure). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/align.h"

#include "check.h"

static int near(float a, float b) { return fabsf(a - b) < 1e-6f; }

/* ---------------------------------------------------------------------------------------
 * A cross-attention tensor [L=3][H=2][T=3][S=2] where entry (l,h,t,s) is recognisable:
 * row t of head (l,h) puts weight w = 0.1*(l*2+h) + 0.05*t on source 0 and 1-w on 1. */

enum { L = 3, H = 2, T = 3, S = 2 };
static float X[L][H][T][S];

static void fill(void) {
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                float w = 0.1f * (l * 2 + h) + 0.05f * t;
                X[l][h][t][0] = w;
                X[l][h][t][1] = 1 - w;
            }
}

static void reduce(const char *spec, float *out) {
    attend_view v;
    char err[256];
    int rc = attend_view_parse(spec, &v, err, sizeof err);
    CHECK(rc == 0);
    if (rc) fprintf(stderr, "  %s: %s\n", spec, err);
    rc = attend_view_reduce(&v, &X[0][0][0][0], L, H, T, S, out, err, sizeof err);
    CHECK(rc == 0);
    if (rc) fprintf(stderr, "  %s: %s\n", spec, err);
}

static void test_views(void) {
    float o[T * S];
    fill();
    reduce("last:0", o); /* layer 2 head 0: w = 0.4 + 0.05 t */
    CHECK(near(o[0], 0.4f) && near(o[1], 0.6f) && near(o[2 * S], 0.5f));
    reduce("2:1", o); /* w = 0.5 + 0.05 t */
    CHECK(near(o[0], 0.5f) && near(o[S], 0.55f));
    reduce("-1:1", o);
    CHECK(near(o[0], 0.5f));
    reduce("penultimate:avg", o); /* layer 1, heads 0,1: w = (0.2 + 0.3)/2 + 0.05 t */
    CHECK(near(o[0], 0.25f) && near(o[S], 0.30f) && near(o[S + 1], 0.70f));
    reduce("all:avg", o); /* mean of 0.0..0.5 = 0.25 */
    CHECK(near(o[0], 0.25f) && near(o[2 * S], 0.35f));
    reduce("all:0", o); /* heads (0,0) (1,0) (2,0): mean of 0, .2, .4 */
    CHECK(near(o[0], 0.2f));
    reduce("0:0,2:1", o); /* (0 + 0.5)/2 */
    CHECK(near(o[0], 0.25f));
    reduce("0:0,0:0,2:1", o); /* a pair counts once */
    CHECK(near(o[0], 0.25f));
    reduce("1:avg,1:0", o);
    CHECK(near(o[0], 0.25f));
    /* shift-att: row t is row t+1 of the plain view; the last row is empty */
    reduce("last:0,shift", o);
    CHECK(near(o[0], 0.45f) && near(o[S], 0.5f) && near(o[2 * S], 0.0f) && near(o[2 * S + 1], 0.0f));
    reduce(" penultimate:avg , shift ", o);
    CHECK(near(o[0], 0.30f));
    /* rows of any view without shift sum to 1 when the inputs' rows do */
    reduce("all:avg", o);
    for (int t = 0; t < T; t++) CHECK(near(o[t * S] + o[t * S + 1], 1.0f));
}

/* The item `align`: the trained alignment head's rows [T, S] as one more averaged head,
 * shifted with the rest; alone it is the head itself; without rows it is an error. */
static void test_align_head_item(void) {
    const float head[T * S] = {0.9f, 0.1f, 0.3f, 0.7f, 0.6f, 0.4f};
    float o[T * S];
    attend_view v;
    char err[256], name[128];
    fill();
    CHECK(attend_view_parse("1:0,align,shift,words,grow", &v, err, sizeof err) == 0 && v.align == 1 && v.n == 1);
    attend_view_name(&v, name, sizeof name);
    CHECK(!strcmp(name, "1:0,align,shift,words,grow"));
    CHECK(attend_view_parse("align , shift", &v, err, sizeof err) == 0 && v.n == 0 && v.align);
    CHECK(attend_view_reduce_head(&v, &X[0][0][0][0], head, L, H, T, S, o, err, sizeof err) == 0);
    CHECK(near(o[0], 0.3f) && near(o[1], 0.7f) && near(o[S], 0.6f) && near(o[2 * S], 0.0f));
    CHECK(attend_view_parse("1:0,align", &v, err, sizeof err) == 0);
    CHECK(attend_view_reduce_head(&v, &X[0][0][0][0], head, L, H, T, S, o, err, sizeof err) == 0);
    /* (1,0) puts w = 0.2 + 0.05 t on source 0: row 1 averages 0.25 and 0.3 */
    CHECK(near(o[0], (0.2f + 0.9f) / 2) && near(o[S], (0.25f + 0.3f) / 2) && near(o[S + 1], (0.75f + 0.7f) / 2));
    CHECK(attend_view_reduce(&v, &X[0][0][0][0], L, H, T, S, o, err, sizeof err) == -1);
    CHECK(strstr(err, "'align'") != NULL);
}

static void test_view_names_and_errors(void) {
    attend_view v;
    char err[256], name[128];
    const char *round[] = {"last:0", "penultimate:avg,shift", "3:1,4:avg", "all:avg", "-3:2",
                           "1:2,shift,words", "all:avg,words", "1:2,shift,words,grow", "0:1,mutual"};
    for (size_t i = 0; i < sizeof round / sizeof *round; i++) {
        CHECK(attend_view_parse(round[i], &v, err, sizeof err) == 0);
        attend_view_name(&v, name, sizeof name);
        CHECK(!strcmp(name, round[i]));
        if (strcmp(name, round[i])) fprintf(stderr, "  %s -> %s\n", round[i], name);
    }
    /* the flags are written after the heads whatever order they came in */
    CHECK(attend_view_parse("grow, words,1:2 ,shift", &v, err, sizeof err) == 0 && v.links == ATTEND_LINKS_GROW);
    attend_view_name(&v, name, sizeof name);
    CHECK(!strcmp(name, "1:2,shift,words,grow"));
    const char *bad[] = {"", "last", "x:0", "0:x", "0:-1", "shift", "0:0,,", "1:", ":1", "0:0;1:1", "words",
                         "shift,words", "0:0,word", "grow", "0:0,mutual,grow", "0:0,grown"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = attend_view_parse(bad[i], &v, err, sizeof err);
        CHECK(rc == -1 && err[0]);
        if (rc != -1) fprintf(stderr, "  accepted bad view '%s'\n", bad[i]);
    }
    float o[T * S];
    fill();
    CHECK(attend_view_parse("3:0", &v, err, sizeof err) == 0);
    CHECK(attend_view_reduce(&v, &X[0][0][0][0], L, H, T, S, o, err, sizeof err) == -1);
    CHECK(strstr(err, "3 decoder layers") != NULL);
    CHECK(attend_view_parse("0:2", &v, err, sizeof err) == 0);
    CHECK(attend_view_reduce(&v, &X[0][0][0][0], L, H, T, S, o, err, sizeof err) == -1);
    CHECK(strstr(err, "head 2") != NULL);
    CHECK(attend_view_parse("penultimate:0", &v, err, sizeof err) == 0);
    CHECK(attend_view_reduce(&v, &X[0][0][0][0], 1, H, T, S, o, err, sizeof err) == -1);
    CHECK(attend_view_parse("-4:0", &v, err, sizeof err) == 0);
    CHECK(attend_view_reduce(&v, &X[0][0][0][0], L, H, T, S, o, err, sizeof err) == -1);
    /* the layer --all-heads draws: symbolic and from-the-end layers as indices */
    const char *views[] = {"last:0", "penultimate:avg", "-3:avg", "-1:1", "1:0", "all:avg", "-4:0"};
    const int want[] = {2, 1, 0, 2, 1, -1, -1};
    for (size_t i = 0; i < sizeof views / sizeof *views; i++) {
        CHECK(attend_view_parse(views[i], &v, err, sizeof err) == 0);
        CHECKF(attend_resolve_layer(v.layer[0], 3) == want[i], "%s resolves to layer %d, not %d", views[i],
               attend_resolve_layer(v.layer[0], 3), want[i]);
    }
}

/* ---------------------------------------------------------------------------------------
 * Words */

#define U "\xe2\x96\x81" /* ▁ */

static void test_words(void) {
    const char *src[] = {U "Wo", U "ist", U "der", U "Bahn", "hof", "?", "</s>"};
    attend_words w;
    CHECK(attend_words_from_pieces(src, 7, &w) == 0);
    CHECK(w.n_words == 4);
    int want[] = {0, 1, 2, 3, 3, 3, -1};
    for (int i = 0; i < 7; i++) CHECK(w.word_of[i] == want[i]);
    CHECK(!strcmp(w.words[0], "Wo") && !strcmp(w.words[3], "Bahnhof?"));
    attend_words_free(&w);

    /* no ▁ on the first piece; a bare ▁ piece starts a word; specials belong to none */
    const char *odd[] = {"ab", "c", U, "d", "<pad>", U "e" U "f", "</s>"};
    CHECK(attend_words_from_pieces(odd, 7, &w) == 0);
    CHECK(w.n_words == 3);
    int want2[] = {0, 0, 1, 1, -1, 2, -1};
    for (int i = 0; i < 7; i++) CHECK(w.word_of[i] == want2[i]);
    CHECK(!strcmp(w.words[0], "abc") && !strcmp(w.words[1], "d") && !strcmp(w.words[2], "ef"));
    attend_words_free(&w);

    CHECK(attend_words_from_pieces(odd + 6, 1, &w) == 0); /* only </s> */
    CHECK(w.n_words == 0 && w.word_of[0] == -1);
    attend_words_free(&w);
}

/* A 5x6 piece matrix: target "▁Where ▁is ▁the ▁station </s>" over source
 * "▁Wo ▁ist ▁der ▁Bahn hof </s>". Known answer, worked by hand:
 *   ▁Where   -> ▁Wo (0.7)                      word link 0-0
 *   ▁is      -> </s> has 0.6 but is excluded; ▁ist 0.3   1-1
 *   ▁the     -> ▁der 0.5                        2-2
 *   ▁station -> hof 0.4 (beats ▁Bahn 0.35)      3-3 (pieces 3,4 are source word 3)
 *   </s>     -> excluded target                 -
 */
static const float A[5 * 6] = {
    0.70f, 0.10f, 0.05f, 0.05f, 0.05f, 0.05f,
    0.02f, 0.30f, 0.04f, 0.02f, 0.02f, 0.60f,
    0.10f, 0.10f, 0.50f, 0.10f, 0.10f, 0.10f,
    0.05f, 0.05f, 0.05f, 0.35f, 0.40f, 0.10f,
    0.90f, 0.02f, 0.02f, 0.02f, 0.02f, 0.02f,
};

static void test_hard_alignment(void) {
    const char *src[] = {U "Wo", U "ist", U "der", U "Bahn", "hof", "</s>"};
    const char *tgt[] = {U "Where", U "is", U "the", U "station", "</s>"};
    attend_words sw, tw;
    CHECK(attend_words_from_pieces(src, 6, &sw) == 0);
    CHECK(attend_words_from_pieces(tgt, 5, &tw) == 0);
    int best[5], links[10];
    attend_align_argmax(A, 5, 6, &sw, &tw, best);
    int want[] = {0, 1, 2, 4, -1};
    for (int t = 0; t < 5; t++) CHECK(best[t] == want[t]);
    int k = attend_align_links(best, 5, &sw, &tw, links);
    CHECK(k == 4);
    char *p = attend_pharaoh(links, k);
    CHECK(p && !strcmp(p, "0-0 1-1 2-2 3-3"));
    free(p);

    /* word matrix: target rows = mean of pieces, source columns = sum of pieces */
    float W[4 * 4];
    attend_words_matrix(A, 5, 6, &sw, &tw, W);
    CHECK(near(W[0], 0.70f) && near(W[3 * 4 + 3], 0.75f) && near(W[1 * 4 + 1], 0.30f));
    attend_words_free(&sw);
    attend_words_free(&tw);
}

/* Many-to-one, one-to-many and reordering: links are unique and sorted source-first.
 * Source "▁das ▁Haus chen </s>" (words 0: das, 1: Hauschen), target
 * "▁the ▁little ▁house </s>"; "little" and "house" both look at pieces of word 1, "the"
 * at word 0, and a second target piece of "house" ("s") looks at "chen". */
static void test_merge_links(void) {
    const char *src[] = {U "das", U "Haus", "chen", "</s>"};
    const char *tgt[] = {U "the", U "little", U "house", "s", "</s>"};
    const float M[5 * 4] = {
        0.8f, 0.1f, 0.1f, 0.0f,
        0.1f, 0.2f, 0.7f, 0.0f,
        0.1f, 0.8f, 0.1f, 0.0f,
        0.1f, 0.1f, 0.8f, 0.0f,
        0.0f, 0.0f, 0.0f, 1.0f, /* </s> row: not aligned */
    };
    attend_words sw, tw;
    CHECK(attend_words_from_pieces(src, 4, &sw) == 0);
    CHECK(attend_words_from_pieces(tgt, 5, &tw) == 0);
    CHECK(sw.n_words == 2 && tw.n_words == 3);
    int best[5], links[10];
    attend_align_argmax(M, 5, 4, &sw, &tw, best);
    int k = attend_align_links(best, 5, &sw, &tw, links);
    char *p = attend_pharaoh(links, k);
    CHECK(p && !strcmp(p, "0-0 1-1 1-2"));
    if (p && strcmp(p, "0-0 1-1 1-2")) fprintf(stderr, "  got %s\n", p);
    free(p);
    /* "words": one link per target word, from the weights summed over both words' pieces.
     * "house" = rows 2 and 3: per piece they point at Haus and das (two links); summed, das
     * 0.1 + 0.6 = 0.7 and Hauschen 0.8 + 0.1 + 0.2 + 0.2 = 1.3 (one link, to word 1) */
    const float M2[5 * 4] = {
        0.8f, 0.1f, 0.1f, 0.0f,
        0.1f, 0.2f, 0.7f, 0.0f,
        0.1f, 0.8f, 0.1f, 0.0f,
        0.6f, 0.2f, 0.2f, 0.0f,
        0.0f, 0.0f, 0.0f, 1.0f,
    };
    attend_view v;
    char err[128];
    CHECK(attend_view_parse("0:0", &v, err, sizeof err) == 0 && !v.words);
    CHECK(attend_view_best(&v, M2, 5, 4, &sw, &tw, best) == 0);
    p = attend_pharaoh(links, attend_align_links(best, 5, &sw, &tw, links));
    CHECK(p && !strcmp(p, "0-0 0-2 1-1 1-2"));
    free(p);
    CHECK(attend_view_parse("0:0,words", &v, err, sizeof err) == 0 && v.words);
    CHECK(attend_view_best(&v, M2, 5, 4, &sw, &tw, best) == 0);
    CHECK(best[0] == 0 && best[1] == 1 && best[2] == 1 && best[3] == 1 && best[4] == -1);
    p = attend_pharaoh(links, attend_align_links(best, 5, &sw, &tw, links));
    CHECK(p && !strcmp(p, "0-0 1-1 1-2"));
    if (p && strcmp(p, "0-0 1-1 1-2")) fprintf(stderr, "  words: got %s\n", p);
    free(p);
    /* a zero row (shift-att's last) links nothing */
    float Z[2 * 4] = {0};
    attend_align_argmax(Z, 2, 4, &sw, &tw, best);
    CHECK(best[0] == -1 && best[1] == -1);
    CHECK(attend_view_best(&v, Z, 2, 4, &sw, &tw, best) == 0 && best[0] == -1 && best[1] == -1);
    p = attend_pharaoh(links, 0);
    CHECK(p && !strcmp(p, ""));
    free(p);
    attend_words_free(&sw);
    attend_words_free(&tw);
}

/* attend_alignment end to end on a fake result: 2 layers x 2 heads, where head 0 of the
 * last layer aligns monotonically and everything else crosses over. */
static void test_alignment_result(void) {
    char *sp[] = {U "a", U "b", "</s>"}, *tp[] = {U "x", U "y", "</s>"};
    float cross[2][2][3][3];
    for (int l = 0; l < 2; l++)
        for (int h = 0; h < 2; h++)
            for (int t = 0; t < 3; t++)
                for (int s = 0; s < 3; s++) {
                    int mono = (l == 1 && h == 0);
                    int hit = mono ? s == t : s == 1 - t;
                    cross[l][h][t][s] = t == 2 ? (s == 2) : hit ? 0.9f : 0.05f;
                }
    attend_result r;
    memset(&r, 0, sizeof r);
    r.n_src = r.n_tgt = 3;
    r.src_pieces = sp;
    r.tgt_pieces = tp;
    r.cross = &cross[0][0][0][0];
    attend_config c;
    memset(&c, 0, sizeof c);
    c.decoder_layers = 2;
    c.decoder_heads = 2;
    char err[256];
    attend_view v;
    attend_view_parse("last:0", &v, err, sizeof err);
    char *p = attend_alignment(&r, &c, &v, err, sizeof err);
    CHECK(p && !strcmp(p, "0-0 1-1"));
    free(p);
    attend_view_parse("0:1", &v, err, sizeof err);
    p = attend_alignment(&r, &c, &v, err, sizeof err);
    CHECK(p && !strcmp(p, "0-1 1-0"));
    free(p);
    attend_view_parse("5:0", &v, err, sizeof err);
    p = attend_alignment(&r, &c, &v, err, sizeof err);
    CHECK(p == NULL && strstr(err, "decoder layers"));
    r.cross = NULL;
    p = attend_alignment(&r, &c, &v, err, sizeof err);
    CHECK(p == NULL && strstr(err, "want_attention"));
}

/* attend_alignment_both_links and attend_alignment_both on two fake results of one pair: the
 * reverse one reads the target as its source; both align monotonically under last:0. */
static void test_alignment_both_result(void) {
    char *sp[] = {U "a", U "b", "</s>"}, *tp[] = {U "x", U "y", "</s>"}, *three[] = {U "x", U "y", U "z"};
    float cross[2][2][3][3];
    for (int l = 0; l < 2; l++)
        for (int h = 0; h < 2; h++)
            for (int t = 0; t < 3; t++)
                for (int s = 0; s < 3; s++) cross[l][h][t][s] = t == s ? 0.9f : 0.05f;
    attend_result r, rr;
    memset(&r, 0, sizeof r);
    r.n_src = r.n_tgt = 3;
    r.src_pieces = sp, r.tgt_pieces = tp;
    r.cross = &cross[0][0][0][0];
    rr = r;
    rr.src_pieces = tp, rr.tgt_pieces = sp;
    attend_config c;
    memset(&c, 0, sizeof c);
    c.decoder_layers = c.decoder_heads = 2;
    c.alignment_view = "last:0";
    char err[256];
    int *links = NULL;
    const int k = attend_alignment_both_links(&r, &c, NULL, &rr, &c, NULL, &links, err, sizeof err);
    CHECK(k == 2 && links && links[0] == 0 && links[1] == 0 && links[2] == 1 && links[3] == 1);
    free(links);
    char *p = attend_alignment_both(&r, &c, NULL, &rr, &c, NULL, err, sizeof err);
    CHECK(p && !strcmp(p, "0-0 1-1"));
    free(p);
    rr.src_pieces = three; /* three target words where the forward model has two */
    CHECK(attend_alignment_both_links(&r, &c, NULL, &rr, &c, NULL, &links, err, sizeof err) == -1 && !links &&
          strstr(err, "other words"));
    rr.cross = NULL;
    CHECK(attend_alignment_both_links(&r, &c, NULL, &rr, &c, NULL, &links, err, sizeof err) == -1 && !links &&
          strstr(err, "want_attention"));
}

/* Link rules worked by hand. Source "▁a ▁b ▁c ▁d </s>", target "▁A ▁B ▁C ▁D </s>":
 *        a    b    c    d   </s>      row argmax   column argmax: a->A, b->D, c->C, d->D
 *   A  .80  .10  .05  .05   0         a
 *   B  .10  .30  .55  .05   0         c (but c's best row is C)
 *   C  .05  .15  .75  .05   0         c
 *   D  .05  .50  .05  .40   0         b
 * argmax: 0-0 2-1 2-2 1-3. mutual: 0-0 2-2 1-3. grow, from the mutual links visited by
 * column: around C-c, B-c (.55 of B's row 1.0, and B has no link) joins; D-d (.40 of d's
 * column .55, and d has no link) joins; B-b (.30) is under half of both its sums. */
static void test_link_rules(void) {
    const char *src[] = {U "a", U "b", U "c", U "d", "</s>"};
    const char *tgt[] = {U "A", U "B", U "C", U "D", "</s>"};
    const float M[5 * 5] = {
        0.80f, 0.10f, 0.05f, 0.05f, 0.0f,
        0.10f, 0.30f, 0.55f, 0.05f, 0.0f,
        0.05f, 0.15f, 0.75f, 0.05f, 0.0f,
        0.05f, 0.50f, 0.05f, 0.40f, 0.0f,
        0.00f, 0.00f, 0.00f, 0.00f, 1.0f,
    };
    static const char *const cases[][2] = {
        {"0:0", "0-0 1-3 2-1 2-2"},         {"0:0,mutual", "0-0 1-3 2-2"},
        {"0:0,grow", "0-0 1-3 2-1 2-2 3-3"}, {"0:0,words", "0-0 1-3 2-1 2-2"},
        {"0:0,words,mutual", "0-0 1-3 2-2"}, {"0:0,words,grow", "0-0 1-3 2-1 2-2 3-3"},
    };
    attend_words sw, tw;
    CHECK(attend_words_from_pieces(src, 5, &sw) == 0);
    CHECK(attend_words_from_pieces(tgt, 5, &tw) == 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        attend_view v;
        char err[128];
        int *links = NULL;
        CHECK(attend_view_parse(cases[i][0], &v, err, sizeof err) == 0);
        const int k = attend_view_links(&v, M, 5, 5, &sw, &tw, &links);
        char *p = k >= 0 ? attend_pharaoh(links, k) : NULL;
        CHECK(p && !strcmp(p, cases[i][1]));
        if (p && strcmp(p, cases[i][1])) fprintf(stderr, "  %s: got %s, want %s\n", cases[i][0], p, cases[i][1]);
        free(p);
        free(links);
    }
    /* a struct filled by hand with an unknown rule is refused by the check every reader runs */
    attend_view odd = attend_view_single(0, 0);
    char err[128];
    odd.links = 3;
    CHECK(attend_view_check(&odd, 1, 1, err, sizeof err) == -1 && strstr(err, "link rule 3"));
    /* an all-zero matrix (a shifted view of one row) links nothing under any rule */
    float Z[5 * 5] = {0};
    for (int rule = ATTEND_LINKS_ARGMAX; rule <= ATTEND_LINKS_GROW; rule++) {
        attend_view v = attend_view_single(0, 0);
        int *links = NULL;
        v.links = rule;
        CHECK(attend_view_links(&v, Z, 5, 5, &sw, &tw, &links) == 0);
        free(links);
    }
    attend_words_free(&sw);
    attend_words_free(&tw);
}

/* attend_links_both: the forward view alone links both target words to source word a; the
 * reverse model is sure that b goes with B; row-normalised and added, the links agree on
 * a-A and b-B. A reverse model with other words is refused (-2). */
static void test_links_both(void) {
    const char *src[] = {U "a", U "b", "</s>"}, *tgt[] = {U "A", U "B", "</s>"};
    const char *three[] = {U "x", U "y", U "z", "</s>"};
    const float F[3 * 3] = {0.55f, 0.45f, 0.0f, 0.60f, 0.40f, 0.0f, 0.0f, 0.0f, 1.0f}; /* rows A B </s> */
    const float R[3 * 3] = {0.90f, 0.10f, 0.0f, 0.10f, 0.90f, 0.0f, 0.0f, 0.0f, 1.0f}; /* rows a b </s> */
    const float R3[4 * 3] = {0};
    attend_words sw, tw, w3;
    CHECK(attend_words_from_pieces(src, 3, &sw) == 0 && attend_words_from_pieces(tgt, 3, &tw) == 0);
    CHECK(attend_words_from_pieces(three, 4, &w3) == 0);
    attend_view v = attend_view_single(0, 0);
    v.words = 1;
    int *links = NULL;
    int k = attend_view_links(&v, F, 3, 3, &sw, &tw, &links);
    char *p = attend_pharaoh(links, k);
    CHECK(p && !strcmp(p, "0-0 0-1"));
    free(p), free(links);
    k = attend_links_both(&v, F, 3, 3, &sw, &tw, R, 3, 3, &tw, &sw, &links);
    p = attend_pharaoh(links, k);
    CHECK(p && !strcmp(p, "0-0 1-1"));
    if (p && strcmp(p, "0-0 1-1")) fprintf(stderr, "  both directions: got %s\n", p);
    free(p), free(links);
    links = NULL;
    CHECK(attend_links_both(&v, F, 3, 3, &sw, &tw, R3, 4, 3, &tw, &w3, &links) == -2 && !links);
    attend_words_free(&sw), attend_words_free(&tw), attend_words_free(&w3);
}

int main(void) {
    test_views();
    test_links_both();
    test_view_names_and_errors();
    test_align_head_item();
    test_words();
    test_hard_alignment();
    test_merge_links();
    test_link_rules();
    test_alignment_result();
    test_alignment_both_result();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
