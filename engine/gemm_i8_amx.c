/* int8 GEMM with AMX (Intel Sapphire Rapids and later): y[n,out] = xq[n,in] · Wqᵀ, scaled.
 *
 * AMX adds eight tile registers of 16 rows x 64 bytes and tdpbusd, which multiplies a tile
 * of 16 input rows x 64 u8 columns by a tile of 16 groups of 4 s8 columns x 16 outputs into
 * 16 x 16 int32 sums: 16,384 multiply-adds, about 7x what vpdpbusd on zmm does per cycle
 * (measured by `attend bench`'s peak probe). W's VNNI panels (kernels.h AT_PACKED_VNNI) are
 * that second operand as they lie: 16 consecutive 64-byte steps of a panel are one tile.
 *
 * Four accumulator tiles hold a 32-row x 32-output block; per 64 columns two input tiles and
 * two weight tiles are loaded and multiplied pairwise. The inputs come quantized into rows
 * padded to 32 and columns padded to 64 with zeros (kernels_avx512.c writes them so in its
 * one pass over x; W is zero there too, so the padding adds nothing). Sums are exact
 * integers, so results are bit-identical to every other int8 path; the scaling is AT_I8_OUT
 * with the same vector operations as the VNNI kernel. */
#ifndef __clang__ /* clang gets -m flags from the Makefile (make fuzz, make tsan) */
#pragma GCC target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512dq")
#endif
#include "gemm_i8_amx.h"
#include "pool.h"

#include <immintrin.h>
#include <string.h>

#define TR 16         /* rows of a tile */
#define TK 64         /* bytes of a tile row: 64 input columns, or 16 outputs x 4 columns */
#define PARALLEL_GRAIN (1 << 16)

/* ldtilecfg's 64-byte operand, palette 1: tiles 0-3 accumulators, 4-5 inputs, 6-7 weights,
 * all 16 rows x 64 bytes */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

static void configure_tiles(void) {
    tile_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++) {
        c.colsb[i] = TK;
        c.rows[i] = TR;
    }
    _tile_loadconfig(&c);
}

typedef struct {
    float *y;
    const uint8_t *xa; /* inputs, rows padded to 2 TR and columns to lda, zeros */
    const float *sx, *b;
    const at_matrix *w;
    int n, lda;
} amx_job;

/* AT_I8_OUT for one 16 x 16 accumulator tile: rows [t, t + rows), outputs [o, o + 16) */
static void scale_tile(const amx_job *j, const int32_t *acc, int t, int rows, int o) {
    const at_matrix *w = j->w;
    const int out = w->rows, left = out - o;
    if (left <= 0) return;
    const __mmask16 keep = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
    const __m512i comp = _mm512_slli_epi32(_mm512_maskz_loadu_epi32(keep, w->wsum + o), 7);
    const __m512 sw = _mm512_maskz_loadu_ps(keep, w->scale + o);
    const __m512 bias = j->b ? _mm512_maskz_loadu_ps(keep, j->b + o) : _mm512_setzero_ps();
    for (int r = 0; r < rows; r++) {
        const __m512 v = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_loadu_si512((const void *)(acc + r * 16)), comp));
        const __m512 res = _mm512_add_ps(_mm512_mul_ps(v, _mm512_mul_ps(_mm512_set1_ps(j->sx[t + r]), sw)), bias);
        _mm512_mask_storeu_ps(j->y + (size_t)(t + r) * out + o, keep, res);
    }
}

/* W rows [o0, o0 + 32) (two panels at pw, pw + steps * 64) against input rows [t, t + 32);
 * meanwhile pf_n lines from pf into L2, spread over the k steps (the next block: W streams from
 * memory when it is large, as the output projection is). */
static void panel_pair(const amx_job *j, const uint8_t *pw, size_t steps, int o0, int t, const char *pf, int pf_n) {
    int32_t acc[4][TR * 16] __attribute__((aligned(64)));
    const int lda = j->lda, kb = lda / TK;
    const uint8_t *pw1 = pw + steps * 64;
    const uint8_t *a0 = j->xa + (size_t)t * lda, *a1 = a0 + (size_t)TR * lda;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int k = 0; k < kb; k++) {
        for (int i = k * pf_n / kb; i < (k + 1) * pf_n / kb; i++) _mm_prefetch(pf + (size_t)i * 64, _MM_HINT_T1);
        _tile_loadd(4, a0 + (size_t)k * TK, lda);
        _tile_loadd(6, pw + (size_t)k * TR * 64, 64);
        _tile_dpbusd(0, 4, 6);
        _tile_loadd(7, pw1 + (size_t)k * TR * 64, 64);
        _tile_dpbusd(1, 4, 7);
        _tile_loadd(5, a1 + (size_t)k * TK, lda);
        _tile_dpbusd(2, 5, 6);
        _tile_dpbusd(3, 5, 7);
    }
    _tile_stored(0, acc[0], 64);
    _tile_stored(1, acc[1], 64);
    _tile_stored(2, acc[2], 64);
    _tile_stored(3, acc[3], 64);
    const int r0 = j->n - t < TR ? j->n - t : TR, r1 = j->n - t - TR < TR ? j->n - t - TR : TR;
    scale_tile(j, acc[0], t, r0, o0);
    scale_tile(j, acc[1], t, r0, o0 + 16);
    if (r1 > 0) {
        scale_tile(j, acc[2], t + TR, r1, o0);
        scale_tile(j, acc[3], t + TR, r1, o0 + 16);
    }
}

/* Blocks [lo, hi) of AT_VNNI_BLOCK W rows. */
static void amx_blocks(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const amx_job *j = ctx;
    const size_t steps = at_vnni_steps(j->w->cols), block_bytes = (size_t)AT_VNNI_BLOCK * steps * 4;
    configure_tiles(); /* per call: tile state belongs to the thread, and others may use AMX too */
    for (int blk = lo; blk < hi; blk++) {
        const uint8_t *pb = (const uint8_t *)j->w->data + (size_t)blk * block_bytes;
        /* 32 input rows (in L1) against the block's 64 W rows (L1 or L2), then the next 32;
         * the first pass also pulls the next block into L2 */
        const int last = (blk + 1) * AT_VNNI_BLOCK >= j->w->rows;
        const int lines = (int)(block_bytes / 64), pairs = AT_VNNI_BLOCK / TR / 2;
        for (int t = 0; t < j->n; t += 2 * TR)
            for (int p = 0; p < AT_VNNI_BLOCK / TR; p += 2) {
                const int o0 = blk * AT_VNNI_BLOCK + p * TR;
                if (o0 >= j->w->rows) break;
                const int pf_n = t == 0 && !last ? lines / pairs : 0;
                const char *pf = (const char *)pb + block_bytes + (size_t)(p / 2) * (lines / pairs) * 64;
                panel_pair(j, pb + (size_t)p * steps * 64, steps, o0, t, pf, pf_n);
            }
    }
    _tile_release();
}

void at_gemm_i8_amx(float *y, const uint8_t *xa, int lda, const float *sx, const at_matrix *w, const float *b, int n) {
    const int out = w->rows, in = w->cols;
    const amx_job j = {y, xa, sx, b, w, n, lda};
    const int nb = (out + AT_VNNI_BLOCK - 1) / AT_VNNI_BLOCK;
    const double work = (double)n * out * in;
    at_parallel_for(nb, work > PARALLEL_GRAIN ? at_threads() : 1, amx_blocks, &j);
}
