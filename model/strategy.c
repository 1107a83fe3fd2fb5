/* The one-token-per-row strategies (generate.h): greedy, sampling and forced decoding. Each
 * row is a hypothesis of its own: it reads its logits, takes one token (the argmax, a draw,
 * or the forced target's next id), and ends at </s>, the length limit or the forced
 * target's end; its sentence is done when all its rows are. */
#include "generate.h"

#include <math.h>
#include <stdlib.h>

prefix row_prefix(const gen *g, int b, int with_path) {
    const row_ref r = g->refs[b];
    int *ids = g->pathbuf + (size_t)b * (g->ml + 1);
    /* non-forced rows stop by step ml - 2, so a path fits pathbuf's ml + 1 ids */
    if (with_path) return (prefix){ids, trace_prefix(&g->tr, g->sent[r.sent].live_rec[r.live], g->c->start_id, ids)};
    ids[0] = g->c->start_id;
    return (prefix){ids, 1};
}

/* ---------------------------------------------------------------------------------------
 * Choosing, row by row */

/* Row b's choice, with the model's log-probability of it when asked for. */
static void set_choice(const gen *g, int b, int next, int best) {
    g->choice[b] = next;
    g->choice_lp[b] = g->o->want_scores ? log_softmax_at(g->ds.logits + (size_t)b * g->V, g->V, next, best) : 0;
}

static void greedy_row(const gen *g, int b, float *work) {
    const prefix p = row_prefix(g, b, search_has_processors(g->s, g->o->ignore_eos));
    int best = -1;
    float *row = g->ds.logits + (size_t)b * g->V;
    const int next = greedy_choose(&g->x, row, &p, work, &best);
    set_choice(g, b, next, best);
    if (g->s->processed_logprob && g->o->want_scores) /* HF's recorded scores: speech's avg_logprob */
        g->choice_lp[b] = processed_logprob(&g->x, row, &p, work, next, 0);
}

static void sample_row(const gen *g, int b, float *work) {
    const row_ref r = g->refs[b];
    const prefix p = row_prefix(g, b, 1);
    const float *row = g->ds.logits + (size_t)b * g->V;
    const int next = sample_choose(&g->x, row, &p, work, &g->sent[r.sent].one.rng[r.live]);
    set_choice(g, b, next, -1);
    if (g->s->processed_logprob && g->o->want_scores)
        g->choice_lp[b] = processed_logprob(&g->x, row, &p, work, next, g->s->top_k);
}

static void forced_row(const gen *g, int b, float *work) {
    (void)work;
    set_choice(g, b, g->sent[g->refs[b].sent].src->forced[g->x.t], -1);
}

void prefix_row(const gen *g, int b) {
    set_choice(g, b, g->sent[g->refs[b].sent].src->prefix[g->x.t], -1);
}

/* Rows of a prefix step record their token and go on (no row ends inside a prefix: it is
 * at most max_length - 2 long, and its </s> is fed on as HF feeds decoder_input_ids). */
int prefix_advance(gen *g, sentence *q, int b0, int nb) {
    for (int b = b0; b < b0 + nb; b++) {
        const int rec = trace_add_record(&g->tr, g->run0 + b, g->choice[b], g->choice_lp[b]);
        if (rec < 0) return -1;
        q->live_rec[g->refs[b].live] = rec;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * A sentence's life */

static int rows_start(sentence *q, int rows) {
    q->rows = q->n_live = rows;
    q->one.fin_rec = malloc(sizeof(int) * (size_t)rows);
    return q->one.fin_rec ? 0 : -1;
}

/* greedy, forced: one row */
static int one_row_start(const gen *g, sentence *q) {
    (void)g;
    return rows_start(q, 1);
}

static int sample_start(const gen *g, sentence *q) {
    if (rows_start(q, g->s->n_best)) return -1;
    q->one.rng = malloc(sizeof(uint64_t) * (size_t)q->rows);
    if (!q->one.rng) return -1;
    const int n_ids = q->src->ids ? q->src->n : 0; /* a speech source has frames, no ids */
    for (int k = 0; k < q->rows; k++) q->one.rng[k] = sample_seed(g->s->seed, q->src->ids, n_ids, k);
    return 0;
}

/* One token per row: a row is finished by </s> (not when forced), the length limit or the
 * end of its forced target; the sentence when all its rows are. */
static int rows_advance(gen *g, sentence *q, int b0, int nb) {
    const int t = g->x.t, forced = q->src->forced != NULL;
    for (int b = b0; b < b0 + nb; b++) {
        const int k = g->refs[b].live, next = g->choice[b];
        const int rec = trace_add_record(&g->tr, g->run0 + b, next, g->choice_lp[b]);
        if (rec < 0) return -1;
        q->live_rec[k] = rec;
        if (g->o->on_token && !forced) g->o->on_token(g->o->token_user, (int)(q - g->sent), k, next, g->choice_lp[b]);
        if (forced ? t + 1 >= q->src->n_forced : (next == g->c->eos_id || t >= g->ml - 2)) {
            q->live_done[k] = 1;
            q->one.fin_rec[k] = rec;
        }
    }
    int all = 1;
    for (int k = 0; k < q->n_live; k++) all &= q->live_done[k];
    q->done = all;
    return 0;
}

/* Every row in row order; a score is the sum of its tokens' log-probabilities, last to
 * first, a target prefix's left out as beam scores leave it out; normalized over the tokens
 * after the prefix as beam search normalizes (NaN both without want_scores: the
 * log-probabilities were not computed). */
static int rows_finish(const gen *g, sentence *q, int *recs, s2s_score *scores) {
    const trace *tr = &g->tr;
    for (int h = 0; h < q->rows; h++) {
        recs[h] = q->one.fin_rec[h];
        float sum = g->o->want_scores ? 0 : NAN;
        if (g->o->want_scores)
            for (int rec = recs[h]; rec >= 0; rec = tr->run_prev[tr->rec_run[rec]])
                if (tr->run_step[tr->rec_run[rec]] >= q->src->n_prefix) sum += tr->rec_lp[rec];
        const int len = trace_length(tr, recs[h]) - q->src->n_prefix;
        scores[h] = (s2s_score){sum, (float)normalize_score(sum, len, g->s->length_penalty)};
    }
    return q->rows;
}

static void rows_free(sentence *q) {
    free(q->one.fin_rec);
    free(q->one.rng);
}

const strategy greedy_strategy = {one_row_start, greedy_row, rows_advance, rows_finish, rows_free};
const strategy sample_strategy = {sample_start, sample_row, rows_advance, rows_finish, rows_free};
const strategy forced_strategy = {one_row_start, forced_row, rows_advance, rows_finish, rows_free};
