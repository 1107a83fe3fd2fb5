/* gemm_i8_vnni: the AVX-512 VNNI int8 linear layer for several input rows at once (see
 * gemm_i8_vnni.c). Internal to the engine; only kernels_avx512.c calls it, and only on CPUs
 * with AVX-512 VNNI. */
#ifndef ATTEND_GEMM_I8_VNNI_H
#define ATTEND_GEMM_I8_VNNI_H

#include <stdint.h>

#include "kernels.h"

/* y[n, out] = AT_I8_OUT(Σ xq·wq, sx, w->scale, b) for the int8 matrix w (either layout, with
 * wsum), from the quantized input rows stored as u8 (q + 128), stride w->cols, in
 * at_quantize_rows' buffer. Bit-identical to every other int8 path. Returns 0, or -1 if a
 * thread found no memory for its scratch (y is then incomplete: compute it another way). */
int at_gemm_i8_vnni(float *y, const uint8_t *xu, const float *sx, const at_matrix *w, const float *b, int n);
/* Rows [o0, o0 + 64) of the row-major int8 matrix w as AT_PACKED_VNNI panels at dst (64 x
 * at_vnni_steps(cols) x 4 bytes; rows past the matrix and padded columns zero). Only on
 * CPUs with AVX-512 VNNI. */
void at_vnni_pack_rows(void *dst, const at_matrix *w, int o0);

#endif
