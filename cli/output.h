/* output: what attend translate writes for one input line (its translation, n-best lines,
 * --alignment, the warnings about cut lines) and the --dump-attention archive that translate
 * and align write. Standard output is flushed and checked by the caller. */
#ifndef ATTEND_CLI_OUTPUT_H
#define ATTEND_CLI_OUTPUT_H

#include "../model/align.h"
#include "../model/attend.h"
#include "npz.h"

/* The line for an input that gave no translation (blank, or failed): an empty line, " ||| "
 * with --alignment, or nbest lines "i |||  ||| 0.000000" (idx counts lines from 0). */
void cli_write_empty(long long idx, int nbest, int with_alignment);
/* Is s[0..n) blank: spaces, tabs, \r, \f, \v and NUL only (such a line is not translated)? */
int cli_is_blank(const char *s, size_t n);
/* t on one line: a newline or CR becomes a space (one output line per input line). */
void cli_one_line(char *t);
/* On stderr: why line idx (1-based) was cut, if r was truncated. */
void cli_warn_truncated(const attend_config *c, long long idx, const attend_result *r);
/* r's hypotheses in Marian's n-best layout, "idx ||| text ||| score", best first, the score
 * each one's normalized_score (beams: HF's sequences_scores); with view,
 * then " ||| " and the Pharaoh word alignment of that hypothesis's own attention. 0, or
 * EXIT_USAGE after a message when the alignment fails. */
int cli_write_nbest(long long idx, attend_result *r, const attend_config *c, const attend_view *view);
/* n-best entry k of r as a result of its own (the source fields r's; nothing to free). */
attend_result cli_hypothesis_result(const attend_result *r, int k);
/* r's translation on one line; with view, then " ||| " and the Pharaoh word alignment of that
 * attention view. 0, or EXIT_USAGE after a message when the alignment fails. */
int cli_write_translation(attend_result *r, const attend_config *c, const attend_view *view);
/* r's translation on one line, then " ||| " and the alignment pharaoh the caller made
 * (--reverse-model's). */
void cli_write_aligned(attend_result *r, const char *pharaoh);

/* Add one result to a --dump-attention archive under s{idx}/ (layout in README.md). */
void cli_dump_result(npz_writer *z, const attend_config *c, long long idx, const attend_result *r,
                     int with_logits);
/* The n-best hypotheses after the first under s{idx}/nbest{k}/ (k = 1 ..): tgt_ids,
 * tgt_pieces, text, score, normalized_score, logprob, dec_self/l{l}, cross/l{l}. */
void cli_dump_nbest(npz_writer *z, const attend_config *c, long long idx, const attend_result *r);
/* A whole archive of one result as sentence s0 (attend align). 0, or -1 with err set. */
int cli_dump_one(const char *path, const attend_config *c, const attend_result *r, char *err, size_t errlen);

#endif
