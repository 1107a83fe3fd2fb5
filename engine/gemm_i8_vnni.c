/* int8 GEMM with AVX-512 VNNI for several input rows: y[n,out] = xq[n,in] · Wqᵀ, scaled.
 *
 * The one-row kernels (kernels_avx512.c) form each output as a dot product: a vector of
 * partial sums per (W row, input row), reduced across lanes at the end. With d_model 256 a
 * dot product is only 4 vpdpbusd long, and the lane reductions (shuffles, on the port
 * vpdpbusd also needs) cost about as much as the products. Here a vector holds 16 outputs
 * instead: each step broadcasts 4 bytes of an input row and multiplies them with 4 bytes of
 * 16 W rows, so nothing is reduced across lanes and each loaded W vector serves 6 input rows
 * (each broadcast serves 4 W vectors).
 *
 * That needs W as panels of 16 rows, 4 columns at a time ([k/4][16 rows][4 bytes]): the
 * layout AT_PACKED_VNNI (kernels.h) that the loader gives int8 matrices on these CPUs, read
 * as it lies. A matrix in another layout (tests, or a model packed under another kernel set)
 * is transposed block by block into scratch per call, as all of them once were (a sixth of
 * the int8 batch-64 time). Integer sums are exact in any order, so the results are
 * bit-identical to every other int8 path. */
#ifndef __clang__ /* clang gets -m flags from the Makefile (make fuzz, make tsan) */
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma")
#endif
#include "gemm_i8_vnni.h"
#include "pool.h"

#include <immintrin.h>
#include <stdlib.h>

#define PANEL AT_I8_PANEL /* W rows per panel: one vector of int32 sums */
#define BLOCK_PANELS 4 /* panels per thread block (64 W rows), all in one micro-tile */
_Static_assert(BLOCK_PANELS * PANEL == AT_VNNI_BLOCK, "a thread block is a VNNI block");
#define TILE_X 6      /* input rows per micro-tile: 4 x 6 = 24 accumulators of 32 registers */
#define CHUNK 64      /* bytes of a W row transposed at once (one packed chunk) */
#define PARALLEL_GRAIN (1 << 16)
#define UNROLL _Pragma("GCC unroll 8")
#define UNROLL16 _Pragma("GCC unroll 16")
/* acc += u8 x · s8 w in groups of 4 bytes. As inline assembly: GCC 12 allocates the
 * intrinsic's accumulators badly here (a register copy around every vpdpbusd). */
#ifdef __clang__
#define DPBUSD(acc, x, w) ((acc) = _mm512_dpbusd_epi32((acc), (x), (w)))
#else
#define DPBUSD(acc, x, w) __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(x), "v"(w))
#endif

static uint8_t *block_scratch(size_t n) { return at_scratch(AT_SCRATCH_PANELS, n); }

/* One 64-column chunk of 16 W rows (row[i] points at row i's chunk, NULL past the matrix;
 * m masks the columns that exist) as 16 vectors, vector j holding columns 4j .. 4j + 3 of
 * the 16 rows: a 16 x 16 transpose of 4-byte groups. */
static void transpose_chunk(__m512i *dst, const int8_t *const *row, __mmask64 m) {
    __m512i r[PANEL], a[PANEL], b[PANEL];
    UNROLL16 for (int i = 0; i < PANEL; i++) r[i] = row[i] ? _mm512_maskz_loadu_epi8(m, row[i]) : _mm512_setzero_si512();
    /* in each 128-bit lane l, after two unpack rounds: b[4g + c] = rows 4g..4g+3, group 4l + c */
    UNROLL for (int i = 0; i < PANEL; i += 2) {
        a[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        a[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    UNROLL for (int g = 0; g < PANEL; g += 4) {
        b[g] = _mm512_unpacklo_epi64(a[g], a[g + 2]);
        b[g + 1] = _mm512_unpackhi_epi64(a[g], a[g + 2]);
        b[g + 2] = _mm512_unpacklo_epi64(a[g + 1], a[g + 3]);
        b[g + 3] = _mm512_unpackhi_epi64(a[g + 1], a[g + 3]);
    }
    /* then a 4 x 4 transpose of lanes: output 4l + c, lane g = b[4g + c], lane l */
    UNROLL for (int c = 0; c < 4; c++) {
        const __m512i e0 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0x44), e1 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0xee);
        const __m512i e2 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0x44), e3 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0xee);
        dst[c] = _mm512_shuffle_i32x4(e0, e2, 0x88);
        dst[4 + c] = _mm512_shuffle_i32x4(e0, e2, 0xdd);
        dst[8 + c] = _mm512_shuffle_i32x4(e1, e3, 0x88);
        dst[12 + c] = _mm512_shuffle_i32x4(e1, e3, 0xdd);
    }
}

/* Rows [o0, o0 + 64) of W (row-major or AT_PACKED) into panels: panel p's step s (columns
 * 4s .. 4s + 3) is the vector at dst + (p * steps + s) * 64 bytes; steps = chunks * 16. A
 * row's chunks lie `stride` bytes apart in either layout (a packed chunk is 64 bytes). */
static void pack_block(uint8_t *dst, const at_matrix *w, int o0, size_t steps) {
    _Static_assert(AT_PACK_BYTES == CHUNK, "a packed int8 chunk is one transposed chunk");
    const int8_t *W = (const int8_t *)w->data;
    const size_t stride = w->packed ? (size_t)AT_PACK_ROWS * CHUNK : CHUNK;
    const int8_t *row[BLOCK_PANELS * PANEL];
    for (int i = 0; i < BLOCK_PANELS * PANEL; i++) row[i] = o0 + i < w->rows ? W + at_matrix_index(w, o0 + i, 0) : NULL;
    for (int p = 0; p < BLOCK_PANELS; p++) {
        const int8_t *cur[PANEL];
        for (int i = 0; i < PANEL; i++) cur[i] = row[p * PANEL + i];
        for (int k0 = 0; k0 < w->cols; k0 += CHUNK) {
            const int len = w->cols - k0 < CHUNK ? w->cols - k0 : CHUNK;
            /* the next panel's chunk into L2 meanwhile: W comes from L3 or memory */
            if (p + 1 < BLOCK_PANELS)
                for (int i = 0; i < PANEL; i++)
                    if (row[(p + 1) * PANEL + i]) _mm_prefetch((const char *)(row[(p + 1) * PANEL + i] + (size_t)k0 / CHUNK * stride), _MM_HINT_T1);
            transpose_chunk((__m512i *)(void *)(dst + ((size_t)p * steps + (size_t)k0 / 4) * 64), cur,
                            len == CHUNK ? ~0ULL : (~0ULL) >> (CHUNK - len));
            for (int i = 0; i < PANEL; i++) cur[i] = cur[i] ? cur[i] + stride : NULL;
        }
    }
}

void at_vnni_pack_rows(void *dst, const at_matrix *w, int o0) { pack_block(dst, w, o0, at_vnni_steps(w->cols)); }

/* One micro-tile: the block's 64 outputs for NX input rows. xu holds u8 rows (q + 128) with
 * stride in; reading up to 3 bytes past a row's end is harmless (W is zero there) and stays
 * inside at_quantize_rows' buffer (the scales follow the rows). */
static inline __attribute__((always_inline)) void tile(float *y, int ldy, const uint8_t *xu, int in, const float *sx,
                                                      const uint8_t *pw, size_t steps, const __m512i *comp,
                                                      const __m512 *sw, const __m512 *bias, const __mmask16 *keep,
                                                      const char *pf, int pf_shift, const int NX) {
    __m512i acc[BLOCK_PANELS][TILE_X];
    UNROLL for (int p = 0; p < BLOCK_PANELS; p++) UNROLL for (int j = 0; j < NX; j++) acc[p][j] = _mm512_setzero_si512();
    const int used = (in + 3) / 4; /* steps holding columns of W */
    for (int s = 0; s < used; s++) {
        if (pf && !(s & ((1 << pf_shift) - 1))) _mm_prefetch(pf + (size_t)(s >> pf_shift) * 64, _MM_HINT_T1);
        __m512i wv[BLOCK_PANELS];
        UNROLL for (int p = 0; p < BLOCK_PANELS; p++) wv[p] = _mm512_load_si512((const void *)(pw + ((size_t)p * steps + s) * 64));
        UNROLL for (int j = 0; j < NX; j++) {
            int32_t four;
            __builtin_memcpy(&four, xu + (size_t)j * in + 4 * (size_t)s, 4);
            const __m512i xv = _mm512_set1_epi32(four);
            UNROLL for (int p = 0; p < BLOCK_PANELS; p++) DPBUSD(acc[p][j], xv, wv[p]);
        }
    }
    /* AT_I8_OUT lane by lane: (float)(Σ(q+128)w − 128Σw) * (sx * sw) + bias, no fused ops */
    UNROLL for (int j = 0; j < NX; j++) {
        const __m512 sxv = _mm512_set1_ps(sx[j]);
        UNROLL for (int p = 0; p < BLOCK_PANELS; p++) {
            const __m512 v = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[p][j], comp[p]));
            const __m512 r = _mm512_add_ps(_mm512_mul_ps(v, _mm512_mul_ps(sxv, sw[p])), bias[p]);
            _mm512_mask_storeu_ps(y + (size_t)j * ldy + p * PANEL, keep[p], r);
        }
    }
}

static void tile_any(float *y, int ldy, const uint8_t *xu, int in, const float *sx, const uint8_t *pw, size_t steps,
                     const __m512i *comp, const __m512 *sw, const __m512 *bias, const __mmask16 *keep,
                     const char *pf, int pf_shift, int nx) {
#define T(NX) tile(y, ldy, xu, in, sx, pw, steps, comp, sw, bias, keep, pf, pf_shift, NX)
    switch (nx) {
    case 1: T(1); break;
    case 2: T(2); break;
    case 3: T(3); break;
    case 4: T(4); break;
    case 5: T(5); break;
    default: T(6); break;
    }
#undef T
}

/* W rows [o0, o0 + 64) against input rows [t0, t1). pw: the block's panels, or scratch to
 * transpose them into. */
static void gemm_block(float *y, const uint8_t *xu, const float *sx, const at_matrix *w, const float *b, int t0, int t1,
                       int o0, uint8_t *pw, size_t steps) {
    const int out = w->rows, in = w->cols;
    const size_t block_bytes = (size_t)BLOCK_PANELS * steps * 64;
    const char *next = NULL; /* VNNI panels: the next block in memory, pulled into L2 meanwhile */
    if (w->packed == AT_PACKED_VNNI) {
        if (o0 + BLOCK_PANELS * PANEL < out) next = (const char *)pw + block_bytes;
    } else {
        pack_block(pw, w, o0, steps);
    }
    /* per panel: the VNNI correction 128 Σw, scales, bias, and which outputs exist */
    __m512i comp[BLOCK_PANELS];
    __m512 sw[BLOCK_PANELS], bias[BLOCK_PANELS];
    __mmask16 keep[BLOCK_PANELS];
    for (int p = 0; p < BLOCK_PANELS; p++) {
        const int o = o0 + p * PANEL, left = out - o;
        keep[p] = left >= PANEL ? (__mmask16)0xffff : left > 0 ? (__mmask16)((1u << left) - 1) : 0;
        comp[p] = _mm512_slli_epi32(_mm512_maskz_loadu_epi32(keep[p], w->wsum + (left > 0 ? o : 0)), 7);
        sw[p] = _mm512_maskz_loadu_ps(keep[p], w->scale + (left > 0 ? o : 0));
        bias[p] = b ? _mm512_maskz_loadu_ps(keep[p], b + (left > 0 ? o : 0)) : _mm512_setzero_ps();
    }
    /* the next block's lines spread over the tiles, one every 2^pf_shift steps (as the f32
     * panels do: the first tile over a block otherwise waits on memory) */
    const size_t lines = block_bytes / 64, tiles = (size_t)(t1 - t0 + TILE_X - 1) / TILE_X, used = (size_t)(in + 3) / 4;
    const int pf_shift = at_prefetch_shift(tiles, used, lines);
    size_t line = 0;
    for (int t = t0; t < t1; t += TILE_X) {
        const int nx = t1 - t < TILE_X ? t1 - t : TILE_X;
        const char *pf = next && line < lines ? next + line * 64 : NULL;
        line += used >> pf_shift;
        tile_any(y + (size_t)t * out + o0, out, xu + (size_t)t * in, in, sx + t, pw, steps, comp, sw, bias, keep, pf,
                 pf_shift, nx);
    }
}

typedef struct {
    float *y;
    const uint8_t *xu;
    const float *sx, *b;
    const at_matrix *w;
    int n, rb;
    int parts, part_rows; /* input rows in parts of part_rows */
    size_t steps, scratch;
    int failed; /* set atomically by a block without scratch memory */
} gemm_job;

/* Items [lo, hi): item i is block i / parts of rb weight rows against part i % parts of the
 * input rows (consecutive items share a block while it is in cache). */
static void gemm_blocks(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    gemm_job *j = (gemm_job *)ctx;
    for (int i = lo; i < hi; i++) {
        const int blk = i / j->parts, t0 = i % j->parts * j->part_rows;
        const int t1 = t0 + j->part_rows < j->n ? t0 + j->part_rows : j->n;
        uint8_t *pw = j->w->packed == AT_PACKED_VNNI ? (uint8_t *)j->w->data + (size_t)blk * j->scratch
                                                     : block_scratch(j->scratch);
        if (!pw) {
            __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
            return;
        }
        gemm_block(j->y, j->xu, j->sx, j->w, j->b, t0, t1, blk * j->rb, pw, j->steps);
    }
}

/* Parts of the input rows: a matrix of few blocks (d_model 320: 5) left one of 2 threads
 * idle for a block in every product; with the rows split too each thread gets about 4
 * items. Parts keep whole micro-tiles; W in other layouts is transposed per item, so it
 * is not split. */
static int row_parts(const at_matrix *w, int n, int nb, int nt) {
    int parts = 1;
    while (w->packed == AT_PACKED_VNNI && nb * parts < 4 * nt && (n + parts) / (parts + 1) >= 2 * TILE_X) parts++;
    return parts;
}

int at_gemm_i8_vnni(float *y, const uint8_t *xu, const float *sx, const at_matrix *w, const float *b, int n) {
    const int out = w->rows, in = w->cols;
    const size_t steps = ((size_t)in + CHUNK - 1) / CHUNK * (CHUNK / 4);
    const int rb = BLOCK_PANELS * PANEL, nb = (out + rb - 1) / rb;
    const double work = (double)n * out * in;
    const int nt = work > PARALLEL_GRAIN ? at_threads() : 1, parts = nt > 1 ? row_parts(w, n, nb, nt) : 1;
    int part_rows = (n + parts - 1) / parts;
    part_rows = (part_rows + TILE_X - 1) / TILE_X * TILE_X;
    gemm_job j = {y, xu, sx, b, w, n, rb, parts, part_rows, steps, (size_t)BLOCK_PANELS * steps * 64, 0};
    at_parallel_for(nb * parts, nt, gemm_blocks, &j);
    return __atomic_load_n(&j.failed, __ATOMIC_RELAXED) ? -1 : 0;
}
