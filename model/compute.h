/* Compute types: which arithmetic a loaded model's linear layers use (model/compute.c). */
#ifndef ATTEND_COMPUTE_H
#define ATTEND_COMPUTE_H

#include "seq2seq.h"

enum { S2S_COMPUTE_FILE = 0, S2S_COMPUTE_BF16 = 1 };
/* A compute type's name (NULL: the default) to S2S_COMPUTE_*, or -1 with a message. */
int s2s_compute_parse(const char *name, char *err, size_t errlen);
/* Why bf16 compute cannot run here (the CPU, or the kernel set in use), or NULL if it can. */
const char *s2s_bf16_missing(void);
/* s2s_load_for_inference under a compute type: NULL with a message naming what is missing
 * where the CPU cannot run it, or for an int8 file asked for bf16. */
s2s_model *s2s_load_compute(const char *path, int compute, char *err, size_t errlen);

#endif
