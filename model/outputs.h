/* outputs: a sentence's s2s_output built from the trace of its batch. Internal to libattend. */
#ifndef ATTEND_OUTPUTS_H
#define ATTEND_OUTPUTS_H

#include "trace.h"
#include "translate.h"

/* Fill out from the sentence's k finished hypotheses, recs[0..k) (their last records, best
 * first) with their scores; S: its source length. The output itself is the best hypothesis,
 * with the logits, log-probabilities and attention captured along its own path (as o asks);
 * each other hypothesis gets its own log-probabilities and attention.
 * 0, or -1 if out of memory (out then holds what was allocated: free it with
 * s2s_output_free). */
int output_build(const s2s_model *m, const s2s_opts *o, const trace *tr, const int *recs,
                 const s2s_score *scores, int k, int S, s2s_output *out);

#endif
