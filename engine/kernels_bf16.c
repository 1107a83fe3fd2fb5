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
#define BF16_GRAIN (1 << 16) /* multiply-adds below which one thread does it all (as f32) */
#define BF16_ROUND_GRAIN (1 << 16) /* input elements below which one thread rounds them */

typedef struct {
    float *y;
    const uint32_t *xb; /* input rows as bf16 pairs, kp a row */
    const at_matrix *w;
    const float *b;
    int n;
    size_t kp;
    int parts, part_rows; /* input rows in parts of part_rows */
    int swish;            /* swish applied to y after the bias */
} bf16_job;

typedef struct {
    const float *x;
    uint16_t *xb;
    int in;
    size_t kp;
} round_job;

/* Rows [lo, hi) of x rounded to bf16 (nearest even), each padded with a zero to whole pairs. */
static void round_rows(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const round_job *j = ctx;
    const int in = j->in;
    for (int t = lo; t < hi; t++) {
        const float *xr = j->x + (size_t)t * in;
        uint16_t *dr = j->xb + (size_t)t * j->kp * 2;
        for (int c = 0; c < in; c += 16) {
            const __mmask16 m = in - c >= 16 ? 0xffff : (__mmask16)((1u << (in - c)) - 1);
            const __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, xr + c));
            _mm256_mask_storeu_epi16(dr + c, m, (__m256i)h);
        }
        if (in & 1) dr[in] = 0;
    }
}

/* x[n,in] as bf16 pairs in the calling thread's scratch (split over the threads when large:
 * the encoder's 640 x 1280 inputs took 3% of a batch-32 run on one thread while the other
 * waited); NULL if out of memory. */
static const uint32_t *round_inputs(const float *x, int n, int in, size_t kp) {
    uint16_t *xb = at_scratch(AT_SCRATCH_BF16, (size_t)n * kp * 4 + 64);
    if (!xb) return NULL;
    const round_job j = {x, xb, in, kp};
    at_parallel_for(n, (double)n * in > BF16_ROUND_GRAIN ? at_threads() : 1, round_rows, &j);
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
    const int width = out - p0 * AT_BF16_PANEL < BF16_PANELS * AT_BF16_PANEL ? out - p0 * AT_BF16_PANEL
                                                                           : BF16_PANELS * AT_BF16_PANEL;
    if (last && j->swish) /* element-wise, so per tile it is what one pass over y would give */
        for (int r = 0; r < R; r++) at_k()->swish(j->y + (size_t)(t0 + r) * out + p0 * AT_BF16_PANEL, (size_t)width);
}

/* Items [lo, hi): item i is group i / parts of BF16_PANELS panels against part i % parts
 * of the input rows, BF16_K_BLOCK pairs at a time: the group's slice of W (16 KiB) stays in
 * L1 while the part's rows pass. */
static void panel_groups(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const bf16_job *j = ctx;
    for (int i = lo; i < hi; i++) {
        const int p0 = i / j->parts * BF16_PANELS, r0 = i % j->parts * j->part_rows;
        const int r1 = r0 + j->part_rows < j->n ? r0 + j->part_rows : j->n;
        for (size_t k0 = 0; k0 < j->kp; k0 += BF16_K_BLOCK) {
            const size_t k1 = k0 + BF16_K_BLOCK < j->kp ? k0 + BF16_K_BLOCK : j->kp;
            for (int t = r0; t < r1; t += BF16_ROWS) {
                switch (r1 - t < BF16_ROWS ? r1 - t : BF16_ROWS) {
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
}

/* Parts of the input rows: a matrix of few groups (d_model 320: 5) left one of 2 threads
 * idle for a group in every product; with the rows split too each thread gets about 4
 * items. Parts keep whole tiles, and every output stays one chain, so the split changes
 * no result. */
static int row_parts(int n, int groups, int nt) {
    int parts = 1;
    while (groups * parts < 4 * nt && (n + parts) / (parts + 1) >= 2 * BF16_ROWS) parts++;
    return parts;
}

static void linear_bf16(float *y, const float *x, const at_matrix *w, const float *b, int n, int swish) {
    const size_t kp = at_bf16_pairs(w->cols);
    const uint32_t *xb = round_inputs(x, n, w->cols, kp);
    if (!xb) { /* out of memory: the reference needs none */
        at_linear_bf16_ref(y, x, w, b, n);
        if (swish) at_k()->swish(y, (size_t)n * w->rows);
        return;
    }
    const int groups = (w->rows + BF16_PANELS * AT_BF16_PANEL - 1) / (BF16_PANELS * AT_BF16_PANEL);
    const double work = (double)n * w->rows * w->cols;
    const int nt = work > BF16_GRAIN ? at_threads() : 1, parts = nt > 1 ? row_parts(n, groups, nt) : 1;
    int part_rows = (n + parts - 1) / parts;
    part_rows = (part_rows + BF16_ROWS - 1) / BF16_ROWS * BF16_ROWS;
    const bf16_job j = {y, xb, w, b, n, kp, parts, part_rows, swish};
    at_parallel_for(groups * parts, nt, panel_groups, &j);
}

void at_linear_bf16(float *y, const float *x, const at_matrix *w, const float *b, int n) { linear_bf16(y, x, w, b, n, 0); }

void at_linear_bf16_swish(float *y, const float *x, const at_matrix *w, const float *b, int n) {
    linear_bf16(y, x, w, b, n, 1);
}
