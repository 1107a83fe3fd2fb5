/* attend_translate_html: HTML fragments or documents translated, tags kept. The text between
 * tags (markup.h's segments, sentence by sentence through attend_translate) goes to the model;
 * segments holding inline tags are translated with attention, and each tag is put back
 * around the target words its source words align to under the model's own view. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../text/markup.h"
#include "align.h"
#include "attend.h"

/* Every segment of every document, in order, and what became of it. */
typedef struct {
    attend_model *m;
    int n;              /* segments */
    const char **text;  /* [n] each segment's text (the doc's, not owned) */
    size_t *len;
    char **out;         /* [n] translations (malloc'd) */
    int **links;        /* [n] its word links, 2 * n_links ints (malloc'd), or NULL */
    int *n_links;
    int *cut;           /* [n] a sentence of it was cut */
    int *todo;          /* the segments of one attend_translate call: index -> segment */
    attend_result *res;
    attend_view view;
    int aligned;        /* this call has attention: read the alignment */
    char failed[300];   /* why a segment could not be translated ("" while none) */
} html_job;

/* "0-1 2-3" -> links (2 ints a link), *n. 0 or -1 (out of memory). */
static int parse_pharaoh(const char *s, int **links, int *n) {
    int cap = 16, k = 0;
    int *l = malloc(sizeof(int) * 2 * (size_t)cap);
    for (const char *p = s; l && *p;) {
        char *end;
        const long i = strtol(p, &end, 10);
        if (end == p || *end != '-') break;
        const long j = strtol(end + 1, &end, 10);
        if (k == cap) {
            int *m = realloc(l, sizeof(int) * 4 * (size_t)cap);
            if (!m) break;
            l = m, cap *= 2;
        }
        l[2 * k] = (int)i, l[2 * k + 1] = (int)j, k++;
        p = end;
        while (*p == ' ') p++;
    }
    *links = l, *n = k;
    return l ? 0 : -1;
}

/* on_batch: each finished segment's text (and alignment) kept, its result freed at once, so
 * attention matrices never pile up. Non-zero stops the call (out of memory). */
static int segments_done(void *user, const int *index, int n) {
    html_job *j = user;
    for (int k = 0; k < n; k++) {
        attend_result *r = &j->res[index[k]];
        const int s = j->todo[index[k]];
        if (r->status && !j->failed[0])
            snprintf(j->failed, sizeof j->failed, "text \"%.60s\": %.200s", j->text[s],
                     r->message ? r->message : "not translated");
        j->out[s] = strdup(r->text ? r->text : "");
        j->cut[s] = r->truncated;
        int rc = !j->out[s];
        if (!rc && j->aligned && !r->status) {
            char err[200];
            char *ph = attend_alignment(r, attend_get_config(j->m), &j->view, err, sizeof err);
            rc = !ph || parse_pharaoh(ph, &j->links[s], &j->n_links[s]);
            free(ph);
        }
        attend_result_free(r);
        if (rc) return 1;
    }
    return 0;
}

/* Translate the non-blank segments with (aligned 1) or without inline tags. 0 or -1. */
static int translate_some(html_job *j, const markup_segment *const *seg, const attend_params *p, int aligned,
                          char *err, size_t errlen) {
    int k = 0;
    const char **lines = malloc(sizeof(char *) * (size_t)(j->n + 1));
    size_t *lens = malloc(sizeof(size_t) * (size_t)(j->n + 1));
    j->res = calloc((size_t)j->n + 1, sizeof *j->res);
    int rc = !lines || !lens || !j->res ? -1 : 0;
    for (int s = 0; !rc && s < j->n; s++)
        if (j->len[s] && (seg[s]->n_tags > 0) == aligned) lines[k] = j->text[s], lens[k] = j->len[s], j->todo[k++] = s;
    attend_params q = *p;
    q.want_attention = aligned, q.want_logits = 0, q.n_best = 0;
    q.target_prefix = NULL, q.target_prefix_ids = NULL, q.on_batch = segments_done, q.user = j;
    j->aligned = aligned;
    if (!rc && k) rc = attend_translate(j->m, lines, lens, k, NULL, &q, j->res, err, errlen);
    if (rc && !lines) snprintf(err, errlen, "out of memory");
    for (int i = 0; j->res && i < k; i++) attend_result_free(&j->res[i]);
    free(lines), free(lens), free(j->res);
    j->res = NULL;
    return rc;
}

static void job_free(html_job *j) {
    for (int s = 0; s < j->n; s++) {
        if (j->out) free(j->out[s]);
        if (j->links) free(j->links[s]);
    }
    free(j->text), free(j->len), free(j->out), free(j->links), free(j->n_links), free(j->cut), free(j->todo);
}

/* Room for n segments. 0 or -1. */
static int job_alloc(html_job *j, int n) {
    const size_t k = (size_t)n + 1;
    j->n = n;
    j->text = calloc(k, sizeof(char *)), j->len = calloc(k, sizeof(size_t)), j->out = calloc(k, sizeof(char *));
    j->links = calloc(k, sizeof(int *)), j->n_links = calloc(k, sizeof(int)), j->cut = calloc(k, sizeof(int));
    j->todo = calloc(k, sizeof(int));
    return j->text && j->len && j->out && j->links && j->n_links && j->cut && j->todo ? 0 : -1;
}

/* Parse the n documents into d[] and the job's segments (first[i]: doc i's first). 0 or -1. */
static int parse_all(html_job *j, markup_doc **d, int *first, const markup_segment ***seg, const char *const *docs,
                     const size_t *lens, int n, int document, char *err, size_t errlen) {
    int total = 0;
    for (int i = 0; i < n; i++) {
        if (!(d[i] = markup_parse(docs[i], lens ? lens[i] : strlen(docs[i]), document, err, errlen))) return -1;
        first[i] = total;
        total += markup_segments(d[i]);
    }
    first[n] = total;
    if (job_alloc(j, total) || !(*seg = calloc((size_t)total + 1, sizeof **seg)))
        return snprintf(err, errlen, "out of memory"), -1;
    for (int i = 0; i < n; i++)
        for (int s = first[i]; s < first[i + 1]; s++) {
            (*seg)[s] = markup_segment_at(d[i], s - first[i]);
            j->text[s] = (*seg)[s]->text, j->len[s] = (*seg)[s]->len;
        }
    return 0;
}

/* Each document written back with its translations. 0 or -1 (out of memory). */
static int render_all(const html_job *j, markup_doc **d, const int *first, int n, char **out, int *truncated,
                      char *err, size_t errlen) {
    for (int i = 0; i < n; i++) {
        out[i] = markup_render(d[i], (const char *const *)j->out + first[i], (const int *const *)j->links + first[i],
                               j->n_links + first[i], err, errlen);
        if (!out[i]) return -1;
        if (truncated) truncated[i] = 0;
        for (int s = first[i]; truncated && s < first[i + 1]; s++) truncated[i] |= j->cut[s];
    }
    return 0;
}

int attend_translate_html(attend_model *m, const char *const *docs, const size_t *lens, int n, int document,
                          const attend_params *p, char **out, int *truncated, char *err, size_t errlen) {
    attend_params defaults = attend_default_params();
    if (!p) p = &defaults;
    if (n < 0) return snprintf(err, errlen, "negative document count"), -1;
    memset(out, 0, sizeof *out * (size_t)n);
    markup_doc **d = calloc((size_t)n + 1, sizeof *d);
    int *first = malloc(sizeof(int) * ((size_t)n + 1));
    const markup_segment **seg = NULL;
    html_job j = {.m = m};
    int rc = !d || !first ? (snprintf(err, errlen, "out of memory"), -1) : 0;
    if (!rc) rc = parse_all(&j, d, first, &seg, docs, lens, n, document, err, errlen);
    if (!rc) rc = attend_view_parse(attend_get_config(m)->alignment_view, &j.view, err, errlen);
    if (!rc) rc = translate_some(&j, seg, p, 1, err, errlen);
    if (!rc) rc = translate_some(&j, seg, p, 0, err, errlen);
    if (!rc && j.failed[0]) rc = (snprintf(err, errlen, "%s", j.failed), -1);
    if (!rc) rc = render_all(&j, d, first, n, out, truncated, err, errlen);
    for (int i = 0; rc && i < n; i++) free(out[i]), out[i] = NULL;
    for (int i = 0; d && i < n; i++) markup_free(d[i]);
    job_free(&j);
    free(d), free(first), free(seg);
    return rc;
}
