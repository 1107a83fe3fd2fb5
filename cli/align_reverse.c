/* attend align --reverse-model FILE (issue 38): the reverse model reads the translation as its
 * source and is force-decoded to the source (reverse_model.c); the links become those both
 * directions agree on (attend_alignment_both_links: each direction's word matrix
 * row-normalised, added, read by the forward view's link rule). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "align_run.h"
#include "cli.h"
#include "reverse_model.h"

int align_reverse(align_run *x) {
    const align_options *o = x->o;
    char err[512];
    attend_model *rm = cli_load_model(o->reverse_model);
    const attend_config *rc = attend_get_config(rm);
    attend_params p = cli_reverse_params(&o->common);
    attend_result rr;
    char *text = o->target ? strdup(o->target) : cli_reverse_source(&x->r); /* --target's as given */
    const char *src[1] = {text}, *tgt[1] = {x->source};
    int status = EXIT_OK;
    if (!text || attend_translate(rm, src, NULL, 1, tgt, &p, &rr, err, sizeof err)) {
        fprintf(stderr, "attend align: --reverse-model %s: %s\n", o->reverse_model, text ? err : "out of memory");
        free(text);
        attend_free(rm);
        return EXIT_FAIL;
    }
    free(text);
    int *links = NULL, k = -1;
    char *pharaoh = NULL;
    if (rr.status)
        fprintf(stderr, "attend align: --reverse-model %s: %s\n", o->reverse_model, rr.message), status = EXIT_FAIL;
    else if ((k = attend_alignment_both_links(&x->r, x->c, &x->view, &rr, rc, NULL, &links, err, sizeof err)) < 0)
        fprintf(stderr, "attend align: --reverse-model %s: %s\n", o->reverse_model, err), status = EXIT_FAIL;
    else if (!(pharaoh = attend_pharaoh(links, k))) {
        fprintf(stderr, "attend align: out of memory\n");
        free(links);
        status = EXIT_FAIL;
    } else { /* they replace the forward view's */
        free(x->links);
        free(x->pharaoh);
        x->links = links, x->nl = k, x->pharaoh = pharaoh;
        snprintf(x->rvname, sizeof x->rvname, "%s", rc->alignment_view);
    }
    attend_result_free(&rr);
    attend_free(rm);
    return status;
}
