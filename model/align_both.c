/* attend_alignment_both: the word links a forward and a reverse model agree on (issue 38),
 * from two translated results, as attend_alignment does for one. */
#include "align.h"
#include "align_side.h"

#include <stdio.h>
#include <stdlib.h>

int attend_alignment_both_links(const attend_result *r, const attend_config *c, const attend_view *v,
                                const attend_result *rr, const attend_config *rc, const attend_view *rv,
                                int **links, char *err, size_t errlen) {
    align_side f, b = {0};
    int k = -1;
    *links = NULL;
    if (align_side_build(r, c, v, &f, err, errlen) || align_side_build(rr, rc, rv, &b, err, errlen)) goto done;
    k = attend_links_both(&f.view, f.A, f.T, f.S, &f.src, &f.tgt, b.A, b.T, b.S, &b.src, &b.tgt, links);
    if (k == -2)
        snprintf(err, errlen, "the reverse model splits the text into other words (source %d and %d words, "
                 "target %d and %d)", f.src.n_words, b.tgt.n_words, f.tgt.n_words, b.src.n_words);
    else if (k < 0)
        snprintf(err, errlen, "out of memory");
    if (k < 0) free(*links), *links = NULL, k = -1;
done:
    align_side_free(&f);
    align_side_free(&b);
    return k;
}

char *attend_alignment_both(const attend_result *r, const attend_config *c, const attend_view *v,
                            const attend_result *rr, const attend_config *rc, const attend_view *rv,
                            char *err, size_t errlen) {
    int *links = NULL;
    const int k = attend_alignment_both_links(r, c, v, rr, rc, rv, &links, err, errlen);
    char *out = k < 0 ? NULL : attend_pharaoh(links, k);
    if (k >= 0 && !out) snprintf(err, errlen, "out of memory");
    free(links);
    return out;
}
