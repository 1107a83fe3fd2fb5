/* generate: the state of one batch being decoded, shared by the step loop (generate.c) and
 * the search strategies that turn each step's logits into tokens (strategy.c: greedy,
 * sampling, forced; beam.c: beam search).
 *
 * Each step, the loop gathers one row per live hypothesis of every unfinished sentence, runs
 * decoder_step on them, lets each row's strategy choose (rows in parallel, each writing only
 * its own slots), then lets each sentence's strategy advance it (sentences in order: records
 * into the trace, next hypotheses, done or not). Internal to libattend. */
#ifndef ATTEND_GENERATE_H
#define ATTEND_GENERATE_H

#include <stdint.h>

#include "layers.h"
#include "search.h"
#include "trace.h"

typedef struct gen gen;
typedef struct sentence sentence;

/* A search strategy: what a sentence does with its rows of each step. */
typedef struct {
    /* Set q->rows (cache slots it needs) and q->n_live (rows at step 0), allocate its state.
     * 0 or -1 (OOM). */
    int (*start)(const gen *g, sentence *q);
    /* Row b's token or candidates from its logits; runs in parallel over rows, writing only
     * row b's slots. work: 2 * V floats of this worker's. */
    void (*choose_row)(const gen *g, int b, float *work);
    /* The sentence's rows b0 .. b0 + nb - 1 chose: record the tokens, set the next live
     * hypotheses and q->done. 0 or -1 (OOM). */
    int (*advance)(gen *g, sentence *q, int b0, int nb);
    /* The finished hypotheses' last records and scores, best first, into recs and scores
     * (room for max(beams, n_best)); returns their count. */
    int (*finish)(const gen *g, sentence *q, int *recs, s2s_score *scores);
    void (*free)(sentence *q);
} strategy;

extern const strategy greedy_strategy, sample_strategy, forced_strategy, beam_strategy;

/* A target prefix (s2s_source.prefix): while x.t < n_prefix every live row takes the
 * prefix's next token, whatever the sentence's strategy, with the model's log-probability
 * of it (want_scores); the strategy's choose_row and advance take over after it. */
void prefix_row(const gen *g, int b);
int prefix_advance(gen *g, sentence *q, int b0, int nb);

/* Greedy, sampling, forced: each row a hypothesis of its own until it ends. */
typedef struct {
    int *fin_rec;  /* [rows] each row's last record */
    uint64_t *rng; /* sampling: one stream per sample */
} rows_state;

/* Beam search: the live beams' scores and the finished hypotheses. */
typedef struct {
    float *score; /* [rows] */
    beam_heap heap;
    beam_hyp *heap_store;
} beams_state;

struct sentence {
    const strategy *how;
    const s2s_source *src;
    int rows;   /* rows it runs per step at most (beams, samples or 1) */
    int slot0;  /* its cache slots are slot0 .. slot0 + rows - 1 */
    int n_live; /* hypotheses still growing */
    /* [rows] each live hypothesis's cache slot, last record (-1: none yet), and whether it
     * has ended (greedy, sampling, forced: rows end one by one) */
    int *live_slot, *live_rec, *live_done;
    int limit; /* steps it may take */
    int done;
    rows_state one;   /* its strategy's own state: greedy, sampling, forced */
    beams_state beam; /*   or beam search */
};

/* A row of this step: which sentence and live hypothesis it serves. */
typedef struct {
    int sent, live;
} row_ref;

/* Beam search's per-batch scratch, sized by beams (one sentence advances at a time). */
typedef struct {
    beam_cand *merged; /* [2B] the sentence's best candidates over all its beams */
    beam_cand *first;  /* [B * 2B] step 0: every beam's candidates */
    int *parent;       /* [2B] each candidate's beam, then each new beam's old beam */
    int *cand_run;     /* [B] each beam's run */
    int *old_slot;     /* [B] each beam's cache slot */
    int *owner, *used; /* [B] beam_reorder_slots' slot assignment */
} beam_scratch;

struct gen {
    const s2s_model *m;
    const s2s_config *c;
    const s2s_search *s;
    const s2s_opts *o;
    int n, V, ml, threads;
    int max_limit;      /* the most steps any sentence may take */
    sentence *sent;     /* [n] */
    int *off, *len;     /* [n] source rows of each sentence */
    enc_memory mem;
    dec_state ds;
    trace tr;
    step_ctx x;         /* this step's context (x.t is the step) */
    int run0;           /* this step's first run */
    /* one step's rows, sized for every slot of the batch */
    dec_row *rows;
    row_ref *refs;
    float **att_self, **att_cross;
    float *heads_tmp;   /* cross_heads without want_attention: a step's rows, every layer's
                         * cross-attention, [rows][L * H * S] (the wanted heads then kept) */
    int *pathbuf;       /* ml + 1 ids per row */
    beam_cand *cands;   /* 2 * beams per row */
    int *choice;        /* greedy, sampling, forced: each row's token */
    float *choice_lp;   /*   and its log-probability (want_scores) */
    float *work;        /* 2 V floats per worker */
    beam_scratch bs;
};

/* Row b's decoder inputs so far (into its pathbuf): the start token, then its path when
 * with_path (the processors or sampling read it). */
prefix row_prefix(const gen *g, int b, int with_path);

#endif
