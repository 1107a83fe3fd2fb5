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
 *   V_GT, V_LT, V_SELECT(mask, a, b): what V_EXP_SWISH below is written in; V_MASK_T the
 *                      type of V_GT's result
 *   KSET_NAME          "avx2" / "avx512";  KSET_SYM the at_kernels variable name
 *   I8 kernels:        see the int8 section.
 *
 * Summation order. Every output element y[t,o] of an f32 / f16 linear is computed the same
 * way whatever n is, and whichever tile it falls in: one chain of fused multiply-adds over
 * k = 0, 1, ..., in - 1 from zero, then + bias. So the AVX2 and AVX-512 sets give identical
 * linear outputs. Tiles only decide which elements are computed together, never how.
 * (Dot products, e.g. in attention, use one vector accumulator over k in steps of VN, then
 * V_HSUM, or V_HSUM4 for four at once: the same sums.) */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#include "kernels.h"

/* Below this many multiply-adds a parallel region costs more than it saves. */
#define SIMD_PARALLEL_GRAIN (1 << 16)

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

/* x / (1 + e^-x) with V_EXP_SWISH, lane by lane */
static inline V V_SWISH(V v) {
    return V_DIV(v, V_ADD(V_SET1(1.0f), V_EXP_SWISH(V_NEG(v))));
}

/* V_SWISH in place; the tail goes through the same vector code (masked), so a value's result
 * never depends on where it sits (and equals the linear layers' fused swish). */
static void simd_swish(float *x, size_t n) {
    size_t k = 0;
    for (; k + VN <= n; k += VN) V_STORE(x + k, V_SWISH(V_LOAD(x + k)));
    if (k < n) {
        const int rest = (int)(n - k);
        V_STOREN(x + k, V_SWISH(V_LOADN(x + k, rest)), rest);
    }
}

/* GELU, x Φ(x) = x (1 - erfc(z) / 2) for x >= 0 and x erfc(z) / 2 below, z = |x| / √2, with
 * erfc(z) = t e^(P(t) - z²), t = 1 / (1 + z / 2): P is a degree-9 polynomial fitted (for this
 * file, minimax by reweighted least squares) to log(erfc(z) / t) + z² over z in [0, 9.5],
 * within 4.3e-8; beyond, e^ gives 0 (V_EXP_SWISH) and GELU is x or 0. Within 9e-8 of GELU
 * (relative above 1; libm's 1 + erff: 9.4e-8) and 1.6e-6 relative down to x = -5, where
 * 1 + erff(x) has cancelled to 4% (tests/test_kernels.c). NaN stays NaN; -inf gives NaN as
 * x (1 + erf(x)) does. */
static inline V V_GELU(V x) {
    static const float p[10] = {-1.2654269454817204f, 0.9982045736837994f, 0.39032244257277415f,
                                0.016995937105364567f, 0.05302512567620471f, -0.17761037847153616f,
                                -0.5787579443066426f, 1.068640019179836f, -0.6434853377112346f,
                                0.1380925502200536f};
    const V z = V_MUL(V_MAX(x, V_NEG(x)), V_SET1(0.70710678118654752f));
    const V t = V_DIV(V_SET1(1.0f), V_FMA(z, V_SET1(0.5f), V_SET1(1.0f)));
    V poly = V_SET1(p[9]);
    for (int i = 8; i >= 0; i--) poly = V_FMA(poly, t, V_SET1(p[i]));
    const V half_erfc = V_MUL(V_MUL(t, V_SET1(0.5f)), V_EXP_SWISH(V_FMA(V_NEG(z), z, poly)));
    return V_SELECT(V_LT(x, V_ZERO()), V_MUL(x, half_erfc), V_MUL(x, V_ADD(V_SET1(1.0f), V_NEG(half_erfc))));
}

/* V_GELU in place; the tail through the same vector code (masked) */
static void simd_gelu(float *x, size_t n) {
    size_t k = 0;
    for (; k + VN <= n; k += VN) V_STORE(x + k, V_GELU(V_LOAD(x + k)));
    if (k < n) {
        const int rest = (int)(n - k);
        V_STOREN(x + k, V_GELU(V_LOADN(x + k, rest)), rest);
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

/* simd_dot of (a + i n, b + i n) for i < 4, the four reductions in one V_HSUM4 */
static inline __attribute__((always_inline)) void simd_dot4(float *r, const float *a, const float *b, int n) {
    const float *a1 = a + n, *a2 = a1 + n, *a3 = a2 + n, *b1 = b + n, *b2 = b1 + n, *b3 = b2 + n;
    V c0 = V_ZERO(), c1 = V_ZERO(), c2 = V_ZERO(), c3 = V_ZERO(); /* named: an array stayed on the stack */
    int k = 0;
    for (; k + VN <= n; k += VN) {
        c0 = V_FMA(V_LOAD(a + k), V_LOAD(b + k), c0);
        c1 = V_FMA(V_LOAD(a1 + k), V_LOAD(b1 + k), c1);
        c2 = V_FMA(V_LOAD(a2 + k), V_LOAD(b2 + k), c2);
        c3 = V_FMA(V_LOAD(a3 + k), V_LOAD(b3 + k), c3);
    }
    if (k < n) {
        const int m = n - k;
        c0 = V_FMA(V_LOADN(a + k, m), V_LOADN(b + k, m), c0);
        c1 = V_FMA(V_LOADN(a1 + k, m), V_LOADN(b1 + k, m), c1);
        c2 = V_FMA(V_LOADN(a2 + k, m), V_LOADN(b2 + k, m), c2);
        c3 = V_FMA(V_LOADN(a3 + k, m), V_LOADN(b3 + k, m), c3);
    }
    _mm_storeu_ps(r, V_HSUM4(c0, c1, c2, c3));
}

static void simd_attention_heads(const at_attention_args *a, int h0, int h1) {
    at_attention_heads_with(a, h0, h1, simd_dot, simd_dot4, simd_axpy, at_softmax);
}

/* at_softmax with V_EXP_SWISH's exps (below -87, as -inf, they are 0) summed in float lanes:
 * within a few ulps of at_softmax, and one value at a time never waits on libm */
static void simd_softmax(float *x, int n) {
    V m = V_SET1(-INFINITY);
    int k = 0;
    for (; k + VN <= n; k += VN) m = V_MAX(m, V_LOAD(x + k));
    float lanes[VN], mx = -INFINITY;
    V_STORE(lanes, m);
    for (int i = 0; i < VN; i++) mx = lanes[i] > mx ? lanes[i] : mx;
    for (int i = k; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    if (mx == -INFINITY) { /* nothing visible: all zero rather than NaN */
        memset(x, 0, sizeof(float) * (size_t)n);
        return;
    }
    const V shift = V_SET1(-mx);
    V acc = V_ZERO();
    for (k = 0; k + VN <= n; k += VN) {
        const V e = V_EXP_SWISH(V_ADD(V_LOAD(x + k), shift));
        V_STORE(x + k, e);
        acc = V_ADD(acc, e);
    }
    float sum = V_HSUM(acc);
    if (k < n) { /* the tail through the same exp, its padding lanes left out of the sum */
        V_STOREN(x + k, V_EXP_SWISH(V_ADD(V_LOADN(x + k, n - k), shift)), n - k);
        for (int i = k; i < n; i++) sum += x[i];
    }
    const V inv = V_SET1(1.0f / sum);
    for (k = 0; k + VN <= n; k += VN) V_STORE(x + k, V_MUL(V_LOAD(x + k), inv));
    if (k < n) V_STOREN(x + k, V_MUL(V_LOADN(x + k, n - k), inv), n - k);
}

/* at_argmax_loop's index in one pass: each lane keeps the largest value it has seen and where
 * it first saw it (only a strictly greater value replaces it, so NaN never enters and the
 * first of equals stays); lanes visit their indices in increasing order, so the smallest
 * index among the lanes holding the overall maximum is the loop's. Four accumulators hide
 * the compare's latency. Indices ride in float lanes: exact below 2^24. */
static int simd_argmax(const float *x, int n) {
    if (n < 4 * VN || n > (1 << 24) || x[0] != x[0]) return at_argmax_loop(x, n);
    static const float iota[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    const V lane = V_LOAD(iota), step = V_SET1(4 * VN);
    V m[4], at[4], pos[4];
    for (int j = 0; j < 4; j++) {
        m[j] = V_SET1(x[0]);
        at[j] = V_ZERO();
        pos[j] = V_ADD(lane, V_SET1((float)(j * VN)));
    }
    int i = 0;
    for (; i + 4 * VN <= n; i += 4 * VN) {
        /* a row of logits comes from memory: asked for 4 KiB ahead, 58k of them streamed at
         * 23 GB/s instead of 14 (one thread) */
        for (int j = 0; j < 4 * VN; j += 16) __builtin_prefetch(x + i + 1024 + j);
        for (int j = 0; j < 4; j++) {
            const V v = V_LOAD(x + i + j * VN);
            const V_MASK_T gt = V_GT(v, m[j]);
            m[j] = V_SELECT(gt, v, m[j]);
            at[j] = V_SELECT(gt, pos[j], at[j]);
            pos[j] = V_ADD(pos[j], step);
        }
    }
    /* the rest into accumulator 0, the last vector overlapping the one before (its lanes'
     * indices still increase) */
    for (int last = 0; i < n; i += VN) {
        if (i + VN > n) i = n - VN, last = 1;
        const V v = V_LOAD(x + i), p = V_ADD(lane, V_SET1((float)i));
        const V_MASK_T gt = V_GT(v, m[0]);
        m[0] = V_SELECT(gt, v, m[0]);
        at[0] = V_SELECT(gt, p, at[0]);
        if (last) break;
    }
    float mv[4 * VN], av[4 * VN];
    for (int j = 0; j < 4; j++) V_STORE(mv + j * VN, m[j]), V_STORE(av + j * VN, at[j]);
    float mx = mv[0], best = av[0];
    for (int l = 1; l < 4 * VN; l++)
        if (mv[l] > mx || (mv[l] == mx && av[l] < best)) mx = mv[l], best = av[l];
    return (int)best;
}

static void simd_add_scalar(float *dst, const float *x, float a, int n) {
    const V av = V_SET1(a);
    int i = 0;
    for (; i + VN <= n; i += VN) V_STORE(dst + i, V_ADD(V_LOAD(x + i), av));
    for (; i < n; i++) dst[i] = x[i] + a;
}

/* Whole vectors are tested at once (a beam's top-k scan finds a new candidate in a few of
 * 58k ids); a vector with one is searched again lane by lane, so the answer is the loop's. */
static int simd_first_above(const float *x, int n, float add, float thr) {
    const V av = V_SET1(add), tv = V_SET1(thr);
    int i = 0;
    for (; i + VN <= n; i += VN)
        if (V_ANY(V_GT(V_ADD(V_LOAD(x + i), av), tv))) break;
    for (; i < n; i++)
        if (x[i] + add > thr) return i;
    return n;
}

static void simd_f16_to_f32(float *dst, const uint16_t *src, size_t n) {
    size_t k = 0;
    for (; k + VN <= n; k += VN) V_STORE(dst + k, V_LOADH(src + k));
    if (k < n) V_STOREN(dst + k, V_LOADHN(src + k, (int)(n - k)), (int)(n - k));
}

/* ---------------------------------------------------------------------------------------
 * Linear layers: y[n,out] = x[n,in] · Wᵀ + b */

#define UNROLL _Pragma("GCC unroll 8")

/* Where an int8 tile's W rows lie, for either layout (at_matrix_index): element k of the tile's
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

/* ---------------------------------------------------------------------------------------
 * f32 / f16 linear as outer products on panels (kernels.h: AT_PANEL)
 *
 * A micro-tile keeps R (≤ MR) input rows × HV vectors of one panel group's outputs in
 * registers; each step k loads the HV weight vectors of column k, broadcasts the R inputs
 * x[t, k] and does R × HV fused multiply-adds. So every output is one chain of fused
 * multiply-adds over k = 0, 1, ..., in order, whatever n is and whichever tile it falls in
 * (the scalar fallback below computes the same chain). Blocks of KC columns of a group (32
 * KiB as f32) stay in L1 while all tiles of a block of input rows pass over them; between
 * column blocks a tile's partial sums wait in memory, which is exact. */

/* Where a tile's last column block goes instead of the partial sums: y rows ldy apart, plus
 * the bias b (NULL: none), then swish if set; y and b already offset to the tile's first
 * output. */
typedef struct {
    float *y;
    int ldy;
    const float *b;
    int swish;
} tile_out;

#define HV 4                  /* vectors per micro-tile: a whole group (AVX-512) or half (AVX2) */
#define MR (VN == 16 ? 6 : 3) /* input rows per micro-tile: 24 or 12 accumulators, + MR + 1 */
#define KC 128                /* columns per block */
#define NC 96                 /* input rows per block at most */
_Static_assert(AT_PANEL % (HV * VN) == 0, "a micro-tile covers a whole number of vectors of a group");

static inline __attribute__((always_inline)) void panel_tile(float *part, const float *x, int ldx, const void *w,
                                                            int kc, int first, const char *pf, int pf_shift,
                                                            const tile_out *out, const int f16, const int R,
                                                            const int PF) {
    V acc[MR][HV];
    UNROLL for (int i = 0; i < R; i++) UNROLL for (int j = 0; j < HV; j++)
        acc[i][j] = first ? V_ZERO() : V_LOAD(part + (size_t)i * AT_PANEL + j * VN);
    const float *wf = (const float *)w;
    const uint16_t *wh = (const uint16_t *)w;
    _Pragma("GCC unroll 2") /* 5-7% at 640 rows: the loop's own steps and one more overlap */
    for (int k = 0; k < kc; k++) {
        if (PF && !(k & ((1 << pf_shift) - 1))) __builtin_prefetch(pf + (size_t)(k >> pf_shift) * 64, 0, 2);
        V xb[MR];
        UNROLL for (int i = 0; i < R; i++) xb[i] = V_SET1(x[(size_t)i * ldx + k]);
        UNROLL for (int j = 0; j < HV; j++) {
            const size_t e = (size_t)k * AT_PANEL + (size_t)j * VN;
            const V wv = f16 ? V_LOADH(wh + e) : V_LOAD(wf + e);
            UNROLL for (int i = 0; i < R; i++) acc[i][j] = V_FMA(wv, xb[i], acc[i][j]);
        }
    }
    if (out) { /* the last column block: y = sum + bias, the one rounding after the chain */
        UNROLL for (int j = 0; j < HV; j++) {
            const V b = out->b ? V_LOAD(out->b + j * VN) : V_ZERO();
            UNROLL for (int i = 0; i < R; i++) {
                V v = out->b ? V_ADD(acc[i][j], b) : acc[i][j];
                if (out->swish) v = V_SWISH(v); /* while in registers: no pass over y (5.2 MB a layer) */
                V_STORE(out->y + (size_t)i * out->ldy + j * VN, v);
            }
        }
        return;
    }
    UNROLL for (int i = 0; i < R; i++) UNROLL for (int j = 0; j < HV; j++)
        V_STORE(part + (size_t)i * AT_PANEL + j * VN, acc[i][j]);
}

/* panel_tile for R = r rows, as a fully unrolled instance; PF: with the prefetches (a test
 * per step in the loop without them cost 5% at 1280 rows) */
#define PANEL_CASES(F16, PF)                                                                 \
    switch (r) {                                                                             \
    case 1: panel_tile(part, x, ldx, w, kc, first, pf, pf_shift, out, F16, 1, PF); break;          \
    case 2: panel_tile(part, x, ldx, w, kc, first, pf, pf_shift, out, F16, 2, PF); break;          \
    case 3: panel_tile(part, x, ldx, w, kc, first, pf, pf_shift, out, F16, 3, PF); break;          \
    case 4: panel_tile(part, x, ldx, w, kc, first, pf, pf_shift, out, F16, MR >= 4 ? 4 : 1, PF); break; \
    case 5: panel_tile(part, x, ldx, w, kc, first, pf, pf_shift, out, F16, MR >= 5 ? 5 : 1, PF); break; \
    default: panel_tile(part, x, ldx, w, kc, first, pf, pf_shift, out, F16, MR, PF); break;       \
    }
/* tile_f32 / tile_f16: the f32 or f16 panel tile; pf NULL for none */
#define TILE_FN(NAME, F16)                                                                                       \
    static void NAME(float *part, const float *x, int ldx, const void *w, int kc, int first, const char *pf,    \
                     int pf_shift, const tile_out *out, int r) {                                                                    \
        if (pf) PANEL_CASES(F16, 1) else PANEL_CASES(F16, 0)                                                     \
    }
TILE_FN(tile_f32, 0)
TILE_FN(tile_f16, 1)

/* The same chains one output at a time, for a matrix that is not in panels (tests) or when
 * there is no memory for the blocks: slow, and bit-identical to the tiles. */
static void linear_scalar(float *y, const float *x, const at_matrix *w, const float *b, int n, int o0, int o1,
                          int swish) {
    for (int o = o0; o < o1; o++)
        for (int t = 0; t < n; t++) {
            const float *xt = x + (size_t)t * w->cols;
            float acc = 0.0f;
            for (int k = 0; k < w->cols; k++) {
                const size_t e = at_matrix_index(w, o, k);
                const float wk = w->dtype == AT_F16 ? at_f16_to_f32_1(((const uint16_t *)w->data)[e]) : ((const float *)w->data)[e];
                acc = __builtin_fmaf(wk, xt[k], acc);
            }
            y[(size_t)t * w->rows + o] = b ? acc + b[o] : acc;
        }
    for (int t = 0; swish && t < n; t++) simd_swish(y + (size_t)t * w->rows + o0, (size_t)(o1 - o0));
}

/* Panel group g against input rows [t0, t1) (at most NC). Partial sums live in a block of
 * (t1 - t0) × AT_PANEL floats; f16 weights are widened once per column block when more
 * than one tile will read them (exact, so the result is the same either way). prefetch:
 * W may be cold (the group's first block of input rows on this thread). */
static void panel_block(float *y, const float *x, const at_matrix *w, const float *b, int g, int t0, int t1,
                        int prefetch, int swish) {
    const int in = w->cols, out = w->rows, nr = t1 - t0, o0 = g * AT_PANEL;
    const int o1 = o0 + AT_PANEL < out ? o0 + AT_PANEL : out;
    float *part = at_scratch(AT_SCRATCH_PANELS, sizeof(float) * (size_t)nr * AT_PANEL);
    int f16 = w->dtype == AT_F16;
    float *wide = f16 && nr > MR ? at_scratch(AT_SCRATCH_WIDEN, sizeof(float) * KC * AT_PANEL) : NULL;
    if (!part || (f16 && nr > MR && !wide)) {
        linear_scalar(y + (size_t)t0 * out, x + (size_t)t0 * in, w, b, nr, o0, o1, swish);
        return;
    }
    const size_t es = (size_t)at_dtype_size(w->dtype);
    const char *wg = (const char *)w->data + (size_t)g * in * AT_PANEL * es;
    /* a whole group's tiles write y themselves after their last column block (the pass over
     * the partial sums cost 4% of a batch-64 run); a group cut short by the matrix's end
     * goes through part (y has no room for its padded outputs) */
    const int direct = o1 - o0 == AT_PANEL;
    for (int k0 = 0; k0 < in; k0 += KC) {
        const int kc = in - k0 < KC ? in - k0 : KC;
        const void *wk = wg + (size_t)k0 * AT_PANEL * es;
        int half = f16;
        if (wide) {
            simd_f16_to_f32(wide, (const uint16_t *)wk, (size_t)kc * AT_PANEL);
            wk = wide;
            half = 0;
        }
        /* the tiles also pull the next column block (in memory order: the next block of this
         * group or the next group) into L2, spread over them: without it the first
         * tile over each block waited on memory (the 58k-row output projection at batch 64
         * ran at 43% of the FMA peak, other shapes at 70-88%). Later blocks of input rows
         * find the group in cache: there the prefetches only cost (5% at 1280 rows). */
        const char *next = (const char *)(wg) + (size_t)(k0 + kc) * AT_PANEL * es;
        const size_t next_lines = prefetch ? (size_t)KC * AT_PANEL * es / 64 : 0;
        const size_t tiles = (size_t)(nr + MR - 1) / MR * (AT_PANEL / (HV * VN));
        const int pf_shift = at_prefetch_shift(tiles, (size_t)kc, next_lines);
        size_t pf_line = 0;
        const int last = k0 + kc >= in && direct;
        for (int t = t0; t < t1; t += MR) {
            const int r = t1 - t < MR ? t1 - t : MR;
            for (int h = 0; h < AT_PANEL; h += HV * VN) {
                float *pt = part + (size_t)(t - t0) * AT_PANEL + h;
                const float *xt = x + (size_t)t * in + k0;
                const char *pf = pf_line < next_lines ? next + pf_line * 64 : NULL;
                const tile_out to = {y + (size_t)t * out + o0 + h, out, b ? b + o0 + h : NULL, swish};
                pf_line += (size_t)(kc >> pf_shift);
                if (half) tile_f16(pt, xt, in, (const uint16_t *)wk + h, kc, k0 == 0, pf, pf_shift, last ? &to : NULL, r);
                else tile_f32(pt, xt, in, (const float *)wk + h, kc, k0 == 0, pf, pf_shift, last ? &to : NULL, r);
            }
        }
    }
    if (direct) return;
    const int no = o1 - o0;
    for (int t = t0; t < t1; t++) { /* y = sum + bias: the one rounding after the chain */
        const float *pt = part + (size_t)(t - t0) * AT_PANEL;
        float *yt = y + (size_t)t * out + o0;
        for (int o = 0; o < no; o += VN) {
            const int len = no - o < VN ? no - o : VN;
            V v = V_LOAD(pt + o);
            if (b) v = V_ADD(v, V_LOADN(b + o0 + o, len));
            if (swish) v = V_SWISH(v);
            if (len == VN) V_STORE(yt + o, v);
            else V_STOREN(yt + o, v, len);
        }
    }
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
    int nc;    /* f32 / f16: input rows per block */
    int swish; /* f32 / f16: swish applied to y */
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

/* Items [lo, hi) of a panel linear. Item i is the run of j->RB panel groups number
 * i / nblocks against the block of j->nc input rows number i % nblocks. */
static void panel_items(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const linear_job *j = ctx;
    const int groups = (j->w->rows + AT_PANEL - 1) / AT_PANEL, nc = j->nc;
    const int nblocks = (j->n + nc - 1) / nc;
    for (int i = lo; i < hi; i++) {
        const int gb = i / nblocks, tb = i % nblocks;
        const int t0 = tb * nc, t1 = t0 + nc < j->n ? t0 + nc : j->n;
        for (int g = gb * j->RB; g < (gb + 1) * j->RB && g < groups; g++)
            panel_block(j->y, j->x, j->w, j->b, g, t0, t1, tb == 0 || i == lo, j->swish);
    }
}

static void unpacked_rows(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const linear_job *j = ctx;
    linear_scalar(j->y, j->x, j->w, j->b, j->n, lo, hi, j->swish);
}

/* f32 / f16: the work is split into items of (a run of panel groups, a block of input
 * rows). Batch 1 streams W once: runs of about 128 KiB per item keep each thread reading
 * long stretches (stream_block_rows). Larger batches take one group per item and split
 * the input rows into blocks of at most NC, small enough for every thread to get work. */
static void linear_panels(float *y, const float *x, const at_matrix *w, const float *b, int n, int swish) {
    const int out = w->rows;
    if (n <= 0) return;
    const double work = (double)n * out * w->cols;
    const int nt = work > SIMD_PARALLEL_GRAIN ? at_threads() : 1;
    linear_job j = {y, x, w, b, n, 1, NULL, NULL, n, swish};
    if (!w->packed) {
        at_parallel_for(out, nt, unpacked_rows, &j);
        return;
    }
    const int groups = (out + AT_PANEL - 1) / AT_PANEL;
    if (n <= MR) {
        j.RB = stream_block_rows(w, nt) / AT_PANEL;
        if (j.RB < 1) j.RB = 1;
    } else {
        int nblocks = (n + NC - 1) / NC;
        while (groups * nblocks < 4 * nt && (n + nblocks) / (nblocks + 1) >= 2 * MR) nblocks++;
        j.nc = (n + nblocks - 1) / nblocks;
        j.nc = (j.nc + MR - 1) / MR * MR;
    }
    const int items = (groups + j.RB - 1) / j.RB * ((n + j.nc - 1) / j.nc);
    at_parallel_for(items, nt, panel_items, &j);
}

static void simd_linear(float *y, const float *x, const at_matrix *w, const float *b, int n) {
    if (w->dtype == AT_I8) simd_linear_i8(y, x, w, b, n);
    else if (w->dtype == AT_BF16) at_linear_bf16_any(y, x, w, b, n);
    else linear_panels(y, x, w, b, n, 0);
}

/* f32 / f16 only (at_linear_act) */
static void simd_linear_swish(float *y, const float *x, const at_matrix *w, const float *b, int n) {
    if (w->dtype == AT_BF16) {
        at_linear_bf16_swish_any(y, x, w, b, n);
        return;
    }
    linear_panels(y, x, w, b, n, 1);
}
