/* bf16 linear layers on AVX-512 BF16 (vdpbf16ps): W in AT_PACKED_BF16 panels (bf16.h), the
 * inputs rounded to bf16 once per call, 16 outputs a vector summed in f32. A tile is 4 panels
 * (64 outputs) by up to BF16_ROWS input rows: 24 accumulators, 4 loads of W and BF16_ROWS
 * broadcasts per column pair. Every output is one chain over the column pairs in order, so
 * results do not depend on the batch or the thread count. */
#ifndef __clang__ /* clang gets -m flags from the Makefile (make fuzz, make tsan) */
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16")
#endif
#include <immintrin.h>

#include "bf16.h"

#define BF16_ROWS 6
#define BF16_PANELS 4   /* 64 outputs a tile: 24 accumulators */
#define BF16_K_BLOCK 64 /* column pairs per pass over the rows */
#define BF16_GRAIN (1 << 17) /* multiply-adds below which one thread does it all */

typedef struct {
    float *y;
    const uint32_t *xb; /* input rows as bf16 pairs, kp a row */
    const at_matrix *w;
    const float *b;
    int n;
    size_t kp;
} bf16_job;

/* x[n,in] rounded to bf16 (nearest even) into the thread's scratch, each row padded with a
 * zero to whole pairs; NULL if out of memory. */
static const uint32_t *round_inputs(const float *x, int n, int in, size_t kp) {
    uint16_t *xb = at_scratch(AT_SCRATCH_BF16, (size_t)n * kp * 4 + 64);
    if (!xb) return NULL;
    for (int t = 0; t < n; t++) {
        const float *xr = x + (size_t)t * in;
        uint16_t *dr = xb + (size_t)t * kp * 2;
        for (int c = 0; c < in; c += 16) {
            const __mmask16 m = in - c >= 16 ? 0xffff : (__mmask16)((1u << (in - c)) - 1);
            const __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, xr + c));
            _mm256_mask_storeu_epi16(dr + c, m, (__m256i)h);
        }
        if (in & 1) dr[in] = 0;
    }
    return (const uint32_t *)xb;
}

/* R input rows against BF16_PANELS panels, column pairs [k0, k1): the sums so far come
 * from y (k0 > 0) and go back to it, the bias added after the last pair. Storing and
 * reloading an f32 sum changes nothing, so each output is still one chain in pair order. */
static inline __attribute__((always_inline)) void tile(const int R, const bf16_job *j, int t0, int p0, size_t k0,
                                                       size_t k1) {
    const int out = j->w->rows, panels = (out + AT_BF16_PANEL - 1) / AT_BF16_PANEL;
    const size_t stride = j->kp * AT_BF16_PANEL * 2 / 32; /* one panel, in 64-byte vectors */
    const __m512i *w[BF16_PANELS];
    __mmask16 m[BF16_PANELS];
    #pragma GCC unroll 8
    for (int q = 0; q < BF16_PANELS; q++) { /* panels past the last: the first again, stores masked off */
        const int p = p0 + q < panels ? p0 + q : p0, left = out - (p0 + q) * AT_BF16_PANEL;
        w[q] = (const __m512i *)j->w->data + (size_t)p * stride;
        m[q] = left >= 16 ? 0xffff : left <= 0 ? 0 : (__mmask16)((1u << left) - 1);
    }
    __m512 a[BF16_ROWS][BF16_PANELS];
    #pragma GCC unroll 8
    for (int r = 0; r < R; r++)
        #pragma GCC unroll 8
        for (int q = 0; q < BF16_PANELS; q++)
            a[r][q] = k0 ? _mm512_maskz_loadu_ps(m[q], j->y + (size_t)(t0 + r) * out + (p0 + q) * 16) : _mm512_setzero_ps();
    const uint32_t *x = j->xb + (size_t)t0 * j->kp;
    for (size_t k = k0; k < k1; k++) {
        __m512bh v[BF16_PANELS];
        #pragma GCC unroll 8
        for (int q = 0; q < BF16_PANELS; q++) v[q] = (__m512bh)_mm512_load_si512(w[q] + k);
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const __m512bh xv = (__m512bh)_mm512_set1_epi32((int)x[(size_t)r * j->kp + k]);
            #pragma GCC unroll 8
            for (int q = 0; q < BF16_PANELS; q++) a[r][q] = _mm512_dpbf16_ps(a[r][q], xv, v[q]);
        }
    }
    const int last = k1 == j->kp;
    #pragma GCC unroll 8
    for (int q = 0; q < BF16_PANELS; q++) {
        const __m512 b = last && j->b ? _mm512_maskz_loadu_ps(m[q], j->b + (p0 + q) * 16) : _mm512_setzero_ps();
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++)
            _mm512_mask_storeu_ps(j->y + (size_t)(t0 + r) * out + (p0 + q) * 16, m[q], _mm512_add_ps(a[r][q], b));
    }
}

/* Groups [lo, hi) of BF16_PANELS panels against every input row, BF16_K_BLOCK pairs at a
 * time: the group's slice of W (16 KiB) stays in L1 while the rows pass. */
static void panel_groups(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const bf16_job *j = ctx;
    for (int g = lo; g < hi; g++)
        for (size_t k0 = 0; k0 < j->kp; k0 += BF16_K_BLOCK) {
            const size_t k1 = k0 + BF16_K_BLOCK < j->kp ? k0 + BF16_K_BLOCK : j->kp;
            const int p0 = g * BF16_PANELS;
            for (int t = 0; t < j->n; t += BF16_ROWS) {
                switch (j->n - t < BF16_ROWS ? j->n - t : BF16_ROWS) {
                case 1: tile(1, j, t, p0, k0, k1); break;
                case 2: tile(2, j, t, p0, k0, k1); break;
                case 3: tile(3, j, t, p0, k0, k1); break;
                case 4: tile(4, j, t, p0, k0, k1); break;
                case 5: tile(5, j, t, p0, k0, k1); break;
                default: tile(BF16_ROWS, j, t, p0, k0, k1); break;
                }
            }
        }
}

void at_linear_bf16(float *y, const float *x, const at_matrix *w, const float *b, int n) {
    const size_t kp = at_bf16_pairs(w->cols);
    const uint32_t *xb = round_inputs(x, n, w->cols, kp);
    if (!xb) { /* out of memory: the reference needs none */
        at_linear_bf16_ref(y, x, w, b, n);
        return;
    }
    const bf16_job j = {y, xb, w, b, n, kp};
    const int groups = (w->rows + BF16_PANELS * AT_BF16_PANEL - 1) / (BF16_PANELS * AT_BF16_PANEL);
    const double work = (double)n * w->rows * w->cols;
    at_parallel_for(groups, work > BF16_GRAIN ? at_threads() : 1, panel_groups, &j);
}
