/* s2s_translate_ids: decoding a packed batch. Check the request, set up each sentence's
 * strategy and slots, encode, then step: gather the live hypotheses' rows, run the decoder
 * on them, let each row choose and each sentence advance, until every sentence is done;
 * then build each sentence's output from the trace. The strategies (generate.h) hold every
 * decision; this file holds only the life of the batch. */
#include "generate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "align_head.h"
#include "outputs.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---------------------------------------------------------------------------------------
 * The request */

/* Sources and forced targets within the model's vocabularies and positions. 0, or -1 with
 * err naming the sentence. */
static int check_sources(const s2s_config *c, const s2s_source *src, int n, char *err, size_t errlen) {
    for (int i = 0; i < n; i++) {
        if (c->family->audio && (!src[i].mel || src[i].n != c->speech.n_frames)) {
            snprintf(err, errlen, "sentence %d: a speech model reads %d frames of log-mel features", i,
                     2 * c->speech.n_frames);
            return -1;
        }
        if (!c->family->audio && (src[i].n < 1 || src[i].n > c->max_pos)) {
            snprintf(err, errlen, "sentence %d: %d source tokens (1..%d allowed)", i, src[i].n, c->max_pos);
            return -1;
        }
        for (int j = 0; !c->family->audio && j < src[i].n; j++)
            if (src[i].ids[j] < 0 || src[i].ids[j] >= c->vocab_size) {
                snprintf(err, errlen, "sentence %d: source id %d outside the vocabulary", i, src[i].ids[j]);
                return -1;
            }
        for (int j = 0; src[i].forced && j < src[i].n_forced; j++)
            if (src[i].forced[j] < 0 || src[i].forced[j] >= c->decoder_vocab_size) {
                snprintf(err, errlen, "sentence %d: target id %d outside the vocabulary", i, src[i].forced[j]);
                return -1;
            }
        if (src[i].forced && (src[i].n_forced < 1 || src[i].n_forced > c->max_pos)) {
            snprintf(err, errlen, "sentence %d: %d forced target tokens (1..%d allowed)", i,
                     src[i].n_forced, c->max_pos);
            return -1;
        }
    }
    return 0;
}

/* Target prefixes: target ids, not with forced decoding, leaving room for one token within
 * the length limit ml. 0, or -1 with err naming the sentence. */
static int check_prefixes(const s2s_config *c, const s2s_source *src, int n, int ml, char *err, size_t errlen) {
    for (int i = 0; i < n; i++) {
        if (src[i].n_prefix == 0) continue;
        if (!src[i].prefix || src[i].forced || src[i].n_prefix < 0 || src[i].n_prefix > ml - 2) {
            snprintf(err, errlen, "sentence %d: %s", i, src[i].forced ? "a target prefix and a forced target"
                     : "a target prefix must leave room for one token within max_length");
            return -1;
        }
        for (int j = 0; j < src[i].n_prefix; j++)
            if (src[i].prefix[j] < 0 || src[i].prefix[j] >= c->decoder_vocab_size) {
                snprintf(err, errlen, "sentence %d: prefix id %d outside the vocabulary", i, src[i].prefix[j]);
                return -1;
            }
    }
    return 0;
}

/* The search to run (o's, or the model's defaults) into *s, checked. 0, or -1 with err. */
static int check_search(const s2s_model *m, const s2s_opts *o, s2s_search *s, char *err, size_t errlen) {
    *s = o->search ? *o->search : s2s_search_defaults(m);
    if (s2s_search_check(s, err, errlen)) return -1;
    if (s->forced_bos >= m->c.decoder_vocab_size) {
        snprintf(err, errlen, "forced_bos %d: outside the target vocabulary", s->forced_bos);
        return -1;
    }
    for (int k = 0; k < o->n_cross_heads; k++) {
        const int l = o->cross_heads[2 * k], h = o->cross_heads[2 * k + 1];
        if (l < 0 || l >= m->c.dec_layers || h < 0 || h >= m->c.dec_heads) {
            snprintf(err, errlen, "cross-attention head (%d, %d): the decoder has %d layers of %d heads", l, h,
                     m->c.dec_layers, m->c.dec_heads);
            return -1;
        }
    }
    return 0;
}

/* Only some cross-attention heads kept (s2s_opts.cross_heads), not every matrix. */
static int heads_only(const gen *g) {
    return g->o->n_cross_heads > 0 && !g->o->want_attention;
}

/* ---------------------------------------------------------------------------------------
 * Setting up */

static const strategy *strategy_for(const s2s_search *s, const s2s_source *src) {
    if (src->forced) return &forced_strategy;
    if (s->sample) return &sample_strategy;
    return s->beams > 1 ? &beam_strategy : &greedy_strategy;
}

/* Sentence i: its strategy, slots from *n_slots on, live hypotheses and step limit. */
static int start_sentence(gen *g, int i, const s2s_source *src, int *n_slots) {
    sentence *q = &g->sent[i];
    q->src = src;
    q->how = strategy_for(g->s, src);
    if (q->how->start(g, q)) return -1;
    q->slot0 = *n_slots;
    *n_slots += q->rows;
    q->limit = src->forced ? src->n_forced : g->ml - 1;
    q->live_slot = malloc(sizeof(int) * (size_t)q->rows);
    q->live_rec = malloc(sizeof(int) * (size_t)q->rows);
    q->live_done = calloc((size_t)q->rows, sizeof(int));
    if (!q->live_slot || !q->live_rec || !q->live_done) return -1;
    for (int k = 0; k < q->rows; k++) {
        q->live_slot[k] = q->slot0 + k;
        q->live_rec[k] = -1;
    }
    return 0;
}

/* Every source's encoder output is kept from an earlier call (s2s_source.encoded) and no
 * encoder attention is asked for: the encoder is skipped. */
static int all_encoded(const s2s_source *src, int n, const s2s_opts *o) {
    for (int i = 0; i < n; i++)
        if (!src[i].encoded || !src[i].encoded->ready) return 0;
    return !o->want_attention;
}

/* The encoder's output X [total, d] of the batch: the kept outputs, or the encoder run (each
 * sentence's encoder attention into enc_self[i] when kept) and its rows kept where asked. */
static int encoder_output(gen *g, const s2s_source *src, const int **ids, const float **mels, int total, float *X,
                          float *const *keep) {
    const size_t d = (size_t)g->c->d_model;
    if (all_encoded(src, g->n, g->o)) {
        for (int i = 0; i < g->n; i++) memcpy(X + g->off[i] * d, src[i].encoded->x, sizeof(float) * d * g->len[i]);
        return 0;
    }
    const int rc = g->c->family->audio ? encode_audio(g->m, mels, g->off, g->len, g->n, total, X, keep, g->o->stop)
                                       : encode(g->m, ids, g->off, g->len, g->n, total, X, keep, g->o->stop);
    for (int i = 0; !rc && i < g->n; i++)
        if (src[i].encoded && !src[i].encoded->ready) {
            memcpy(src[i].encoded->x, X + g->off[i] * d, sizeof(float) * d * g->len[i]);
            src[i].encoded->ready = 1;
        }
    return rc;
}

/* Encode the batch into g->mem (each sentence's encoder attention into out[i] when asked
 * for). 0, -1 (OOM) or -2 (stopped). */
static int encode_batch(gen *g, const s2s_source *src, int total, s2s_output *out) {
    const int n = g->n;
    const size_t x_bytes = sizeof(float) * (size_t)total * g->c->d_model;
    const int **ids = malloc(sizeof(int *) * (size_t)n);
    const float **mels = malloc(sizeof(float *) * (size_t)n);
    float **enc_self = calloc((size_t)n, sizeof(float *));
    float *X = at_block_alloc(x_bytes); /* the encoder output, kept for the next batch */
    int rc = -1;
    if (!ids || !mels || !enc_self || !X) goto done;
    for (int i = 0, o0 = 0; i < n; o0 += src[i].n, i++) {
        g->off[i] = o0;
        g->len[i] = src[i].n;
        ids[i] = src[i].ids;
        mels[i] = src[i].mel;
        if (g->o->want_attention) {
            const size_t L = (size_t)g->c->enc_layers * g->c->enc_heads;
            enc_self[i] = out[i].enc_self = malloc(sizeof(float) * L * src[i].n * src[i].n);
            if (!enc_self[i]) goto done;
        }
    }
    rc = encoder_output(g, src, ids, mels, total, X, g->o->want_attention ? enc_self : NULL);
    if (rc) goto done;
    g->mem = (enc_memory){.n = n, .total = total, .off = g->off, .len = g->len};
    rc = cross_kv(g->m, X, &g->mem);
    if (!rc && g->o->want_attention) rc = align_head_keys(g->m, X, &g->mem); /* NULL without a head */
done:
    at_block_free(X, x_bytes);
    free(ids);
    free(mels);
    free(enc_self);
    return rc;
}

/* Beam search's scratch, sized by beams. */
static int beam_scratch_alloc(beam_scratch *w, int B) {
    w->merged = malloc(sizeof(beam_cand) * (size_t)2 * B);
    w->first = malloc(sizeof(beam_cand) * (size_t)B * 2 * B);
    w->parent = malloc(sizeof(int) * (size_t)2 * B);
    w->cand_run = malloc(sizeof(int) * (size_t)B);
    w->old_slot = malloc(sizeof(int) * (size_t)B);
    w->owner = malloc(sizeof(int) * (size_t)B);
    w->used = malloc(sizeof(int) * (size_t)B);
    return w->merged && w->first && w->parent && w->cand_run && w->old_slot && w->owner && w->used ? 0 : -1;
}

/* The decoder and one step's buffers for every slot, allocated once per batch: the step
 * loop then allocates only when the caches or the trace grow. */
static int alloc_step_buffers(gen *g, int rows, int expect) {
    const int K2 = 2 * g->s->beams, V = g->V;
    if (dec_init(&g->ds, g->m, &g->mem, rows, rows, expect)) return -1;
    g->rows = malloc(sizeof(dec_row) * (size_t)rows);
    g->refs = malloc(sizeof(row_ref) * (size_t)rows);
    g->att_self = calloc((size_t)rows, sizeof(float *));
    g->att_cross = calloc((size_t)rows, sizeof(float *));
    g->cands = malloc(sizeof(beam_cand) * (size_t)rows * K2);
    g->pathbuf = malloc(sizeof(int) * (size_t)rows * (g->ml + 1));
    g->choice = malloc(sizeof(int) * (size_t)rows);
    g->choice_lp = malloc(sizeof(float) * (size_t)rows);
    g->work = malloc(sizeof(float) * (size_t)g->threads * 2 * V);
    if (heads_only(g)) {
        int S = 1;
        for (int i = 0; i < g->n; i++) S = g->len[i] > S ? g->len[i] : S;
        g->heads_tmp = malloc(sizeof(float) * (size_t)rows * g->c->dec_layers * g->c->dec_heads * S);
        if (!g->heads_tmp) return -1;
    }
    if (!g->rows || !g->refs || !g->att_self || !g->att_cross || !g->cands || !g->pathbuf || !g->choice ||
        !g->choice_lp || !g->work || beam_scratch_alloc(&g->bs, g->s->beams))
        return -1;
    if (trace_reserve_runs(&g->tr, rows * expect, V, g->o->want_logits) ||
        trace_reserve_recs(&g->tr, rows * expect * (g->s->beams > 1 && !g->s->sample ? 2 : 1)))
        return -1;
    return 0;
}

/* Sentences, encoder and decoder for the batch. 0, -1 (OOM) or -2 (stopped). */
static int gen_setup(gen *g, const s2s_source *src, s2s_output *out) {
    int total = 0, n_slots = 0, expect_max = 0;
    g->max_limit = 1;
    g->sent = calloc((size_t)g->n, sizeof(sentence));
    g->off = malloc(sizeof(int) * (size_t)g->n);
    g->len = malloc(sizeof(int) * (size_t)g->n);
    if (!g->sent || !g->off || !g->len) return -1;
    for (int i = 0; i < g->n; i++) {
        if (start_sentence(g, i, &src[i], &n_slots)) return -1;
        total += src[i].n;
        /* caches sized before decoding for twice the source: the loop then allocates only
         * for unusually long outputs, and a short sentence does not reserve the whole
         * length limit (512 steps x 6 layers of keys and values for opus-mt) */
        int expect = src[i].mel ? 64 : 2 * src[i].n + 8; /* speech: a window's text is short */
        if (expect > g->sent[i].limit) expect = g->sent[i].limit;
        if (expect > expect_max) expect_max = expect;
        if (g->sent[i].limit > g->max_limit) g->max_limit = g->sent[i].limit;
    }
    const int rc = encode_batch(g, src, total, out);
    return rc ? rc : alloc_step_buffers(g, n_slots, expect_max);
}

static void gen_free(gen *g) {
    for (int i = 0; g->sent && i < g->n; i++) {
        sentence *q = &g->sent[i];
        if (q->how) q->how->free(q);
        free(q->live_slot);
        free(q->live_rec);
        free(q->live_done);
    }
    free(g->sent);
    enc_memory_free(g->m, &g->mem);
    dec_free(&g->ds);
    trace_free(&g->tr);
    free(g->off);
    free(g->len);
    free(g->rows);
    free(g->refs);
    free(g->att_self);
    free(g->att_cross);
    free(g->heads_tmp);
    free(g->cands);
    free(g->pathbuf);
    free(g->choice);
    free(g->choice_lp);
    free(g->work);
    beam_scratch *w = &g->bs;
    free(w->merged);
    free(w->first);
    free(w->parent);
    free(w->cand_run);
    free(w->old_slot);
    free(w->owner);
    free(w->used);
}

/* ---------------------------------------------------------------------------------------
 * A step */

/* This step's rows: every live hypothesis of every unfinished sentence, in order, reading
 * its last token. Returns their count. */
static int gather_rows(gen *g) {
    int nr = 0;
    for (int i = 0; i < g->n; i++) {
        const sentence *q = &g->sent[i];
        for (int k = 0; !q->done && k < q->n_live; k++) {
            if (q->live_done[k]) continue;
            const int rec = q->live_rec[k];
            g->rows[nr] = (dec_row){i, q->live_slot[k], rec < 0 ? g->c->start_id : g->tr.rec_tok[rec]};
            g->refs[nr++] = (row_ref){i, k};
        }
    }
    return nr;
}

/* Room for step t: cache positions, the rows' runs in the trace and their attention
 * captures (att_self / att_cross point into the trace). 0 or -1 (OOM). */
static int open_runs(gen *g, int nr, int t) {
    const int L = g->c->dec_layers, H = g->c->dec_heads;
    trace *tr = &g->tr;
    if (t + 1 > g->ds.cap) {
        int cap = 2 * g->ds.cap > t + 1 ? 2 * g->ds.cap : t + 1;
        if (cap > g->max_limit) cap = g->max_limit; /* the longest sentence's steps, forced ones included */
        if (dec_reserve(&g->ds, cap)) return -1;
    }
    g->run0 = tr->n_run;
    if (trace_reserve_runs(tr, g->run0 + nr, g->V, g->o->want_logits)) return -1;
    size_t need = tr->n_att;
    for (int b = 0; b < nr; b++) {
        tr->run_prev[g->run0 + b] = g->sent[g->refs[b].sent].live_rec[g->refs[b].live];
        tr->run_step[g->run0 + b] = t;
        tr->run_att[g->run0 + b] = need;
        /* self rows, cross rows, then the alignment head's row when the model has one */
        const int S = g->len[g->refs[b].sent];
        if (g->o->want_attention) need += (size_t)L * H * (t + 1 + S) + (g->mem.align_k ? S : 0);
        else if (heads_only(g)) need += (size_t)g->o->n_cross_heads * S;
    }
    tr->n_run += nr;
    if (heads_only(g)) { /* the decoder writes every head of a row into heads_tmp (keep_heads) */
        size_t S = 1;
        for (int i = 0; i < g->n; i++) S = (size_t)g->len[i] > S ? (size_t)g->len[i] : S;
        for (int b = 0; b < nr; b++) g->att_cross[b] = g->heads_tmp + (size_t)b * L * H * S;
        if (trace_reserve_att(tr, need)) return -1;
        tr->n_att = need;
        return 0;
    }
    if (!g->o->want_attention) return 0;
    if (trace_reserve_att(tr, need)) return -1;
    for (int b = 0; b < nr; b++) {
        g->att_self[b] = tr->att + tr->run_att[g->run0 + b];
        g->att_cross[b] = g->att_self[b] + (size_t)L * H * (t + 1);
    }
    tr->n_att = need;
    return 0;
}

/* cross_heads only: the wanted heads of this step's rows, out of heads_tmp ([L][H][S] a
 * row), into their runs' captures ([n_cross_heads][S]). */
static void keep_heads(gen *g, int nr) {
    const int H = g->c->dec_heads;
    for (int b = 0; b < nr; b++) {
        const int S = g->len[g->refs[b].sent];
        float *dst = g->tr.att + g->tr.run_att[g->run0 + b];
        for (int k = 0; k < g->o->n_cross_heads; k++) {
            const int l = g->o->cross_heads[2 * k], h = g->o->cross_heads[2 * k + 1];
            memcpy(dst + (size_t)k * S, g->att_cross[b] + ((size_t)l * H + h) * S, sizeof(float) * (size_t)S);
        }
    }
}

/* How many rows from b0 on (of nr) serve b0's sentence. */
static int sentence_rows(const gen *g, int b0, int nr) {
    int nb = 1;
    while (b0 + nb < nr && g->refs[b0 + nb].sent == g->refs[b0].sent) nb++;
    return nb;
}

/* Rows [lo, hi) choose, each through its sentence's strategy. */
static void choose_rows(const void *ctx, int lo, int hi, int worker) {
    const gen *g = ctx;
    float *work = g->work + (size_t)worker * 2 * g->V;
    for (int b = lo; b < hi; b++) {
        const sentence *q = &g->sent[g->refs[b].sent];
        if (g->x.t < q->src->n_prefix) prefix_row(g, b);
        else q->how->choose_row(g, b, work);
    }
}

/* ---------------------------------------------------------------------------------------
 * The loop */

/* Step 0: each source's first_logits, and its prefix's first token where it is to be
 * chosen (first_choices), from its first row (every row of a sentence reads the same start
 * token there). Serial, before the rows choose: they read prefix[0]. */
static void first_step(const gen *g, int nr) {
    for (int b = 0; b < nr; b++) {
        const s2s_source *src = g->sent[g->refs[b].sent].src;
        const float *row = g->ds.logits + (size_t)b * g->V;
        if (g->refs[b].live != 0) continue;
        if (src->first_logits) memcpy(src->first_logits, row, sizeof(float) * (size_t)g->V);
        if (src->first_choices && src->n_first_choices > 0 && src->n_prefix > 0) {
            int best = src->first_choices[0];
            for (int k = 1; k < src->n_first_choices; k++)
                if (row[src->first_choices[k]] > row[best]) best = src->first_choices[k];
            ((int *)src->prefix)[0] = best;
        }
    }
}

/* Step until every sentence is done. Returns the steps run, -1 (OOM) or -2 (stopped by
 * the caller's flag). */
static int generate(gen *g) {
    const int att = g->o->want_attention, heads = heads_only(g);
    for (int t = 0;; t++) {
        if (g->o->stop && *g->o->stop) return -2; /* Ctrl-C or a caller's stop, within a step */
        const int nr = gather_rows(g);
        if (nr == 0) return t;
        if (open_runs(g, nr, t)) return -1;
        decoder_step(&g->ds, g->rows, nr, t, att ? g->att_self : NULL, att || heads ? g->att_cross : NULL);
        if (heads) keep_heads(g, nr);
        if (g->o->want_logits)
            memcpy(g->tr.logits + (size_t)g->run0 * g->V, g->ds.logits, sizeof(float) * (size_t)nr * g->V);
        if (t == 0) first_step(g, nr);
        g->x.t = t;
        at_parallel_for(nr, g->threads, choose_rows, g);
        for (int b0 = 0, nb; b0 < nr; b0 += nb) { /* each sentence over its rows */
            sentence *q = &g->sent[g->refs[b0].sent];
            nb = sentence_rows(g, b0, nr);
            if (t < q->src->n_prefix ? prefix_advance(g, q, b0, nb) : q->how->advance(g, q, b0, nb)) return -1;
        }
        dec_run_copies(&g->ds); /* the beams' branched caches */
    }
}

/* Each sentence's finished hypotheses into its output. 0 or -1 (OOM). */
static int build_outputs(gen *g, s2s_output *out) {
    const int most = g->s->beams > g->s->n_best ? g->s->beams : g->s->n_best;
    int *recs = malloc(sizeof(int) * (size_t)(most + 1));
    s2s_score *scores = malloc(sizeof(s2s_score) * (size_t)(most + 1));
    int rc = recs && scores ? 0 : -1;
    for (int i = 0; rc == 0 && i < g->n; i++) {
        sentence *q = &g->sent[i];
        const int k = q->how->finish(g, q, recs, scores);
        rc = output_build(g->m, g->o, &g->tr, recs, scores, k, g->len[i], &out[i]);
    }
    free(recs);
    free(scores);
    return rc;
}

int s2s_translate_ids(const s2s_model *m, const s2s_source *src, int n, const s2s_opts *opts, s2s_output *out,
                      char *err, size_t errlen) {
    static const s2s_opts no_opts = {0};
    const s2s_opts *o = opts ? opts : &no_opts;
    s2s_search search;
    if (check_search(m, o, &search, err, errlen)) return -1;
    memset(out, 0, sizeof(*out) * (size_t)n);
    if (check_sources(&m->c, src, n, err, errlen) ||
        check_prefixes(&m->c, src, n, s2s_max_length(m, o), err, errlen))
        return -1;
    if (n == 0) return 0;

    const double t_start = now();
    gen g = {.m = m, .c = &m->c, .s = &search, .o = o, .n = n, .V = m->c.decoder_vocab_size,
             .ml = s2s_max_length(m, o), .threads = at_threads() > 0 ? at_threads() : 1};
    g.x = (step_ctx){g.c, g.s, 0, g.ml, o->ignore_eos};
    const int encodes = all_encoded(src, n, o) ? 0 : n; /* before gen_setup makes them ready */
    int rc = gen_setup(&g, src, out);
    if (!rc) {
        const double t_decode = now();
        const int steps = generate(&g);
        rc = steps >= 0 ? build_outputs(&g, out) : steps;
        if (rc == 0 && o->timing) {
            o->timing->encode = t_decode - t_start;
            o->timing->decode = now() - t_decode;
            o->timing->steps = steps;
            o->timing->encoded = encodes;
        }
    }
    gen_free(&g);
    if (rc == 0) return 0;
    int total = 0;
    for (int i = 0; i < n; i++) {
        total += src[i].n;
        s2s_output_free(&out[i]);
    }
    if (rc == -2) snprintf(err, errlen, "stopped (attend_params.stop) in a batch of %d sentences", n);
    else snprintf(err, errlen, "out of memory translating a batch of %d sentences (%d source tokens)", n, total);
    return -1;
}
