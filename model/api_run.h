/* api_run: the steps of model/api.c that other parts of the public API reuse (the speech
 * calls of model/speech_api.c). Internal to the library. */
#ifndef ATTEND_API_RUN_H
#define ATTEND_API_RUN_H

#include "attend.h"
#include "translate.h"

/* The search p asks for over the model's defaults. 0, or -1 with err. */
int api_resolve_search(const s2s_model *m, const attend_params *p, s2s_search *s, char *err, size_t errlen);
/* Decode src[0..n) into out[0..n) batch by batch as p->batch_size / batch_tokens say, handing
 * each batch to p->on_batch (sources with n 0 are lines that failed already). 0, or -1 with
 * err; on failure every entry not handed over is freed. */
int api_run_batched(attend_model *am, s2s_source *src, int n, const attend_params *p, const s2s_search *search,
                    attend_result *out, char *err, size_t errlen);

#endif
