/* trace: every token a batch's hypotheses produced, and the path each one took.
 *
 * Each step runs some rows ("runs"); each run produces one or more tokens ("records": greedy
 * one, a beam up to 2 * beams candidates that survive). A record names the run that produced
 * it, a run names the record whose token it read, so any hypothesis walks back to the start
 * token along its own path (HF's beam_indices) and its attention, logits and scores are its
 * own. Internal to libattend. */
#ifndef ATTEND_TRACE_H
#define ATTEND_TRACE_H

#include <stddef.h>

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

/* Room for `need` runs (with V logits each when want_logits), records, or attention floats.
 * 0, or -1 if out of memory (the trace stays valid). */
int trace_reserve_runs(trace *tr, int need, int V, int want_logits);
int trace_reserve_recs(trace *tr, int need);
int trace_reserve_att(trace *tr, size_t need);

/* Append a record: token tok produced by run with log-probability lp. Its index, or -1 (OOM). */
int trace_add_record(trace *tr, int run, int tok, float lp);
void trace_free(trace *tr);

/* Tokens in the path ending at record rec (after the start token). */
int trace_length(const trace *tr, int rec);
/* The records of that path, first to last, into recs [trace_length]; returns the length. */
int trace_records(const trace *tr, int rec, int *recs);
/* The decoder inputs of the path ending at rec (-1: none yet) as HF's input_ids: the start
 * token, then the path's tokens, into ids [trace_length + 1]; returns their count. */
int trace_prefix(const trace *tr, int rec, int start_id, int *ids);

#endif
