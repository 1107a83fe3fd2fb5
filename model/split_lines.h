/* split_lines: attend_translate over sentences (model/split_lines.c) and the parts of the
 * public API it builds on (model/api.c). Internal to the library. */
#ifndef ATTEND_SPLIT_LINES_H
#define ATTEND_SPLIT_LINES_H
#include <stddef.h>

#include "attend.h"

/* attend_translate with each line one sequence (attend_params.split ignored). */
int api_translate_lines(attend_model *am, const char *const *lines, const size_t *lens, int n,
                        const char *const *targets, const attend_params *p, attend_result *out, char *err,
                        size_t errlen);
/* 1 when s[0..len) tokenizes within the model's source limit (model_max_length), else 0. */
int api_sentence_fits(const attend_model *am, const char *s, size_t len);

#endif
