/* Decoding a packed batch: the step loop over forward.h's decoder_step, with greedy, beam,
 * sampling and forced choices from search.h, and a trace that follows every hypothesis's
 * own path (HF's beam_indices) so its attention, logits and scores are its own. */
#include "translate.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "layers.h"
#include "search.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int s2s_max_length(const s2s_model *m, const s2s_opts *opts) {
    int ml = opts && opts->max_length > 0 ? opts->max_length : m->c.max_length;
    /* decoder inputs take positions 0 .. ml-2, which must exist */
    if (ml > m->c.max_pos + 1) ml = m->c.max_pos + 1;
    return ml < 2 ? 2 : ml;
}

s2s_search s2s_search_defaults(const s2s_model *m) {
    const s2s_generation *g = &m->c.gen;
    s2s_search s = {0};
    s.beams = g->recorded ? g->num_beams : 1;
    s.n_best = 1;
    s.length_penalty = g->length_penalty;
    s.early_stopping = g->early_stopping;
    s.min_length = g->min_length;
    s.no_repeat_ngram = g->no_repeat_ngram;
    s.repetition_penalty = g->repetition_penalty;
    s.renormalize = g->renormalize;
    s.top_p = 1.0f;
    s.temperature = 1.0f;
    s.forced_bos = -1;
    return s;
}

int s2s_search_check(const s2s_search *s, char *err, size_t errlen) {
    if (s->beams < 1 || s->beams > 1024)
        snprintf(err, errlen, "num_beams %d: must be 1..1024", s->beams);
    else if (s->sample && s->beams != 1)
        snprintf(err, errlen, "sampling draws one token at a time: num_beams must be 1, not %d", s->beams);
    else if (s->n_best < 1 || (!s->sample && s->n_best > s->beams) || s->n_best > 1024)
        snprintf(err, errlen, "n-best %d: must be 1..num_beams (%d)%s", s->n_best, s->beams,
                 s->sample ? "" : ", or any count up to 1024 when sampling");
    else if (!isfinite(s->length_penalty))
        snprintf(err, errlen, "length_penalty must be finite");
    else if (s->early_stopping < 0 || s->early_stopping > 2)
        snprintf(err, errlen, "early_stopping %d: must be false, true or never", s->early_stopping);
    else if (s->min_length < 0 || s->no_repeat_ngram < 0)
        snprintf(err, errlen, "min_length and no_repeat_ngram_size must be >= 0");
    else if (!(s->repetition_penalty > 0) || !isfinite(s->repetition_penalty))
        snprintf(err, errlen, "repetition_penalty %g: must be > 0", s->repetition_penalty);
    else if (s->sample && (!(s->temperature > 0) || !isfinite(s->temperature)))
        snprintf(err, errlen, "temperature %g: must be > 0", s->temperature);
    else if (s->sample && (s->top_k < 0 || !(s->top_p > 0 && s->top_p <= 1)))
        snprintf(err, errlen, "top_k must be >= 0 and top_p in (0, 1]");
    else if (s->forced_bos < -1)
        snprintf(err, errlen, "forced_bos %d: must be a token id or -1", s->forced_bos);
    else
        return 0;
    return -1;
}

void s2s_output_free(s2s_output *o) {
    if (!o) return;
    free(o->ids);
    free(o->logits);
    free(o->logprob);
    free(o->enc_self);
    free(o->dec_self);
    free(o->cross);
    for (int k = 0; o->nbest && k < o->n_best; k++) free(o->nbest[k].ids);
    free(o->nbest);
    memset(o, 0, sizeof *o);
}

/* ---------------------------------------------------------------------------------------
 * The trace. Each step runs some rows ("runs"); each run produces one or more tokens
 * ("records": greedy one, a beam up to 2 * beams candidates that survive). A record names
 * the run that produced it, a run names the record whose token it read, so any hypothesis
 * walks back to the start token along its own path. */

typedef struct {
    int *run_prev, *run_step; /* [runs]: the record read (-1 at step 0), the step */
    float *run_lse;           /* [runs]: log-sum-exp of the raw logits (beams, want_scores) */
    size_t *run_att;          /* [runs]: offset of its attention in att (want_attention) */
    int n_run, cap_run;
    int *rec_run, *rec_tok;   /* [records] */
    float *rec_lp;            /* [records] the model's log-probability of the token */
    int n_rec, cap_rec;
    float *att;               /* captures: per run L*H*(t+1) self then L*H*S cross */
    size_t n_att, cap_att;
    float *logits;            /* [runs][V] raw logits (want_logits) */
} trace;

/* realloc *p to cap elements of es bytes; 0 or -1 (then *p is unchanged) */
static int resize(void **p, size_t cap, size_t es) {
    void *q = realloc(*p, es * (cap ? cap : 1));
    if (!q) return -1;
    *p = q;
    return 0;
}

static int trace_reserve_runs(trace *tr, int need, int V, int want_logits) {
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

static int trace_reserve_recs(trace *tr, int need) {
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

static int trace_reserve_att(trace *tr, size_t need) {
    if (need <= tr->cap_att) return 0;
    size_t cap = tr->cap_att ? tr->cap_att : 1 << 16;
    while (cap < need) cap *= 2;
    if (resize((void **)&tr->att, cap, sizeof(float))) return -1;
    tr->cap_att = cap;
    return 0;
}

static int add_record(trace *tr, int run, int tok, float lp) {
    if (trace_reserve_recs(tr, tr->n_rec + 1)) return -1;
    tr->rec_run[tr->n_rec] = run;
    tr->rec_tok[tr->n_rec] = tok;
    tr->rec_lp[tr->n_rec] = lp;
    return tr->n_rec++;
}

static void trace_free(trace *tr) {
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

/* Tokens in the path ending at record rec (after the start token). */
static int trace_length(const trace *tr, int rec) { return tr->run_step[tr->rec_run[rec]] + 1; }

/* The records of that path, first to last, into recs [trace_length]; returns the length. */
static int trace_records(const trace *tr, int rec, int *recs) {
    const int n = trace_length(tr, rec);
    for (int k = n - 1; k >= 0; k--, rec = tr->run_prev[tr->rec_run[rec]]) recs[k] = rec;
    return n;
}

/* ---------------------------------------------------------------------------------------
 * Per-sentence search state */

typedef struct {
    int rows;       /* rows it runs per step at most (beams, samples or 1) */
    int slot0;      /* its slots are slot0 .. slot0 + rows - 1 */
    int n_live;     /* hypotheses still growing */
    int *live_slot, *live_rec, *live_done;
    float *live_score;
    uint64_t *rng;  /* sampling: one stream per sample */
    beam_heap heap; /* beams: finished hypotheses */
    beam_hyp *heap_store;
    int *fin_rec;   /* greedy, sampling, forced: each row's last record */
    int limit;      /* steps it may take */
    int done;
} sent_search;

/* A row of this step: which sentence and live hypothesis it serves. */
typedef struct {
    int sent, live;
} row_ref;

/* ---------------------------------------------------------------------------------------
 * Output */

/* Build sentence i's output from its finished hypotheses recs[0..k) (best first) and their
 * scores. 0 or -1 (OOM). */
static int make_output(const s2s_model *m, const s2s_opts *o, const trace *tr, const int *recs,
                       const float *scores, int k, int S, s2s_output *out) {
    const s2s_config *c = &m->c;
    const int L = c->dec_layers, H = c->dec_heads, V = c->decoder_vocab_size;
    out->nbest = calloc((size_t)k, sizeof(s2s_hyp));
    int *path = malloc(sizeof(int) * (size_t)trace_length(tr, recs[0]));
    if (!out->nbest || !path) goto oom;
    out->n_best = k;
    for (int h = 0; h < k; h++) {
        s2s_hyp *hy = &out->nbest[h];
        hy->n = trace_length(tr, recs[h]);
        hy->ids = malloc(sizeof(int) * (size_t)hy->n);
        if (!hy->ids) goto oom;
        for (int t = hy->n - 1, rec = recs[h]; t >= 0; t--, rec = tr->run_prev[tr->rec_run[rec]])
            hy->ids[t] = tr->rec_tok[rec];
        hy->score = scores[h];
    }
    /* the output itself: the best hypothesis, with what was captured along its path */
    const int n = trace_records(tr, recs[0], path);
    out->n = n;
    out->score = scores[0];
    out->ids = malloc(sizeof(int) * (size_t)n);
    if (!out->ids) goto oom;
    memcpy(out->ids, out->nbest[0].ids, sizeof(int) * (size_t)n);
    if (o->want_scores) {
        out->logprob = malloc(sizeof(float) * (size_t)n);
        if (!out->logprob) goto oom;
        for (int t = 0; t < n; t++) out->logprob[t] = tr->rec_lp[path[t]];
    }
    if (o->want_logits) {
        out->logits = malloc(sizeof(float) * (size_t)n * V);
        if (!out->logits) goto oom;
        for (int t = 0; t < n; t++)
            memcpy(out->logits + (size_t)t * V, tr->logits + (size_t)tr->rec_run[path[t]] * V,
                   sizeof(float) * (size_t)V);
    }
    if (o->want_attention) {
        out->dec_self = calloc((size_t)L * H * n * n, sizeof(float));
        out->cross = malloc(sizeof(float) * (size_t)L * H * n * S);
        if (!out->dec_self || !out->cross) goto oom;
        for (int t = 0; t < n; t++) {
            const float *self = tr->att + tr->run_att[tr->rec_run[path[t]]];
            const float *cross = self + (size_t)L * H * (t + 1);
            for (int lh = 0; lh < L * H; lh++) {
                memcpy(out->dec_self + ((size_t)lh * n + t) * n, self + (size_t)lh * (t + 1),
                       sizeof(float) * (size_t)(t + 1));
                memcpy(out->cross + ((size_t)lh * n + t) * S, cross + (size_t)lh * S, sizeof(float) * (size_t)S);
            }
        }
    }
    free(path);
    return 0;
oom:
    free(path);
    return -1;
}

/* ---------------------------------------------------------------------------------------
 * The beam step of one sentence (BeamSearchScorer.process) */

/* cands: each live beam's 2*beams best (from beam_candidates), beam-major. Appends the
 * records of the surviving candidates; fills the sentence's next live beams (with their
 * parents in parent[]) and its heap. Returns 0, or -1 (OOM). */
static int beam_step(sent_search *ss, const s2s_search *s, int eos, int V, trace *tr,
                     const beam_cand *cands, const int *cand_run, int n_beams, int t, int max_length,
                     int *parent, beam_cand *merged) {
    const int B = s->beams, K = 2 * B;
    /* the 2*beams best over all beams; ties: the lower flat index (beam * V + id) first */
    int n = 0;
    for (int k = 0; k < n_beams; k++)
        for (int j = 0; j < K; j++) {
            const beam_cand cd = cands[k * K + j];
            const long flat = (long)k * V + cd.token;
            if (n == K) {
                const beam_cand *w = &merged[K - 1];
                if (!(cd.score > w->score) && !(cd.score == w->score && flat < (long)parent[K - 1] * V + w->token))
                    continue;
            }
            int at = n < K ? n++ : K - 1;
            while (at > 0) {
                const beam_cand *p = &merged[at - 1];
                const long pf = (long)parent[at - 1] * V + p->token;
                if (!(cd.score > p->score || (cd.score == p->score && flat < pf))) break;
                merged[at] = merged[at - 1];
                parent[at] = parent[at - 1];
                at--;
            }
            merged[at] = cd;
            parent[at] = k;
        }
    /* in rank order: </s> among the first beams-many finishes a hypothesis, any other token
     * continues one; parent[] is rewritten in place to map new beam -> old beam (live <= r,
     * so each entry is read before it is overwritten) */
    int live = 0;
    for (int r = 0; r < n && live < B; r++) {
        const beam_cand cd = merged[r];
        if (cd.token == eos && r >= B) continue;
        const int rec = add_record(tr, cand_run[parent[r]], cd.token, 0);
        if (rec < 0) return -1;
        if (cd.token == eos) {
            heap_add(&ss->heap, s, cd.score, t + 1, rec);
        } else {
            parent[live] = parent[r];
            ss->live_score[live] = cd.score;
            ss->live_rec[live] = rec;
            live++;
        }
    }
    if (heap_is_done(&ss->heap, s, merged[0].score, t + 2, max_length)) ss->done = 1;
    ss->n_live = live;
    return 0;
}

/* The model's log-probability of each record added at this step (beams): the token's raw
 * logit minus its run's raw log-sum-exp. */
static void fill_record_lp(trace *tr, int from, const float *logits_of_run0, int run0, int V) {
    for (int r = from; r < tr->n_rec; r++) {
        const int run = tr->rec_run[r];
        tr->rec_lp[r] = logits_of_run0[(size_t)(run - run0) * V + tr->rec_tok[r]] - tr->run_lse[run];
    }
}

/* ---------------------------------------------------------------------------------------
 * One step's choices, row by row */

/* What choose_rows reads and where it writes: each row its own slots. */
typedef struct {
    const s2s_config *c;
    const s2s_search *s;
    const s2s_opts *o;
    const s2s_source *src;
    sent_search *ss;
    const row_ref *refs;
    trace *tr;
    float *logits;       /* [rows, V]: greedy_choose edits a row and restores it */
    float *work;         /* 2 V floats per worker */
    int *pathbuf;        /* ml + 1 ids per row */
    beam_cand *cands;    /* K2 per row */
    int *choice;
    float *choice_lp;
    int V, t, ml, K2, run0, beam;
} choose_job;

/* Rows [lo, hi): each row's choice (greedy, sampled, forced) or its beam candidates. */
static void choose_rows(const void *ctx, int lo, int hi, int worker) {
    const choose_job *j = ctx;
    const s2s_config *c = j->c;
    const s2s_search *s = j->s;
    const s2s_opts *o = j->o;
    const s2s_source *src = j->src;
    const int V = j->V, t = j->t, ml = j->ml;
    trace *tr = j->tr;
    float *wk = j->work + (size_t)worker * 2 * V;
    for (int b = lo; b < hi; b++) {
        const int i = j->refs[b].sent, k = j->refs[b].live;
        sent_search *q = &j->ss[i];
        float *lg = j->logits + (size_t)b * V;
        step_ctx x = {c, s, t, ml, o->ignore_eos};
        int *pi = j->pathbuf + (size_t)b * (ml + 1);
        prefix p = {pi, 1};
        pi[0] = c->start_id;
        if (!src[i].forced && (search_has_processors(s, o->ignore_eos) || s->sample)) {
            const int rec = q->live_rec[k];
            /* non-forced rows stop by step ml - 2, so the path fits pathbuf's ml + 1 ids */
            p.n = 1 + (rec < 0 ? 0 : trace_records(tr, rec, pi + 1));
            for (int r = 1; r < p.n; r++) pi[r] = tr->rec_tok[pi[r]];
        }
        if (j->beam && !src[i].forced) {
            beam_candidates(&x, lg, &p, q->live_score[k], wk, j->cands + (size_t)b * j->K2, &tr->run_lse[j->run0 + b]);
            continue;
        }
        int next, best = -1;
        if (src[i].forced) next = src[i].forced[t];
        else if (s->sample) next = sample_choose(&x, lg, &p, wk, &q->rng[k]);
        else next = greedy_choose(&x, lg, &p, wk, &best);
        j->choice[b] = next;
        j->choice_lp[b] = o->want_scores ? log_softmax_at(lg, V, next, best) : 0;
    }
}

/* ---------------------------------------------------------------------------------------
 * s2s_translate_ids */

int s2s_translate_ids(const s2s_model *m, const s2s_source *src, int n,
                         const s2s_opts *opts, s2s_output *out, char *err, size_t errlen) {
    static const s2s_opts no_opts = {0};
    const s2s_opts *o = opts ? opts : &no_opts;
    const s2s_config *c = &m->c;
    const int d = c->d_model, V = c->decoder_vocab_size, L = c->dec_layers, H = c->dec_heads;
    const int ml = s2s_max_length(m, o);
    s2s_search search = o->search ? *o->search : s2s_search_defaults(m);
    if (s2s_search_check(&search, err, errlen)) return -1;
    if (search.forced_bos >= c->decoder_vocab_size) {
        snprintf(err, errlen, "forced_bos %d: outside the target vocabulary", search.forced_bos);
        return -1;
    }
    const s2s_search *s = &search;
    int total = 0, rc = -1;
    memset(out, 0, sizeof(*out) * (size_t)n);
    for (int i = 0; i < n; i++) {
        if (src[i].n < 1 || src[i].n > c->max_pos) {
            snprintf(err, errlen, "sentence %d: %d source tokens (1..%d allowed)", i, src[i].n, c->max_pos);
            return -1;
        }
        for (int j = 0; j < src[i].n; j++)
            if (src[i].ids[j] < 0 || src[i].ids[j] >= c->vocab_size) {
                snprintf(err, errlen, "sentence %d: source id %d outside the vocabulary", i, src[i].ids[j]);
                return -1;
            }
        for (int j = 0; src[i].forced && j < src[i].n_forced; j++)
            if (src[i].forced[j] < 0 || src[i].forced[j] >= V) {
                snprintf(err, errlen, "sentence %d: target id %d outside the vocabulary", i, src[i].forced[j]);
                return -1;
            }
        if (src[i].forced && (src[i].n_forced < 1 || src[i].n_forced > c->max_pos)) {
            snprintf(err, errlen, "sentence %d: %d forced target tokens (1..%d allowed)", i,
                     src[i].n_forced, c->max_pos);
            return -1;
        }
        total += src[i].n;
    }
    if (n == 0) return 0;

    const double t_start = now();
    const int beam = s->beams > 1 && !s->sample, B = s->beams, K2 = 2 * B;
    enc_memory mem = {0};
    dec_state ds = {0};
    trace tr = {0};
    sent_search *ss = calloc((size_t)n, sizeof *ss);
    int *off = malloc(sizeof(int) * (size_t)n), *len = malloc(sizeof(int) * (size_t)n);
    const int **ids = malloc(sizeof(int *) * (size_t)n);
    const size_t x_bytes = sizeof(float) * (size_t)total * d;
    float *X = at_block_alloc(x_bytes); /* the encoder output, kept for the next batch */
    float **enc_self = calloc((size_t)n, sizeof(float *));
    dec_row *rows = NULL;
    row_ref *refs = NULL;
    float **att_self = NULL, **att_cross = NULL, *work = NULL, *choice_lp = NULL;
    int *choice = NULL;
    beam_cand *cands = NULL, *merged = NULL, *vcands = NULL;
    int *cand_run = NULL, *parent = NULL, *pathbuf = NULL, *recs = NULL;
    float *scores = NULL;
    if (!ss || !off || !len || !ids || !X || !enc_self) goto oom;

    /* sentences: rows, slots, limits */
    int n_slots = 0, expect_max = 0, max_limit = 1;
    for (int i = 0, o0 = 0; i < n; i++) {
        off[i] = o0;
        len[i] = src[i].n;
        ids[i] = src[i].ids;
        o0 += src[i].n;
        sent_search *q = &ss[i];
        q->rows = src[i].forced ? 1 : beam ? B : s->sample ? s->n_best : 1;
        q->slot0 = n_slots;
        n_slots += q->rows;
        q->limit = src[i].forced ? src[i].n_forced : ml - 1;
        q->live_slot = malloc(sizeof(int) * (size_t)q->rows);
        q->live_rec = malloc(sizeof(int) * (size_t)q->rows);
        q->live_done = calloc((size_t)q->rows, sizeof(int));
        q->live_score = calloc((size_t)q->rows, sizeof(float));
        q->fin_rec = malloc(sizeof(int) * (size_t)q->rows);
        q->rng = malloc(sizeof(uint64_t) * (size_t)q->rows);
        q->heap_store = malloc(sizeof(beam_hyp) * (size_t)(B + 1));
        if (!q->live_slot || !q->live_rec || !q->live_done || !q->live_score || !q->fin_rec || !q->rng ||
            !q->heap_store)
            goto oom;
        heap_init(&q->heap, q->heap_store, B);
        /* greedy, forced: one row; sampling: n_best rows; beams: one row at step 0 (the
         * other beams start at -1e9 with the same state), then B */
        q->n_live = src[i].forced || !beam ? q->rows : 1;
        for (int k = 0; k < q->rows; k++) {
            q->live_slot[k] = q->slot0 + k;
            q->live_rec[k] = -1;
            q->rng[k] = sample_seed(s->seed, src[i].ids, src[i].n, k);
        }
        if (o->want_attention) {
            enc_self[i] = out[i].enc_self = malloc(sizeof(float) * (size_t)c->enc_layers * c->enc_heads * len[i] * len[i]);
            if (!out[i].enc_self) goto oom;
        }
        /* caches sized before decoding for twice the source: the loop then allocates only
         * for unusually long outputs, and a short sentence does not reserve the whole
         * length limit (512 steps x 6 layers of keys and values for opus-mt) */
        int expect = 2 * src[i].n + 8;
        if (expect > q->limit) expect = q->limit;
        if (expect > expect_max) expect_max = expect;
        if (q->limit > max_limit) max_limit = q->limit;
    }
    if (encode(m, ids, off, len, n, total, X, o->want_attention ? enc_self : NULL)) goto oom;
    mem.n = n;
    mem.total = total;
    mem.off = off;
    mem.len = len;
    if (cross_kv(m, X, &mem)) goto oom;
    at_block_free(X, x_bytes);
    X = NULL;

    const int max_rows = n_slots;
    if (dec_init(&ds, m, &mem, n_slots, max_rows, expect_max)) goto oom;
    rows = malloc(sizeof(dec_row) * (size_t)max_rows);
    refs = malloc(sizeof(row_ref) * (size_t)max_rows);
    att_self = calloc((size_t)max_rows, sizeof(float *));
    att_cross = calloc((size_t)max_rows, sizeof(float *));
    cands = malloc(sizeof(beam_cand) * (size_t)max_rows * K2);
    merged = malloc(sizeof(beam_cand) * (size_t)K2);
    cand_run = malloc(sizeof(int) * (size_t)B);
    parent = malloc(sizeof(int) * (size_t)(K2 > B ? K2 : B));
    vcands = malloc(sizeof(beam_cand) * (size_t)B * K2);
    pathbuf = malloc(sizeof(int) * (size_t)max_rows * (ml + 1));
    choice = malloc(sizeof(int) * (size_t)max_rows);
    choice_lp = malloc(sizeof(float) * (size_t)max_rows);
    if (!rows || !refs || !att_self || !att_cross || !cands || !merged || !cand_run || !parent || !pathbuf ||
        !vcands || !choice || !choice_lp)
        goto oom;
    if (trace_reserve_runs(&tr, max_rows * expect_max, V, o->want_logits) ||
        trace_reserve_recs(&tr, max_rows * expect_max * (beam ? 2 : 1)))
        goto oom;
    const int threads = at_threads() > 0 ? at_threads() : 1; /* the per-thread work rows below */
    work = malloc(sizeof(float) * (size_t)threads * 2 * V);
    if (!work) goto oom;

    const double t_decode = now();
    int steps = 0;
    for (int t = 0;; t++, steps++) {
        /* this step's rows */
        int nr = 0;
        for (int i = 0; i < n; i++) {
            sent_search *q = &ss[i];
            if (q->done) continue;
            for (int k = 0; k < q->n_live; k++) {
                if (q->live_done[k]) continue;
                const int rec = q->live_rec[k];
                rows[nr] = (dec_row){i, q->live_slot[k], rec < 0 ? c->start_id : tr.rec_tok[rec]};
                refs[nr] = (row_ref){i, k};
                nr++;
            }
        }
        if (nr == 0) break;
        if (t + 1 > ds.cap) {
            int cap = 2 * ds.cap > t + 1 ? 2 * ds.cap : t + 1;
            if (cap > max_limit) cap = max_limit; /* the longest sentence's steps, forced ones included */
            if (dec_reserve(&ds, cap)) goto oom;
        }
        /* runs of this step in the trace, with room for their captures */
        const int run0 = tr.n_run;
        if (trace_reserve_runs(&tr, run0 + nr, V, o->want_logits)) goto oom;
        size_t need = tr.n_att;
        for (int b = 0; b < nr; b++) {
            tr.run_prev[run0 + b] = ss[refs[b].sent].live_rec[refs[b].live];
            tr.run_step[run0 + b] = t;
            tr.run_att[run0 + b] = need;
            if (o->want_attention) need += (size_t)L * H * (t + 1 + len[refs[b].sent]);
        }
        tr.n_run += nr;
        if (o->want_attention) {
            if (trace_reserve_att(&tr, need)) goto oom;
            for (int b = 0; b < nr; b++) {
                att_self[b] = tr.att + tr.run_att[run0 + b];
                att_cross[b] = att_self[b] + (size_t)L * H * (t + 1);
            }
            tr.n_att = need;
        }

        decoder_step(&ds, rows, nr, t, o->want_attention ? att_self : NULL, o->want_attention ? att_cross : NULL);
        if (o->want_logits)
            memcpy(tr.logits + (size_t)run0 * V, ds.logits, sizeof(float) * (size_t)nr * V);

        /* each row's choice (greedy, sampled, forced) or its beam candidates, in parallel:
         * a row reads its own logits (greedy edits them and puts them back) and writes its
         * own slots */
        const choose_job job = {c, s, o, src, ss, refs, &tr, ds.logits, work, pathbuf, cands, choice, choice_lp,
                                V, t, ml, K2, run0, beam};
        at_parallel_for(nr, threads, choose_rows, &job);

        for (int b0 = 0; b0 < nr;) {
            const int i = refs[b0].sent;
            sent_search *q = &ss[i];
            int nb = 0;
            while (b0 + nb < nr && refs[b0 + nb].sent == i) nb++;
            if (!beam || src[i].forced) {
                /* one token per row: a row is finished by </s>, the length limit or the end
                 * of its forced target; the sentence when all its rows are */
                int all = 1;
                for (int b = b0; b < b0 + nb; b++) {
                    const int k = refs[b].live, next = choice[b];
                    const int rec = add_record(&tr, run0 + b, next, choice_lp[b]);
                    if (rec < 0) goto oom;
                    q->live_rec[k] = rec;
                    if (src[i].forced ? t + 1 >= src[i].n_forced : (next == c->eos_id || t >= ml - 2)) {
                        q->live_done[k] = 1;
                        q->fin_rec[k] = rec;
                    }
                }
                for (int k = 0; k < q->n_live; k++) all &= q->live_done[k];
                q->done = all;
                b0 += nb;
                continue;
            }
            /* beams: the sentence's step over its rows' candidates, then the caches follow
             * the beams: the first child of a beam keeps its slot, other children copy it */
            const int from = tr.n_rec;
            int n_beams = nb, old_slot[1024];
            const beam_cand *sc = cands + (size_t)b0 * K2;
            for (int k = 0; k < nb; k++) {
                cand_run[k] = run0 + b0 + k;
                old_slot[k] = q->live_slot[k];
            }
            if (t == 0) {
                /* beams 1..B-1 start at -1e9 with beam 0's state: they can only place when
                 * beam 0 has fewer than 2 * beams finite candidates */
                n_beams = B;
                memcpy(vcands, sc, sizeof(beam_cand) * (size_t)K2);
                for (int k = 1; k < B; k++) {
                    cand_run[k] = run0 + b0;
                    old_slot[k] = q->live_slot[0];
                    beam_cand *ck = vcands + (size_t)k * K2;
                    if (isfinite(sc[K2 - 1].score)) {
                        for (int j = 0; j < K2; j++) ck[j] = (beam_cand){-INFINITY, sc[j].token};
                    } else {
                        step_ctx x = {c, s, t, ml, o->ignore_eos};
                        pathbuf[0] = c->start_id;
                        prefix p = {pathbuf, 1};
                        float lse;
                        beam_candidates(&x, ds.logits + (size_t)b0 * V, &p, -1e9f, work, ck, &lse);
                    }
                }
                sc = vcands;
            }
            if (beam_step(q, s, c->eos_id, V, &tr, sc, cand_run, n_beams, t, ml, parent, merged)) goto oom;
            if (o->want_scores) fill_record_lp(&tr, from, ds.logits, run0, V);
            if (!q->done && t + 2 < ml) {
                /* parent[j] is new beam j's old beam */
                int owner[1024], used[1024];
                for (int k = 0; k < q->rows; k++) used[k] = 0;
                for (int j = 0; j < q->n_live; j++) {
                    const int sl = old_slot[parent[j]] - q->slot0;
                    owner[j] = used[sl] ? -1 : sl;
                    used[sl] = 1;
                }
                for (int j = 0, free_k = 0; j < q->n_live; j++) {
                    if (owner[j] < 0) {
                        while (used[free_k]) free_k++;
                        used[free_k] = 1;
                        owner[j] = free_k;
                        dec_copy_slot(&ds, q->slot0 + free_k, old_slot[parent[j]], t + 1);
                    }
                }
                for (int j = 0; j < q->n_live; j++) q->live_slot[j] = q->slot0 + owner[j];
            } else if (!q->done) {
                /* the length limit: finalize adds the open beams (generated_len = t + 1) */
                for (int j = 0; j < q->n_live; j++) heap_add(&q->heap, s, q->live_score[j], t + 1, q->live_rec[j]);
                q->done = 1;
            }
            b0 += nb;
        }
    }

    /* outputs */
    recs = malloc(sizeof(int) * (size_t)(B > s->n_best ? B : s->n_best) + sizeof(int));
    scores = malloc(sizeof(float) * (size_t)(B > s->n_best ? B : s->n_best) + sizeof(float));
    if (!recs || !scores) goto oom;
    for (int i = 0; i < n; i++) {
        sent_search *q = &ss[i];
        int k = 0;
        if (beam && !src[i].forced) {
            heap_sort(&q->heap);
            k = s->n_best < q->heap.n ? s->n_best : q->heap.n;
            for (int h = 0; h < k; h++) {
                recs[h] = q->heap.h[h].rec;
                scores[h] = (float)q->heap.h[h].score;
            }
        } else {
            k = q->rows;
            for (int h = 0; h < k; h++) {
                recs[h] = q->fin_rec[h];
                float sum = 0;
                if (o->want_scores)
                    for (int rec = recs[h]; rec >= 0; rec = tr.run_prev[tr.rec_run[rec]]) sum += tr.rec_lp[rec];
                scores[h] = sum;
            }
        }
        if (make_output(m, o, &tr, recs, scores, k, len[i], &out[i])) goto oom;
    }
    if (o->timing) {
        o->timing->encode = t_decode - t_start;
        o->timing->decode = now() - t_decode;
        o->timing->steps = steps;
    }
    rc = 0;
    goto cleanup;
oom:
    snprintf(err, errlen, "out of memory translating a batch of %d sentences (%d source tokens)", n, total);
    for (int i = 0; i < n; i++) s2s_output_free(&out[i]);
cleanup:
    for (int i = 0; ss && i < n; i++) {
        free(ss[i].live_slot);
        free(ss[i].live_rec);
        free(ss[i].live_done);
        free(ss[i].live_score);
        free(ss[i].fin_rec);
        free(ss[i].rng);
        free(ss[i].heap_store);
    }
    free(ss);
    enc_memory_free(m, &mem);
    dec_free(&ds);
    trace_free(&tr);
    free(off);
    free(len);
    free(ids);
    at_block_free(X, x_bytes);
    free(enc_self);
    free(rows);
    free(refs);
    free(att_self);
    free(att_cross);
    free(work);
    free(cands);
    free(vcands);
    free(choice);
    free(choice_lp);
    free(merged);
    free(cand_run);
    free(parent);
    free(pathbuf);
    free(recs);
    free(scores);
    return rc;
}
