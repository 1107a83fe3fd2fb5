/* --reverse-model (issue 38), what attend align and attend translate share: the reverse model
 * reads a translation as its source and is force-decoded to the source sentence, and the links
 * become those both directions agree on (attend_alignment_both_links). */
#ifndef ATTEND_CLI_REVERSE_MODEL_H
#define ATTEND_CLI_REVERSE_MODEL_H

#include "../model/attend.h"
#include "options.h"

/* The reverse model's settings: common's (threads, split...) with attention and scores, the
 * languages the other way round, no prefix. */
attend_params cli_reverse_params(const cli_model_options *common);
/* What the reverse model reads for translation r: its text with the word boundaries its pieces
 * have ("▁" read as a space; </s> and language tokens left out), so that it sees the same
 * words. malloc'd, or NULL when out of memory. */
char *cli_reverse_source(const attend_result *r);

#endif
