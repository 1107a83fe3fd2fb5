/* The SIMD kernel set, written once over a small vector vocabulary and included by
 * kernels_avx2.c (8 lanes) and kernels_avx512.c (16 lanes), each compiled for its ISA.
 *
 * The including file defines:
 *   V, VN              vector type and lanes
 *   V_ZERO()           all-zero vector
 *   V_LOAD(p)          VN floats
 *   V_LOADH(p)         VN halves (f16) widened to floats
 *   V_LOADN(p, k)      k < VN floats, the rest zero;  V_LOADHN(p, k) the same for halves
 *   V_STOREN(p, v, k)  k <= VN floats
 *   V_FMA(a, b, c)     a * b + c, fused
 *   V_ADD, V_MUL, V_SET1
 *   V_HSUM(v)          sum of the lanes in one fixed order
 *   V_HSUM4(a, b, c, d) the four V_HSUMs as one __m128, each bit-identical to V_HSUM
 *   V_DIV, V_NEG, V_MIN, V_MAX, V_ROUND (to nearest), V_LDEXP(p, n) (p * 2^n),
 *   V_GT, V_LT, V_SELECT(mask, a, b): what V_EXP_SWISH below is written in
 *   KSET_NAME          "avx2" / "avx512";  KSET_SYM the at_kernels variable name
 *   I8 kernels:        see the int8 section.
 *
 * Summation order. Every output element y[t,o] is computed the same way whatever n is, and
 * whichever tile it falls in: one vector accumulator, k from 0 upwards in steps of VN with
 * a zero-padded last step, fused multiply-adds, then V_HSUM, then + bias. Tiles only decide
 * which elements are computed together, never how. */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

/* Below this many multiply-adds a parallel region costs more than it saves. */
#define SIMD_PARALLEL_GRAIN (1 << 16)
#define TILE_W 4 /* W rows per micro-tile */
_Static_assert(TILE_W == AT_PACK_ROWS, "a 4-row tile reads one packed group");
#define TILE_X 6 /* input rows per micro-tile */

/* ---------------------------------------------------------------------------------------
 * Small vector kernels */

static inline __attribute__((always_inline)) float simd_dot(const float *a, const float *b, int n) {
    V acc = V_ZERO();
    int k = 0;
    for (; k + VN <= n; k += VN) acc = V_FMA(V_LOAD(a + k), V_LOAD(b + k), acc);
    if (k < n) acc = V_FMA(V_LOADN(a + k, n - k), V_LOADN(b + k, n - k), acc);
    return V_HSUM(acc);
}

static inline __attribute__((always_inline)) void simd_axpy(float *y, float a, const float *x, int n) {
    const V av = V_SET1(a);
    int k = 0;
    for (; k + VN <= n; k += VN) V_STORE(y + k, V_FMA(av, V_LOAD(x + k), V_LOAD(y + k)));
    if (k < n) V_STOREN(y + k, V_FMA(av, V_LOADN(x + k, n - k), V_LOADN(y + k, n - k)), n - k);
}

/* e^v for swish: v = n ln2 + r with |r| <= ln2 / 2, e^r from the Cephes expf polynomial,
 * 2^n added to the exponent bits, for -87 <= v <= 88.37; 0 below, +inf above; a NaN lane
 * gives some finite value (swish's x / (1 + e) keeps the NaN). Swish through it stays within
 * 3.7 * 2^-24 relative error over [-87, 88] (2.8 with libm's expf; 2 million points). */
static inline V V_EXP_SWISH(V v) {
    const V hi = V_SET1(88.3762626647949f), lo = V_SET1(-87.0f); /* n stays in [-126, 128] */
    const V c = V_MIN(V_MAX(v, lo), hi);
    const V n = V_ROUND(V_MUL(c, V_SET1(1.44269504088896341f)));
    V r = V_FMA(n, V_SET1(-0.693359375f), c); /* ln2 in two parts: exact n * hi */
    r = V_FMA(n, V_SET1(2.12194440e-4f), r);
    V p = V_SET1(1.9875691500e-4f);
    p = V_FMA(p, r, V_SET1(1.3981999507e-3f));
    p = V_FMA(p, r, V_SET1(8.3334519073e-3f));
    p = V_FMA(p, r, V_SET1(4.1665795894e-2f));
    p = V_FMA(p, r, V_SET1(1.6666665459e-1f));
    p = V_FMA(p, r, V_SET1(5.0000001201e-1f));
    p = V_FMA(p, V_MUL(r, r), V_ADD(r, V_SET1(1.0f)));
    V e = V_LDEXP(p, n);
    e = V_SELECT(V_GT(v, hi), V_SET1(__builtin_inff()), e);
    return V_SELECT(V_LT(v, lo), V_ZERO(), e);
}

/* x / (1 + e^-x) with V_EXP_SWISH; the tail goes through the same vector code (masked), so a
 * value's result never depends on where it sits. */
static void simd_swish(float *x, size_t n) {
    const V one = V_SET1(1.0f);
    size_t k = 0;
    for (; k + VN <= n; k += VN) {
        const V v = V_LOAD(x + k);
        V_STORE(x + k, V_DIV(v, V_ADD(one, V_EXP_SWISH(V_NEG(v)))));
    }
    if (k < n) {
        const int rest = (int)(n - k);
        const V v = V_LOADN(x + k, rest);
        V_STOREN(x + k, V_DIV(v, V_ADD(one, V_EXP_SWISH(V_NEG(v)))), rest);
    }
}

/* sum of e^(x - shift): lanes accumulate separately, then one V_HSUM */
static float simd_sum_exp(const float *x, int n, float shift) {
    const V sh = V_SET1(shift);
    V acc = V_ZERO();
    int k = 0;
    for (; k + VN <= n; k += VN) acc = V_ADD(acc, V_EXP_SWISH(V_ADD(V_LOAD(x + k), V_NEG(sh))));
    float sum = V_HSUM(acc);
    for (; k < n; k++) sum += expf(x[k] - shift);
    return sum;
}

static void simd_attention_head(const at_attention_args *a, int h) {
    at_attention_head_with(a, h, simd_dot, simd_axpy, at_softmax);
}

static void simd_f16_to_f32(float *dst, const uint16_t *src, size_t n) {
    size_t k = 0;
    for (; k + VN <= n; k += VN) V_STORE(dst + k, V_LOADH(src + k));
    if (k < n) V_STOREN(dst + k, V_LOADHN(src + k, (int)(n - k)), (int)(n - k));
}

/* ---------------------------------------------------------------------------------------
 * f32 / f16 linear: y[n,out] = x[n,in] · Wᵀ + b
 *
 * Micro-tile: RW (≤ TILE_W) W rows × NX (≤ TILE_X) input rows, RW*NX accumulators held in
 * registers over the whole k range; W rows are f32 or f16 (widened in the loop). */

#define UNROLL _Pragma("GCC unroll 8")

/* Where a tile's W rows lie, for either layout (at_matrix_index): element k of the tile's
 * row r is at w + r * rs + (k >> sh) * cs + (k & (2^sh - 1)) elements. Row-major: rs = cols,
 * cs = 2^sh (so simply r * cols + k); packed: rs = one chunk, cs = AT_PACK_ROWS chunks.
 * Vector steps (VN, or the int8 step) divide the chunk, so no step straddles two chunks. */
typedef struct {
    size_t rs, cs;
    int sh;
} wstride;

static inline size_t w_off(wstride s, int k) {
    return (size_t)(k >> s.sh) * s.cs + (size_t)(k & ((1 << s.sh) - 1));
}

static inline wstride matrix_stride(const at_matrix *w) {
    const int ce = at_pack_chunk(w->dtype);
    const wstride s = {w->packed ? (size_t)ce : (size_t)w->cols, (size_t)(w->packed ? AT_PACK_ROWS * ce : ce),
                       __builtin_ctz((unsigned)ce)};
    return s;
}

/* Elements of rows [o0, o1) from row o0's first one (o0 a multiple of AT_PACK_ROWS). */
static inline size_t block_elems(const at_matrix *w, int o0, int o1) {
    if (!w->packed) return (size_t)(o1 - o0) * w->cols;
    const int g0 = o0 / AT_PACK_ROWS, g1 = (o1 + AT_PACK_ROWS - 1) / AT_PACK_ROWS;
    return (size_t)(g1 - g0) * AT_PACK_ROWS * at_pack_chunks(w) * at_pack_chunk(w->dtype);
}

static inline __attribute__((always_inline)) void tile(float *y, int ldy, const float *x, int in,
                                                      const void *w, wstride ws, int f16, const float *b,
                                                      const int RW, const int NX) {
    V acc[TILE_W][TILE_X];
    UNROLL for (int r = 0; r < RW; r++) UNROLL for (int j = 0; j < NX; j++) acc[r][j] = V_ZERO();
    const float *wf = (const float *)w;
    const uint16_t *wh = (const uint16_t *)w;
    int k = 0;
    for (; k + VN <= in; k += VN) {
        const size_t ko = w_off(ws, k);
        V xv[TILE_X];
        UNROLL for (int j = 0; j < NX; j++) xv[j] = V_LOAD(x + (size_t)j * in + k);
        UNROLL for (int r = 0; r < RW; r++) {
            const V wv = f16 ? V_LOADH(wh + r * ws.rs + ko) : V_LOAD(wf + r * ws.rs + ko);
            UNROLL for (int j = 0; j < NX; j++) acc[r][j] = V_FMA(wv, xv[j], acc[r][j]);
        }
    }
    if (k < in) {
        const int rest = in - k;
        const size_t ko = w_off(ws, k);
        V xv[TILE_X];
        UNROLL for (int j = 0; j < NX; j++) xv[j] = V_LOADN(x + (size_t)j * in + k, rest);
        UNROLL for (int r = 0; r < RW; r++) {
            const V wv = f16 ? V_LOADHN(wh + r * ws.rs + ko, rest) : V_LOADN(wf + r * ws.rs + ko, rest);
            UNROLL for (int j = 0; j < NX; j++) acc[r][j] = V_FMA(wv, xv[j], acc[r][j]);
        }
    }
    if (RW == 4) { /* four rows' sums at once, each in V_HSUM's exact order */
        const __m128 bv = b ? _mm_loadu_ps(b) : _mm_setzero_ps();
        UNROLL for (int j = 0; j < NX; j++)
            _mm_storeu_ps(y + (size_t)j * ldy, _mm_add_ps(V_HSUM4(acc[0][j], acc[1][j], acc[2][j], acc[3][j]), bv));
    } else {
        UNROLL for (int j = 0; j < NX; j++) UNROLL for (int r = 0; r < RW; r++)
            y[(size_t)j * ldy + r] = V_HSUM(acc[r][j]) + (b ? b[r] : 0.0f);
    }
}

/* One tile of RW rows over NX input rows, dispatched to a fully unrolled instance. */
#define TILE_CASES(RW, F16)                                                                  \
    switch (nx) {                                                                            \
    case 1: tile(y, ldy, x, in, w, ws, F16, b, RW, 1); break;                                \
    case 2: tile(y, ldy, x, in, w, ws, F16, b, RW, 2); break;                                \
    case 3: tile(y, ldy, x, in, w, ws, F16, b, RW, 3); break;                                \
    case 4: tile(y, ldy, x, in, w, ws, F16, b, RW, 4); break;                                \
    case 5: tile(y, ldy, x, in, w, ws, F16, b, RW, 5); break;                                \
    default: tile(y, ldy, x, in, w, ws, F16, b, RW, 6); break;                               \
    }

static void tile_f32_4(float *y, int ldy, const float *x, int in, const void *w, wstride ws, const float *b, int nx) { TILE_CASES(4, 0) }
static void tile_f32_1(float *y, int ldy, const float *x, int in, const void *w, wstride ws, const float *b, int nx) { TILE_CASES(1, 0) }
static void tile_f16_4(float *y, int ldy, const float *x, int in, const void *w, wstride ws, const float *b, int nx) { TILE_CASES(4, 1) }
static void tile_f16_1(float *y, int ldy, const float *x, int in, const void *w, wstride ws, const float *b, int nx) { TILE_CASES(1, 1) }

/* n floats of the thread's scratch (reused across calls: no allocation in the steady
 * state). NULL if out of memory. */
static float *thread_scratch(size_t n) { return at_scratch(AT_SCRATCH_WIDEN, sizeof(float) * n); }

/* W rows [o0, o1) (o0 a multiple of AT_PACK_ROWS) against every input row. f16 rows are
 * widened once into scratch when several input rows will reuse them (exact, so the result
 * is the same either way); the widened copy keeps the layout, element for element. */
static void linear_block(float *y, const float *x, const at_matrix *w, const float *b, int n,
                         int o0, int o1) {
    const int out = w->rows, in = w->cols;
    const wstride ws = matrix_stride(w);
    const size_t base = at_matrix_index(w, o0, 0);
    const void *wb;
    int f16 = w->dtype == AT_F16;
    if (f16) {
        wb = (const uint16_t *)w->data + base;
        const size_t span = block_elems(w, o0, o1);
        float *buf = n >= 4 ? thread_scratch(span) : NULL;
        if (buf) {
            simd_f16_to_f32(buf, (const uint16_t *)wb, span);
            wb = buf;
            f16 = 0;
        }
    } else {
        wb = (const float *)w->data + base;
    }
    const size_t es = f16 ? 2 : 4;
#define ROW(o) ((const char *)wb + (at_matrix_index(w, (o), 0) - base) * es)
    /* one tile of input rows at a time (in L1) against the whole W block (L1 or L2): the
     * other way round, input blocks of 48 rows were re-read from L2 for every 4 W rows, one
     * 64-byte load per 4 FMAs, and the f32 tiles ran at a quarter of the FMA peak */
    for (int t = 0; t < n; t += TILE_X) {
        const int nx = n - t < TILE_X ? n - t : TILE_X;
        int o = o0;
        for (; o + TILE_W <= o1; o += TILE_W) {
            const void *wr = ROW(o);
            if (f16) tile_f16_4(y + (size_t)t * out + o, out, x + (size_t)t * in, in, wr, ws, b ? b + o : NULL, nx);
            else tile_f32_4(y + (size_t)t * out + o, out, x + (size_t)t * in, in, wr, ws, b ? b + o : NULL, nx);
        }
        for (; o < o1; o++) {
            const void *wr = ROW(o);
            if (f16) tile_f16_1(y + (size_t)t * out + o, out, x + (size_t)t * in, in, wr, ws, b ? b + o : NULL, nx);
            else tile_f32_1(y + (size_t)t * out + o, out, x + (size_t)t * in, in, wr, ws, b ? b + o : NULL, nx);
        }
    }
#undef ROW
}

static void simd_linear_i8(float *y, const float *x, const at_matrix *w, const float *b, int n);

/* One linear split into blocks of RB rows of W for the pool; int8 adds x quantized (xq, with
 * row scales sx). */
typedef struct {
    float *y;
    const float *x;
    const at_matrix *w;
    const float *b;
    int n, RB;
    const int8_t *xq;
    const float *sx;
} linear_job;
static void i8_blocks(const void *ctx, int lo, int hi, int worker);

/* Rows per block when one input row streams W once (batch 1): blocks of about 128 KiB keep
 * each thread reading long runs that the hardware prefetchers follow (int8, 2 threads, Zen 4:
 * 16 KiB blocks read 21 GB/s, 128 KiB blocks 37-40 GB/s), and at least two blocks per
 * thread keep the threads balanced on small matrices. A multiple of AT_PACK_ROWS. */
static int stream_block_rows(const at_matrix *w, int nt) {
    int rb = (int)((128 << 10) / ((size_t)w->cols * at_dtype_size(w->dtype)));
    const int balanced = w->rows / (2 * nt);
    if (rb > balanced) rb = balanced;
    rb -= rb % AT_PACK_ROWS;
    return rb < 16 ? 16 : rb;
}

/* Blocks [lo, hi) of RB rows of W. */
static void linear_blocks(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const linear_job *j = ctx;
    const int out = j->w->rows;
    for (int i = lo; i < hi; i++) {
        const int o0 = i * j->RB, o1 = o0 + j->RB < out ? o0 + j->RB : out;
        linear_block(j->y, j->x, j->w, j->b, j->n, o0, o1);
    }
}

/* Split W rows over threads in blocks (a multiple of TILE_W), each block against all inputs. */
static void simd_linear(float *y, const float *x, const at_matrix *w, const float *b, int n) {
    if (w->dtype == AT_I8) {
        simd_linear_i8(y, x, w, b, n);
        return;
    }
    const int out = w->rows;
    const double work = (double)n * out * w->cols;
    const int nt = at_threads();
    /* batch 1 streams W once, in long runs per thread; larger batches reuse a block */
    const int RB = n == 1 ? stream_block_rows(w, nt) : 32;
    const int nb = (out + RB - 1) / RB;
    const linear_job j = {y, x, w, b, n, RB, NULL, NULL};
    at_parallel_for(nb, work > SIMD_PARALLEL_GRAIN ? nt : 1, linear_blocks, &j);
}
