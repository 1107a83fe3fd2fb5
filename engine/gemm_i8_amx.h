/* gemm_i8_amx: the int8 linear layer with AMX tiles for several input rows at once (see
 * gemm_i8_amx.c). Internal to the engine; only kernels_avx512.c calls it, and only when
 * isa.c found AMX usable (CPU, OS and the process's permission). */
#ifndef ATTEND_GEMM_I8_AMX_H
#define ATTEND_GEMM_I8_AMX_H

#include <stdint.h>

#include "kernels.h"

/* The input rows as the tiles read them: AT_AMX_ROWS(n) rows (whole pairs of 16-row tiles),
 * AT_AMX_STRIDE(in) bytes apart (whole 64-byte tile rows), zero past n rows and in columns. */
#define AT_AMX_ROWS(n) (((n) + 31) / 32 * 32)
#define AT_AMX_STRIDE(in) ((int)at_vnni_steps(in) * 4)

/* y[n, out] = AT_I8_OUT(Σ xq·wq, sx, w->scale, b) for the int8 matrix w in AT_PACKED_VNNI
 * panels (with wsum), from the quantized input rows stored as u8 (q + 128), padded as above
 * (xa, stride lda). Bit-identical to every other int8 path. */
void at_gemm_i8_amx(float *y, const uint8_t *xa, int lda, const float *sx, const at_matrix *w, const float *b, int n);

#endif
