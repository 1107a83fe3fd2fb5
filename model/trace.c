/* The trace of a batch (trace.h): growable arrays of runs, records and captures, and the
 * walk back from a record to the start token. */
#include "trace.h"

#include <stdlib.h>

/* realloc *p to cap elements of es bytes; 0 or -1 (then *p is unchanged) */
static int resize(void **p, size_t cap, size_t es) {
    void *q = realloc(*p, es * (cap ? cap : 1));
    if (!q) return -1;
    *p = q;
    return 0;
}

int trace_reserve_runs(trace *tr, int need, int V, int want_logits) {
    if (need <= tr->cap_run) return 0;
    int cap = tr->cap_run ? tr->cap_run : 64;
    while (cap < need) cap *= 2;
    if (resize((void **)&tr->run_prev, (size_t)cap, sizeof(int)) ||
        resize((void **)&tr->run_step, (size_t)cap, sizeof(int)) ||
        resize((void **)&tr->run_lse, (size_t)cap, sizeof(float)) ||
        resize((void **)&tr->run_att, (size_t)cap, sizeof(size_t)) ||
        (want_logits && resize((void **)&tr->logits, (size_t)cap * V, sizeof(float))))
        return -1;
    tr->cap_run = cap;
    return 0;
}

int trace_reserve_recs(trace *tr, int need) {
    if (need <= tr->cap_rec) return 0;
    int cap = tr->cap_rec ? tr->cap_rec : 64;
    while (cap < need) cap *= 2;
    if (resize((void **)&tr->rec_run, (size_t)cap, sizeof(int)) ||
        resize((void **)&tr->rec_tok, (size_t)cap, sizeof(int)) ||
        resize((void **)&tr->rec_lp, (size_t)cap, sizeof(float)))
        return -1;
    tr->cap_rec = cap;
    return 0;
}

int trace_reserve_att(trace *tr, size_t need) {
    if (need <= tr->cap_att) return 0;
    size_t cap = tr->cap_att ? tr->cap_att : 1 << 16;
    while (cap < need) cap *= 2;
    if (resize((void **)&tr->att, cap, sizeof(float))) return -1;
    tr->cap_att = cap;
    return 0;
}

int trace_add_record(trace *tr, int run, int tok, float lp) {
    if (trace_reserve_recs(tr, tr->n_rec + 1)) return -1;
    tr->rec_run[tr->n_rec] = run;
    tr->rec_tok[tr->n_rec] = tok;
    tr->rec_lp[tr->n_rec] = lp;
    return tr->n_rec++;
}

void trace_free(trace *tr) {
    free(tr->run_prev);
    free(tr->run_step);
    free(tr->run_lse);
    free(tr->run_att);
    free(tr->rec_run);
    free(tr->rec_tok);
    free(tr->rec_lp);
    free(tr->att);
    free(tr->logits);
}

int trace_length(const trace *tr, int rec) { return tr->run_step[tr->rec_run[rec]] + 1; }

int trace_records(const trace *tr, int rec, int *recs) {
    const int n = trace_length(tr, rec);
    for (int k = n - 1; k >= 0; k--, rec = tr->run_prev[tr->rec_run[rec]]) recs[k] = rec;
    return n;
}

int trace_prefix(const trace *tr, int rec, int start_id, int *ids) {
    ids[0] = start_id;
    const int n = 1 + (rec < 0 ? 0 : trace_records(tr, rec, ids + 1));
    for (int r = 1; r < n; r++) ids[r] = tr->rec_tok[ids[r]];
    return n;
}
