/* explore_json: one sentence as the explore page reads it (pieces, words, log-probabilities,
 * the alignment of each preset view, every attention matrix in thousandths). attend explore
 * writes it into the page; attend serve answers it to the live page (/v1/translate with
 * "attention": true). */
#ifndef ATTEND_CLI_EXPLORE_JSON_H
#define ATTEND_CLI_EXPLORE_JSON_H

#include <stddef.h>
#include <stdio.h>

#include "../model/attend.h"

/* The views offered on the page: first (NULL: the model's own, own: attend_config's
 * alignment_view), then own, last:0 and the usual averages (penultimate:avg only with 2 or
 * more decoder layers), each once. out holds EXPLORE_PRESETS; returns how many. The strings
 * are first, own or constants. */
#define EXPLORE_PRESETS 5
int explore_presets(const char *first, const char *own, int decoder_layers, char **out);
/* r (translated from source; forced: r is a forced decoding) as one JSON object. 0, or -1
 * with err (a preset that does not parse, out of memory). */
int explore_json_sentence(FILE *f, const char *source, const attend_result *r, const attend_config *c, int forced,
                          char *const *presets, int np, char *err, size_t errlen);
/* A blank line: listed, not translated (as attend translate). */
void explore_json_blank(FILE *f, const char *source);

#endif
