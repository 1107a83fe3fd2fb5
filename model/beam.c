/* Beam search as a strategy (generate.h), as Hugging Face's BeamSearchScorer: each row is a
 * live beam that lists its 2 * beams best candidates; the sentence keeps the 2 * beams best
 * over all its beams, finishes those that end in </s> into its heap and continues the rest,
 * and its cache slots follow the beams (beam_reorder_slots). */
#include "generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------
 * Choosing, row by row */

static void beam_row(const gen *g, int b, float *work) {
    const row_ref r = g->refs[b];
    const int K2 = 2 * g->s->beams;
    const prefix p = row_prefix(g, b, search_has_processors(g->s, g->o->ignore_eos));
    beam_candidates(&g->x, g->ds.logits + (size_t)b * g->V, &p, g->sent[r.sent].beam.score[r.live], work,
                    g->cands + (size_t)b * K2, &g->tr.run_lse[g->run0 + b]);
}

/* ---------------------------------------------------------------------------------------
 * The beam step of one sentence (BeamSearchScorer.process) */

/* cands: each of n_beams beams' 2*beams best, beam-major, into merged: the 2*beams best over
 * all beams with each one's beam in parent[]; ties: the lower flat index (beam * V + id)
 * first. Returns how many. */
static int merge_candidates(const beam_cand *cands, int n_beams, int B, int V, beam_cand *merged, int *parent) {
    const int K = 2 * B;
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
    return n;
}

/* The sentence's step over its beams' candidates: appends the records of the surviving
 * candidates; fills the next live beams (with their old beams in bs->parent) and the heap.
 * 0, or -1 (OOM). */
static int beam_step(gen *g, sentence *q, const beam_cand *cands, int n_beams) {
    beam_scratch *w = &g->bs;
    const s2s_search *s = g->s;
    const int B = s->beams, t = g->x.t, eos = g->c->eos_id;
    const int gen_len = t + 1 - q->src->n_prefix; /* HF's generated_len: the prefix is prompt */
    const int n = merge_candidates(cands, n_beams, B, g->V, w->merged, w->parent);
    /* in rank order: </s> among the first beams-many finishes a hypothesis, any other token
     * continues one; parent[] is rewritten in place to map new beam -> old beam (live <= r,
     * so each entry is read before it is overwritten) */
    int live = 0;
    for (int r = 0; r < n && live < B; r++) {
        const beam_cand cd = w->merged[r];
        if (cd.token == eos && r >= B) continue;
        const int rec = trace_add_record(&g->tr, w->cand_run[w->parent[r]], cd.token, 0);
        if (rec < 0) return -1;
        if (cd.token == eos) {
            heap_add(&q->beam.heap, s, cd.score, gen_len, rec);
        } else {
            w->parent[live] = w->parent[r];
            q->beam.score[live] = cd.score;
            q->live_rec[live] = rec;
            live++;
        }
    }
    if (heap_is_done(&q->beam.heap, s, w->merged[0].score, t + 2, 1 + q->src->n_prefix, g->ml)) q->done = 1;
    q->n_live = live;
    return 0;
}

/* The model's log-probability of each record added at this step (from on): the token's raw
 * logit minus its run's raw log-sum-exp. */
static void fill_record_lp(gen *g, int from) {
    trace *tr = &g->tr;
    for (int r = from; r < tr->n_rec; r++) {
        const int run = tr->rec_run[r];
        tr->rec_lp[r] = g->ds.logits[(size_t)(run - g->run0) * g->V + tr->rec_tok[r]] - tr->run_lse[run];
    }
}

/* The first searched step (0, or the one after a target prefix) runs beam 0 alone (row b0);
 * beams 1..B-1 start at -1e9 with its state, so they can only place when beam 0 has fewer
 * than 2 * beams finite candidates. Every beam's candidates into bs->first. */
static const beam_cand *first_step_candidates(gen *g, sentence *q, int b0) {
    beam_scratch *w = &g->bs;
    const int B = g->s->beams, K2 = 2 * B;
    const beam_cand *c0 = g->cands + (size_t)b0 * K2;
    memcpy(w->first, c0, sizeof(beam_cand) * (size_t)K2);
    for (int k = 1; k < B; k++) {
        w->cand_run[k] = g->run0 + b0;
        w->old_slot[k] = q->live_slot[0];
        beam_cand *ck = w->first + (size_t)k * K2;
        if (isfinite(c0[K2 - 1].score)) {
            for (int j = 0; j < K2; j++) ck[j] = (beam_cand){-INFINITY, c0[j].token};
        } else {
            const prefix p = row_prefix(g, b0, 1); /* beam 0's path: the start token and prefix */
            float lse;
            beam_candidates(&g->x, g->ds.logits + (size_t)b0 * g->V, &p, -1e9f, g->work, ck, &lse);
        }
    }
    return w->first;
}

/* The caches follow the beams: new beam j continues old beam parent[j], whose cache was in
 * old_slot[parent[j]]. The first child of an old beam keeps its slot; the others take a
 * slot no child kept and copy positions 0..t into it. */
static void beam_reorder_slots(dec_state *ds, sentence *q, beam_scratch *w, int t) {
    for (int k = 0; k < q->rows; k++) w->used[k] = 0;
    for (int j = 0; j < q->n_live; j++) {
        const int sl = w->old_slot[w->parent[j]] - q->slot0;
        w->owner[j] = w->used[sl] ? -1 : sl;
        w->used[sl] = 1;
    }
    for (int j = 0, free_k = 0; j < q->n_live; j++) {
        if (w->owner[j] >= 0) continue;
        while (w->used[free_k]) free_k++;
        w->used[free_k] = 1;
        w->owner[j] = free_k;
        dec_copy_slot(ds, q->slot0 + free_k, w->old_slot[w->parent[j]], t + 1);
    }
    for (int j = 0; j < q->n_live; j++) q->live_slot[j] = q->slot0 + w->owner[j];
}

/* ---------------------------------------------------------------------------------------
 * A sentence's life */

static int beam_start(const gen *g, sentence *q) {
    q->rows = g->s->beams;
    q->n_live = 1; /* the prefix and the first searched step run beam 0 alone */
    q->beam.score = calloc((size_t)q->rows, sizeof(float));
    q->beam.heap_store = malloc(sizeof(beam_hyp) * (size_t)(q->rows + 1));
    if (!q->beam.score || !q->beam.heap_store) return -1;
    heap_init(&q->beam.heap, q->beam.heap_store, q->rows);
    return 0;
}

static int beam_advance(gen *g, sentence *q, int b0, int nb) {
    beam_scratch *w = &g->bs;
    const int t = g->x.t, from = g->tr.n_rec, first = t == q->src->n_prefix;
    const beam_cand *cands = g->cands + (size_t)b0 * 2 * g->s->beams;
    for (int k = 0; k < nb; k++) {
        w->cand_run[k] = g->run0 + b0 + k;
        w->old_slot[k] = q->live_slot[k];
    }
    if (first) cands = first_step_candidates(g, q, b0);
    if (beam_step(g, q, cands, first ? g->s->beams : nb)) return -1;
    if (g->o->want_scores) fill_record_lp(g, from);
    if (q->done) return 0;
    if (t + 2 < g->ml) {
        beam_reorder_slots(&g->ds, q, w, t);
    } else {
        /* the length limit: finalize adds the open beams (generated_len: the
         * steps after the prefix) */
        for (int j = 0; j < q->n_live; j++)
            heap_add(&q->beam.heap, g->s, q->beam.score[j], t + 1 - q->src->n_prefix, q->live_rec[j]);
        q->done = 1;
    }
    return 0;
}

/* The heap's best n_best (or fewer), as finalize pops them. */
static int beam_finish(const gen *g, sentence *q, int *recs, s2s_score *scores) {
    heap_sort(&q->beam.heap);
    const int k = g->s->n_best < q->beam.heap.n ? g->s->n_best : q->beam.heap.n;
    for (int h = 0; h < k; h++) {
        recs[h] = q->beam.heap.h[h].rec;
        scores[h] = (s2s_score){q->beam.heap.h[h].sum, (float)q->beam.heap.h[h].score};
    }
    return k;
}

static void beam_free(sentence *q) {
    free(q->beam.score);
    free(q->beam.heap_store);
}

const strategy beam_strategy = {beam_start, beam_row, beam_advance, beam_finish, beam_free};
