/* --reverse-model's settings and the text the reverse model reads (reverse_model.h). */
#include "reverse_model.h"

#include <stdlib.h>
#include <string.h>

#include "../model/align.h"

attend_params cli_reverse_params(const cli_model_options *common) {
    attend_params p = cli_model_params(common);
    p.want_attention = p.want_scores = 1;
    p.src_lang = common->tgt_lang, p.tgt_lang = common->src_lang; /* the other way round */
    p.target_prefix = NULL;
    return p;
}

char *cli_reverse_source(const attend_result *r) {
    attend_words tw;
    if (attend_words_from_pieces((const char *const *)r->tgt_pieces, r->n_tgt, &tw)) return NULL;
    size_t n = 1;
    for (int t = 0; t < r->n_tgt; t++) n += strlen(r->tgt_pieces[t]);
    char *s = malloc(n), *w = s;
    for (int t = 0; s && t < r->n_tgt; t++) {
        if (tw.word_of[t] < 0) continue; /* </s>, language tokens */
        for (const char *q = r->tgt_pieces[t]; *q;)
            if (!strncmp(q, "\xe2\x96\x81", 3)) *w++ = ' ', q += 3;
            else *w++ = *q++;
    }
    if (s) *w = 0;
    attend_words_free(&tw);
    return s;
}
