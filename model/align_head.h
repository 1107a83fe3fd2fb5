/* The trained alignment head of a model file that has one (model/align_head.c). */
#ifndef ATTEND_ALIGN_HEAD_H
#define ATTEND_ALIGN_HEAD_H

#include "layers.h"

#define ALIGN_HEAD_MAX_WIDTH 256 /* attend.align_head.width's limit */

/* mem->align_k from the encoder's output X [total, d] (freed and NULL when the model has no
 * head). 0 or -1 (OOM). */
int align_head_keys(const s2s_model *m, const float *X, enc_memory *mem);

/* Rows [0, n) of a decoder step: row b's head probabilities over its sentence's S source
 * positions, from in [n, d] (the input of decoder layer m->c.align_head_layer's
 * cross-attention), go right after its cross-attention capture: att_cross[b] +
 * dec_layers * dec_heads * S (rows whose att_cross[b] is NULL are skipped). */
void align_head_rows(const s2s_model *m, const enc_memory *mem, const dec_row *rows, int n, const float *in,
                     float *const *att_cross);

#endif
