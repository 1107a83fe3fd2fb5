/* search: turning one step's logits into next tokens, as Hugging Face's generate does.
 *
 * The pieces the strategies (generate.h) call per row (choose a greedy token, draw a sampled
 * one, or list a beam's best candidates) and per sentence (the finished-hypothesis heap).
 * Internal to libattend. */
#ifndef ATTEND_SEARCH_H
#define ATTEND_SEARCH_H

#include <stdint.h>

#include "translate.h"

/* What a row has generated so far, for the processors that look back: the decoder input
 * ids (start token first), as HF's input_ids. */
typedef struct {
    const int *ids;
    int n;
} prefix;

/* The step's context: t counts positions from 0, so the row's input_ids hold t + 1 ids
 * and HF's cur_len is t + 1; max_length as s2s_max_length. */
typedef struct {
    const s2s_config *c;
    const s2s_search *s;
    int t, max_length, ignore_eos;
} step_ctx;

/* Does this search change logits beyond banning <pad> and forcing </s> at the end? */
int search_has_processors(const s2s_search *s, int ignore_eos);

/* Greedy: the argmax of the processed logits (HF's greedy_search: processors on the raw
 * logits, no log-softmax). Without processors, exactly the release-1 rule. The processors
 * edit logits in place; every value is back as it was on return. *raw_best gets
 * at_argmax(logits) when it was computed on the way (for log_softmax_at), else -1.
 * work: 2 * decoder_vocab_size floats. */
int greedy_choose(const step_ctx *x, float *logits, const prefix *p, float *work, int *raw_best);

/* Sampling: processors, then temperature, top-k, top-p, softmax, one draw from *rng. */
int sample_choose(const step_ctx *x, const float *logits, const prefix *p, float *work, uint64_t *rng);
/* log_softmax of the processed logits at id (HF's recorded scores); top_k > 0 keeps only the
 * top_k largest (sampling's warper, ties kept). work: 2 * decoder_vocab_size floats. */
float processed_logprob(const step_ctx *x, const float *logits, const prefix *p, float *work, int id, int top_k);
/* A stream for one sample of one sentence: from the seed, the sentence's ids and k. */
uint64_t sample_seed(unsigned long long seed, const int *ids, int n, int k);

/* log_softmax(logits)[id] (the model's probability of id); best: at_argmax(logits, n) if
 * known, else -1. */
float log_softmax_at(const float *logits, int n, int id, int best);

/* A beam's candidates: the processed log-probabilities plus the beam's score, best first. */
typedef struct {
    float score;
    int token;
} beam_cand;

/* HF's beam step for one row: log-softmax of the logits (with <pad> removed first where the
 * family bans it: Marian's adjust_logits_during_generation), the processors, then the 2 * beams best of
 * logp + beam_score (float32 sums; ties: lower id first) into out[0 .. 2 * beams).
 * *lse_raw gets log-sum-exp of the raw logits, <pad> included (for the model's log-prob of
 * a token). work: decoder_vocab_size floats. */
void beam_candidates(const step_ctx *x, const float *logits, const prefix *p, float beam_score,
                     float *work, beam_cand *out, float *lse_raw);

/* A finished hypothesis in a sentence's heap. */
typedef struct {
    double score; /* sum_logprobs / generated_len ^ length_penalty */
    float sum;    /* sum_logprobs: the float32 running beam score */
    int rec;      /* its last token's trace record */
    int order;    /* insertion order (ties) */
} beam_hyp;

typedef struct {
    beam_hyp *h; /* capacity beams + 1 */
    int n, cap, added;
    double worst;
} beam_heap;

void heap_init(beam_heap *b, beam_hyp *storage, int beams);
/* HF's length normalization: sum / len ^ length_penalty, len the tokens generated after
 * the decoder's prompt (the start token and any target prefix), a forced first token (a
 * target language) and </s> counted (BeamHypotheses' generated_len). */
double normalize_score(double sum, int len, float length_penalty);
/* BeamHypotheses.add */
void heap_add(beam_heap *b, const s2s_search *s, double sum_logprobs, int generated_len, int rec);
/* BeamHypotheses.is_done: best_sum is the best candidate's score this step, hf_cur_len
 * the input_ids length plus one, prompt_len HF's decoder_prompt_len (the start token and
 * any target prefix). */
int heap_is_done(const beam_heap *b, const s2s_search *s, double best_sum, int hf_cur_len, int prompt_len,
                 int max_length);
/* Sort best first, as finalize pops them (equal scores: the later-added first). */
void heap_sort(beam_heap *b);

#endif
