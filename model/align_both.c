/* attend_alignment_both: the word links a forward and a reverse model agree on (issue 38),
 * from two translated results, as attend_alignment does for one. */
#include "align.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct {
    float *A;               /* [T, S] the view */
    attend_words src, tgt;
    int T, S, have_src, have_tgt;
} side;

static void side_free(side *x) {
    if (x->have_src) attend_words_free(&x->src);
    if (x->have_tgt) attend_words_free(&x->tgt);
    free(x->A);
}

/* r's view (v, or NULL: the model's own) and its words. 0, or -1 with err. */
static int side_build(const attend_result *r, const attend_config *c, const attend_view *v, side *x,
                      char *err, size_t errlen) {
    attend_view own;
    x->T = r->n_tgt, x->S = r->n_src;
    if (!v) {
        if (attend_view_parse(c->alignment_view, &own, err, errlen)) return -1;
        v = &own;
    }
    if (!r->cross) {
        snprintf(err, errlen, "no attention captured: translate with want_attention");
        return -1;
    }
    if (!(x->A = malloc(sizeof(float) * ((size_t)x->T * x->S + 1)))) goto oom;
    if (attend_view_reduce_head(v, r->cross, r->align_head, c->decoder_layers, c->decoder_heads, x->T, x->S,
                                x->A, err, errlen))
        return -1;
    if (attend_words_from_pieces((const char *const *)r->src_pieces, x->S, &x->src)) goto oom;
    x->have_src = 1;
    if (attend_words_from_pieces((const char *const *)r->tgt_pieces, x->T, &x->tgt)) goto oom;
    x->have_tgt = 1;
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    return -1;
}

char *attend_alignment_both(const attend_result *r, const attend_config *c, const attend_view *v,
                            const attend_result *rr, const attend_config *rc, const attend_view *rv,
                            char *err, size_t errlen) {
    side f = {0}, b = {0};
    char *out = NULL;
    int *links = NULL;
    attend_view own;
    if (!v) {
        if (attend_view_parse(c->alignment_view, &own, err, errlen)) return NULL;
        v = &own;
    }
    if (side_build(r, c, v, &f, err, errlen) || side_build(rr, rc, rv, &b, err, errlen)) goto done;
    const int k = attend_links_both(v, f.A, f.T, f.S, &f.src, &f.tgt, b.A, b.T, b.S, &b.src, &b.tgt, &links);
    if (k == -2)
        snprintf(err, errlen, "the reverse model splits the text into other words (source %d and %d words, "
                 "target %d and %d)", f.src.n_words, b.tgt.n_words, f.tgt.n_words, b.src.n_words);
    else if (k < 0 || !(out = attend_pharaoh(links, k)))
        snprintf(err, errlen, "out of memory");
done:
    side_free(&f);
    side_free(&b);
    free(links);
    return out;
}
