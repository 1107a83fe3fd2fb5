/* align_side: one translated result's view, reduced, and the words of its two texts: what
 * attend_alignment (align.c) and attend_alignment_both (align_both.c) read links off.
 * Internal to model/ (not installed). */
#ifndef ATTEND_ALIGN_SIDE_H
#define ATTEND_ALIGN_SIDE_H

#include "align.h"

typedef struct {
    attend_view view;       /* the view read (the model's own when none was given) */
    float *A;               /* [T, S] it reduced */
    attend_words src, tgt;
    int T, S, have_src, have_tgt;
} align_side;

/* r's view (v, or NULL: the model's own, c->alignment_view; kept in x->view, whose rules the
 * links then follow) reduced into x->A, and its source and target words. 0, or -1 with err;
 * free x with align_side_free either way (x zeroed first). */
int align_side_build(const attend_result *r, const attend_config *c, const attend_view *v, align_side *x,
                     char *err, size_t errlen);
void align_side_free(align_side *x);

#endif
