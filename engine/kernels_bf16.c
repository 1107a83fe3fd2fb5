/* bf16 linear layers on AVX-512 BF16 (vdpbf16ps): W in AT_PACKED_BF16 panels (bf16.h), the
 * inputs rounded to bf16 once per call, 16 outputs a vector summed in f32. A tile is 2 panels
 * (32 outputs) by up to BF16_ROWS input rows: 12 accumulators, 2 loads of W and BF16_ROWS
 * broadcasts per column pair. Every output is one chain over the column pairs in order, so
 * results do not depend on the batch or the thread count. */
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16")
#include <immintrin.h>

#include "bf16.h"

#define BF16_ROWS 6
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

/* R input rows against panels w0 and w1 (outputs o0 .. o0+31, those below out stored). */
static inline __attribute__((always_inline)) void tile(const int R, const bf16_job *j, int t0, const __m512i *w0,
                                                       const __m512i *w1, int o0) {
    __m512 a0[BF16_ROWS], a1[BF16_ROWS];
    for (int r = 0; r < R; r++) a0[r] = a1[r] = _mm512_setzero_ps();
    const uint32_t *x = j->xb + (size_t)t0 * j->kp;
    for (size_t k = 0; k < j->kp; k++) {
        const __m512bh v0 = (__m512bh)_mm512_load_si512(w0 + k), v1 = (__m512bh)_mm512_load_si512(w1 + k);
        for (int r = 0; r < R; r++) {
            const __m512bh xv = (__m512bh)_mm512_set1_epi32((int)x[(size_t)r * j->kp + k]);
            a0[r] = _mm512_dpbf16_ps(a0[r], xv, v0);
            a1[r] = _mm512_dpbf16_ps(a1[r], xv, v1);
        }
    }
    const int out = j->w->rows, left0 = out - o0, left1 = out - o0 - 16;
    const __mmask16 m0 = left0 >= 16 ? 0xffff : (__mmask16)((1u << left0) - 1),
                    m1 = left1 >= 16 ? 0xffff : left1 <= 0 ? 0 : (__mmask16)((1u << left1) - 1);
    const __m512 b0 = j->b ? _mm512_maskz_loadu_ps(m0, j->b + o0) : _mm512_setzero_ps(),
                 b1 = j->b ? _mm512_maskz_loadu_ps(m1, j->b + o0 + 16) : _mm512_setzero_ps();
    for (int r = 0; r < R; r++) {
        float *yr = j->y + (size_t)(t0 + r) * out + o0;
        _mm512_mask_storeu_ps(yr, m0, _mm512_add_ps(a0[r], b0));
        _mm512_mask_storeu_ps(yr + 16, m1, _mm512_add_ps(a1[r], b1));
    }
}

/* Panel pairs [lo, hi) against every input row. */
static void panel_pairs(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const bf16_job *j = ctx;
    const int panels = (j->w->rows + AT_BF16_PANEL - 1) / AT_BF16_PANEL;
    const size_t stride = j->kp * AT_BF16_PANEL * 2 / 32; /* one panel, in 64-byte vectors */
    for (int p = lo; p < hi; p++) {
        const __m512i *w0 = (const __m512i *)j->w->data + (size_t)(2 * p) * stride;
        const __m512i *w1 = 2 * p + 1 < panels ? w0 + stride : w0; /* a last lone panel: stores masked off */
        for (int t = 0; t < j->n; t += BF16_ROWS) {
            switch (j->n - t < BF16_ROWS ? j->n - t : BF16_ROWS) {
            case 1: tile(1, j, t, w0, w1, 32 * p); break;
            case 2: tile(2, j, t, w0, w1, 32 * p); break;
            case 3: tile(3, j, t, w0, w1, 32 * p); break;
            case 4: tile(4, j, t, w0, w1, 32 * p); break;
            case 5: tile(5, j, t, w0, w1, 32 * p); break;
            default: tile(BF16_ROWS, j, t, w0, w1, 32 * p); break;
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
    const int pairs = (w->rows + 2 * AT_BF16_PANEL - 1) / (2 * AT_BF16_PANEL);
    const double work = (double)n * w->rows * w->cols;
    at_parallel_for(pairs, work > BF16_GRAIN ? at_threads() : 1, panel_pairs, &j);
}
