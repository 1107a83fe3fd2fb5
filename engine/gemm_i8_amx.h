/* gemm_i8_amx: the int8 linear layer with AMX tiles for several input rows at once (see
 * gemm_i8_amx.c). Internal to the engine; only kernels_avx512.c calls it, and only when
 * isa.c found AMX usable (CPU, OS and the process's permission). */
#ifndef ATTEND_GEMM_I8_AMX_H
#define ATTEND_GEMM_I8_AMX_H

#include <stdint.h>

#include "kernels.h"

/* y[n, out] = AT_I8_OUT(Σ xq·wq, sx, w->scale, b) for the int8 matrix w in AT_PACKED_VNNI
 * panels (with wsum), from the quantized input rows stored as u8 (q + 128), stride w->cols.
 * Bit-identical to every other int8 path. Returns 0, or -1 without memory for the padded
 * copy of the inputs (y untouched: compute it another way). */
int at_gemm_i8_amx(float *y, const uint8_t *xu, const float *sx, const at_matrix *w, const float *b, int n);

#endif
