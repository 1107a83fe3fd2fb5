/* load: the steps of s2s_load (model/load.c), each in its own file, and the error helpers
 * they share. Internal to model/ and tokenizer/; seq2seq.h declares the calls the rest of
 * the library makes. */
#ifndef ATTEND_LOAD_H
#define ATTEND_LOAD_H

#include "seq2seq.h"

/* err <- the printf-formatted message (model/message.c). */
void s2s_fail(char *err, size_t errlen, const char *fmt, ...);
/* At most 40 bytes of a file string for a message, control bytes as '?' (one-line
 * errors); returns buf (n bytes). */
const char *s2s_shown(char *buf, size_t n, gguf_str s);

/* The GGUF keys into c: the family (general.architecture), the format version, the sizes,
 * the special ids, the activation and the generation defaults, each checked against its
 * range and the others (model/config.c). Returns 0, or -1 naming the bad key. */
int s2s_read_config(const gguf_file *f, s2s_config *c, char *err, size_t errlen);

/* The position table's first rows (min(positions used, S2S_POSITIONS_CACHED)) into
 * m->positions and m->n_positions (model/positions.c). 0, or -1 out of memory. */
int s2s_positions_init(s2s_model *m);

/* The optional task prefixes (<family>.tasks, <family>.task_prefixes: as many of each, names
 * 1..64 bytes without spaces or control bytes and distinct, prefixes up to 1024 bytes
 * without NUL) into m (model/tasks.c). 0, or -1 naming the bad key; s2s_tasks_free frees
 * what it set. */
int s2s_tasks_load(s2s_model *m, char *err, size_t errlen);
void s2s_tasks_free(s2s_model *m);

#endif
