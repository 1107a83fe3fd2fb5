/* bf16 compute (issue 37): linear layers with their matrices in bfloat16 (the top 16 bits of
 * an f32), inputs rounded to bf16 per call (round to nearest even) and products summed in
 * f32 by AVX-512 BF16's vdpbf16ps. An approximate compute type, like int8: results differ
 * from f32 in the last digits and now and then in a chosen token.
 *
 * Layout AT_PACKED_BF16: rows in panels of AT_BF16_PANEL; a panel stores its 16 rows'
 * columns (2k, 2k+1) side by side (64 bytes: row 0's pair, row 1's pair, ...), then pair
 * k+1: the operand vdpbf16ps multiplies by a broadcast input pair, 16 outputs a vector.
 * Columns are zero-padded to even, rows to whole panels. */
#ifndef ATTEND_BF16_H
#define ATTEND_BF16_H

#include "kernels.h"

#define AT_BF16_PANEL 16
/* Column pairs of a bf16 panel. */
static inline size_t at_bf16_pairs(int cols) { return ((size_t)cols + 1) / 2; }
/* Index of element (r, c) in an AT_PACKED_BF16 matrix's data, in bf16 elements. */
static inline size_t at_bf16_index(const at_matrix *m, int r, int c) {
    return (((size_t)(r / AT_BF16_PANEL) * at_bf16_pairs(m->cols) + (size_t)(c / 2)) * AT_BF16_PANEL + r % AT_BF16_PANEL) * 2 +
           c % 2;
}
/* f32 -> bf16 rounded to nearest even (NaN stays a quiet NaN), and back (exact). */
uint16_t at_f32_to_bf16_1(float f);
float at_bf16_to_f32_1(uint16_t h);
/* 1 if this CPU runs the bf16 kernels (AVX-512 BF16 and the avx512 kernel set active). */
int at_bf16_available(void);
/* Bytes of the AT_PACKED_BF16 copy of an f32 or f16 matrix (a multiple of 64). */
size_t at_matrix_bf16_bytes(const at_matrix *m);
/* Convert an f32 or f16 matrix (any layout) into buf (at_matrix_bf16_bytes, 64-byte
 * aligned) as AT_BF16 / AT_PACKED_BF16, and point m at it. */
void at_matrix_to_bf16_into(at_matrix *m, void *buf);
/* Row r of an AT_BF16 matrix as f32. */
void at_bf16_row(float *dst, const at_matrix *m, int r);
/* y[n,out] = x[n,in] · Wᵀ + b for an AT_BF16 W: the portable reference (inputs rounded to
 * bf16, products summed in f32 in column order), and the AVX-512 BF16 kernel
 * (engine/kernels_bf16.c; only where at_bf16_available). */
void at_linear_bf16_ref(float *y, const float *x, const at_matrix *w, const float *b, int n);
void at_linear_bf16(float *y, const float *x, const at_matrix *w, const float *b, int n);
/* The kernel with swish applied to y as each tile is stored (the same values as a pass after). */
void at_linear_bf16_swish(float *y, const float *x, const at_matrix *w, const float *b, int n);
/* The kernel where available, else the reference (a kernel set forced lower after loading);
 * _swish: then swish over y. */
void at_linear_bf16_any(float *y, const float *x, const at_matrix *w, const float *b, int n);
void at_linear_bf16_swish_any(float *y, const float *x, const at_matrix *w, const float *b, int n);

#endif
