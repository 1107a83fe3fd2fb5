/* Outputs (outputs.h): the n-best ids of a sentence and what was captured along each
 * hypothesis's path (the logits for the best only), copied out of the trace into
 * s2s_output's own arrays. */
#include "outputs.h"

#include <stdlib.h>
#include <string.h>

void s2s_output_free(s2s_output *o) {
    if (!o) return;
    for (int k = 0; o->nbest && k < o->n_best; k++) {
        s2s_hyp *h = &o->nbest[k];
        free(h->ids);
        if (h->logprob != o->logprob) free(h->logprob); /* nbest[0]'s are o's own */
        if (h->dec_self != o->dec_self) free(h->dec_self);
        if (h->cross != o->cross) free(h->cross);
        if (h->align_head != o->align_head) free(h->align_head);
    }
    free(o->nbest);
    free(o->ids);
    free(o->logits);
    free(o->logprob);
    free(o->enc_self);
    free(o->dec_self);
    free(o->cross);
    free(o->head_cross);
    free(o->align_head);
    memset(o, 0, sizeof *o);
}

/* out->nbest: each hypothesis's ids, walked back from its last record, and its scores. */
static int build_nbest(const trace *tr, const int *recs, const s2s_score *scores, int k, s2s_output *out) {
    out->nbest = calloc((size_t)k, sizeof(s2s_hyp));
    if (!out->nbest) return -1;
    out->n_best = k;
    for (int h = 0; h < k; h++) {
        s2s_hyp *hy = &out->nbest[h];
        hy->n = trace_length(tr, recs[h]);
        hy->ids = malloc(sizeof(int) * (size_t)hy->n);
        if (!hy->ids) return -1;
        for (int t = hy->n - 1, rec = recs[h]; t >= 0; t--, rec = tr->run_prev[tr->rec_run[rec]])
            hy->ids[t] = tr->rec_tok[rec];
        hy->score = scores[h].score;
        hy->normalized_score = scores[h].normalized_score;
    }
    return 0;
}

/* The decoder's attention along path[0..n): step t's self-attention row (t + 1 wide, zero
 * above the diagonal) and cross-attention row, per layer and head. */
static int copy_attention(const s2s_config *c, const trace *tr, const int *path, int n, int S,
                          float **dec_self, float **cross_out) {
    const int L = c->dec_layers, H = c->dec_heads;
    float *const ds = *dec_self = calloc((size_t)L * H * n * n, sizeof(float));
    float *const cs = *cross_out = malloc(sizeof(float) * (size_t)L * H * n * S);
    if (!ds || !cs) return -1;
    for (int t = 0; t < n; t++) {
        const float *self = tr->att + tr->run_att[tr->rec_run[path[t]]];
        const float *cross = self + (size_t)L * H * (t + 1);
        for (int lh = 0; lh < L * H; lh++) {
            memcpy(ds + ((size_t)lh * n + t) * n, self + (size_t)lh * (t + 1), sizeof(float) * (size_t)(t + 1));
            memcpy(cs + ((size_t)lh * n + t) * S, cross + (size_t)lh * S, sizeof(float) * (size_t)S);
        }
    }
    return 0;
}

/* The alignment head's row of each step along path[0..n) (after the cross-attention rows
 * in the trace: model/align_head.h): [n, S]. */
static int copy_align_head(const s2s_config *c, const trace *tr, const int *path, int n, int S, float **out) {
    const size_t LH = (size_t)c->dec_layers * c->dec_heads;
    float *const a = *out = malloc(sizeof(float) * (size_t)n * S + 1);
    if (!a) return -1;
    for (int t = 0; t < n; t++) {
        const float *self = tr->att + tr->run_att[tr->rec_run[path[t]]];
        memcpy(a + (size_t)t * S, self + LH * (t + 1) + LH * S, sizeof(float) * (size_t)S);
    }
    return 0;
}

/* s2s_opts.cross_heads along path[0..n): [n_cross_heads, n, S], read from each run's
 * capture (every matrix with want_attention, else the wanted heads only). */
static int copy_heads(const s2s_config *c, const s2s_opts *o, const trace *tr, const int *path, int n, int S,
                      float **out) {
    const int L = c->dec_layers, H = c->dec_heads, K = o->n_cross_heads;
    float *const hc = *out = malloc(sizeof(float) * ((size_t)K * n * S + 1));
    if (!hc) return -1;
    for (int t = 0; t < n; t++) {
        const float *run = tr->att + tr->run_att[tr->rec_run[path[t]]];
        for (int k = 0; k < K; k++) {
            const int lh = o->cross_heads[2 * k] * H + o->cross_heads[2 * k + 1];
            const float *from = o->want_attention ? run + (size_t)L * H * (t + 1) + (size_t)lh * S : run + (size_t)k * S;
            memcpy(hc + ((size_t)k * n + t) * S, from, sizeof(float) * (size_t)S);
        }
    }
    return 0;
}

/* The output hypothesis's ids, log-probabilities, logits and attention along path[0..n). */
static int copy_best(const s2s_model *m, const s2s_opts *o, const trace *tr, const int *path, int n,
                     int S, s2s_output *out) {
    const int V = m->c.decoder_vocab_size;
    out->n = n;
    out->score = out->nbest[0].score;
    out->normalized_score = out->nbest[0].normalized_score;
    out->ids = malloc(sizeof(int) * (size_t)n);
    if (!out->ids) return -1;
    memcpy(out->ids, out->nbest[0].ids, sizeof(int) * (size_t)n);
    if (o->want_scores) {
        out->logprob = malloc(sizeof(float) * (size_t)n);
        if (!out->logprob) return -1;
        for (int t = 0; t < n; t++) out->logprob[t] = tr->rec_lp[path[t]];
    }
    if (o->want_logits) {
        out->logits = malloc(sizeof(float) * (size_t)n * V);
        if (!out->logits) return -1;
        for (int t = 0; t < n; t++)
            memcpy(out->logits + (size_t)t * V, tr->logits + (size_t)tr->rec_run[path[t]] * V,
                   sizeof(float) * (size_t)V);
    }
    if (o->want_attention && copy_attention(&m->c, tr, path, n, S, &out->dec_self, &out->cross)) return -1;
    if (o->n_cross_heads > 0 && copy_heads(&m->c, o, tr, path, n, S, &out->head_cross)) return -1;
    if (o->want_attention && m->c.align_head_width > 0 && copy_align_head(&m->c, tr, path, n, S, &out->align_head))
        return -1;
    out->nbest[0].logprob = out->logprob;
    out->nbest[0].dec_self = out->dec_self;
    out->nbest[0].cross = out->cross;
    out->nbest[0].align_head = out->align_head;
    return 0;
}

/* Hypothesis h >= 1: its log-probabilities and attention along its own path (as o asks). */
static int copy_other(const s2s_model *m, const s2s_opts *o, const trace *tr, int *path, int rec, int S,
                      s2s_hyp *h) {
    const int n = trace_records(tr, rec, path);
    if (o->want_scores) {
        h->logprob = malloc(sizeof(float) * (size_t)n);
        if (!h->logprob) return -1;
        for (int t = 0; t < n; t++) h->logprob[t] = tr->rec_lp[path[t]];
    }
    if (!o->want_attention) return 0;
    if (copy_attention(&m->c, tr, path, n, S, &h->dec_self, &h->cross)) return -1;
    return m->c.align_head_width > 0 ? copy_align_head(&m->c, tr, path, n, S, &h->align_head) : 0;
}

int output_build(const s2s_model *m, const s2s_opts *o, const trace *tr, const int *recs,
                 const s2s_score *scores, int k, int S, s2s_output *out) {
    int longest = 0;
    for (int h = 0; h < k; h++) {
        const int len = trace_length(tr, recs[h]);
        longest = len > longest ? len : longest;
    }
    int *path = malloc(sizeof(int) * (size_t)(longest + 1));
    int rc = -1;
    if (path && !build_nbest(tr, recs, scores, k, out))
        rc = copy_best(m, o, tr, path, trace_records(tr, recs[0], path), S, out);
    for (int h = 1; rc == 0 && h < k; h++) rc = copy_other(m, o, tr, path, recs[h], S, &out->nbest[h]);
    free(path);
    return rc;
}
