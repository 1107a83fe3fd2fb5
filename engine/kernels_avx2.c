/* AVX2 + FMA + F16C kernels: 8 f32 lanes. Compiled for AVX2 whatever the build flags;
 * isa.c only selects this set after CPUID and XGETBV say the CPU and the OS support it. */
#ifndef __clang__ /* clang gets -m flags from the Makefile (make fuzz) */
#pragma GCC target("avx2,fma,f16c")
#endif
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "isa.h"

typedef __m256 V;
#define VN 8
#define V_ZERO() _mm256_setzero_ps()
#define V_LOAD(p) _mm256_loadu_ps(p)
#define V_STORE(p, v) _mm256_storeu_ps((p), (v))
#define V_LOADH(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(p)))
#define V_FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define V_SET1(a) _mm256_set1_ps(a)

/* the first k lanes set (k in 0..8) */
static inline __m256i lane_mask(int k) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#define V_LOADN(p, k) _mm256_maskload_ps((p), lane_mask(k))
#define V_STOREN(p, v, k) _mm256_maskstore_ps((p), lane_mask(k), (v))
static inline __m256 V_LOADHN(const uint16_t *p, int k) {
    uint16_t tmp[8] = {0};
    memcpy(tmp, p, sizeof(uint16_t) * (size_t)k);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)tmp));
}

/* lanes summed as halves, then quarters, ... : one fixed order */
static inline float V_HSUM(__m256 v) {
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}

#define V_ADD(a, b) _mm256_add_ps((a), (b))
#define V_MUL(a, b) _mm256_mul_ps((a), (b))
#define V_DIV(a, b) _mm256_div_ps((a), (b))
#define V_NEG(a) _mm256_sub_ps(_mm256_setzero_ps(), (a))
#define V_MIN(a, b) _mm256_min_ps((a), (b))
#define V_MAX(a, b) _mm256_max_ps((a), (b))
#define V_ROUND(a) _mm256_round_ps((a), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
/* p * 2^n for integral n, by adding n to p's exponent bits: the result must be a normal float */
#define V_LDEXP(p, n) _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), \
                                          _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23)))
#define V_GT(a, b) _mm256_cmp_ps((a), (b), _CMP_GT_OQ)
#define V_MASK_T __m256 /* what V_GT gives */
#define V_ANY(m) (_mm256_movemask_ps(m) != 0)
#define V_LT(a, b) _mm256_cmp_ps((a), (b), _CMP_LT_OQ)
#define V_SELECT(m, a, b) _mm256_blendv_ps((b), (a), (m)) /* m ? a : b */

/* V_HSUM of four vectors at once, the same additions in the same order: halves, then
 * (q0 + q2) + (q1 + q3). */
static inline __m128 V_HSUM4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    const __m256 q01 = _mm256_add_ps(_mm256_permute2f128_ps(a0, a1, 0x20), _mm256_permute2f128_ps(a0, a1, 0x31));
    const __m256 q23 = _mm256_add_ps(_mm256_permute2f128_ps(a2, a3, 0x20), _mm256_permute2f128_ps(a2, a3, 0x31));
    const __m256 t01 = _mm256_add_ps(q01, _mm256_permute_ps(q01, 0x4e)), t23 = _mm256_add_ps(q23, _mm256_permute_ps(q23, 0x4e));
    const __m256 u01 = _mm256_add_ps(t01, _mm256_permute_ps(t01, 0xb1)), u23 = _mm256_add_ps(t23, _mm256_permute_ps(t23, 0xb1));
    /* lanes 0 and 4 of each: rows 0, 1 and rows 2, 3 */
    const __m256 v = _mm256_shuffle_ps(u01, u23, 0x00); /* [r0, r0, r2, r2 | r1, r1, r3, r3] */
    return _mm_blend_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1), 0xa);
}

#include "kernels_simd.h"

/* ---------------------------------------------------------------------------------------
 * int8: vpmaddubsw multiplies unsigned by signed bytes, so each product is formed as
 * |x| · (w with x's sign); |x|, |w| ≤ 127 keep the 16-bit pair sums below saturation, and
 * vpmaddwd widens them to 32 bits. Exact, like every int8 path. */

/* at_quantize_row, vectorized: the same max, the same 127/max, the same multiply and
 * round-to-nearest-even conversion, so the same bytes. */
static float quantize_row(int8_t *q, const float *x, int n) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 mx = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        mx = _mm256_max_ps(_mm256_and_ps(v, absmask), mx);
    }
    float amax;
    {
        float t[8];
        _mm256_storeu_ps(t, mx);
        amax = 0;
        for (int k = 0; k < 8; k++) amax = t[k] > amax ? t[k] : amax;
        int tail_nan = 0;
        for (int k = i; k < n; k++) {
            const float a = fabsf(x[k]);
            tail_nan |= a != a;
            amax = a > amax ? a : amax;
        }
        if (_mm256_movemask_ps(nan) || tail_nan) amax = NAN;
    }
    float scale;
    if (at_quantize_degenerate(q, n, amax, &scale)) return scale;
    const float inv = 127.0f / amax;
    const __m256 iv = _mm256_set1_ps(inv);
    const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
    for (i = 0; i + 16 <= n; i += 16) {
        __m256i r0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i), iv));
        __m256i r1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8), iv));
        r0 = _mm256_min_epi32(_mm256_max_epi32(r0, lo), hi);
        r1 = _mm256_min_epi32(_mm256_max_epi32(r1, lo), hi);
        const __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi32(r0, r1), 0xd8);
        _mm_storeu_si128((__m128i *)(void *)(q + i),
                         _mm_packs_epi16(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1)));
    }
    for (; i < n; i++) {
        float v = nearbyintf(x[i] * inv);
        q[i] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
    }
    return amax / 127.0f;
}

#define I8_TILE_W 4
#define I8_TILE_X 3

static inline __m256i dot_step(__m256i acc, __m256i xabs, __m256i xs, __m256i w) {
    const __m256i p16 = _mm256_maddubs_epi16(xabs, _mm256_sign_epi8(w, xs));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

static inline int32_t hsum_i32(__m256i v) {
    __m128i q = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    q = _mm_add_epi32(q, _mm_shuffle_epi32(q, 0x4e));
    q = _mm_add_epi32(q, _mm_shuffle_epi32(q, 0xb1));
    return _mm_cvtsi128_si32(q);
}

static inline __m256i load_tail(const int8_t *p, int k) {
    int8_t tmp[32] = {0};
    memcpy(tmp, p, (size_t)k);
    return _mm256_loadu_si256((const __m256i *)(const void *)tmp);
}

static inline __attribute__((always_inline)) void tile_i8(float *y, int ldy, const int8_t *xq, const float *sx,
                                                         const int8_t *w, wstride ws, int in, const float *sw,
                                                         const float *b, const int RW, const int NX) {
    __m256i acc[I8_TILE_W][I8_TILE_X];
    UNROLL for (int r = 0; r < RW; r++) UNROLL for (int j = 0; j < NX; j++) acc[r][j] = _mm256_setzero_si256();
    int k = 0;
    for (; k + 32 <= in; k += 32) {
        const size_t ko = w_off(ws, k);
        __m256i xs[I8_TILE_X], xa[I8_TILE_X];
        UNROLL for (int j = 0; j < NX; j++) {
            xs[j] = _mm256_loadu_si256((const __m256i *)(const void *)(xq + (size_t)j * in + k));
            xa[j] = _mm256_abs_epi8(xs[j]);
        }
        UNROLL for (int r = 0; r < RW; r++) {
            const __m256i wv = _mm256_loadu_si256((const __m256i *)(const void *)(w + r * ws.rs + ko));
            UNROLL for (int j = 0; j < NX; j++) acc[r][j] = dot_step(acc[r][j], xa[j], xs[j], wv);
        }
    }
    if (k < in) {
        const size_t ko = w_off(ws, k);
        __m256i xs[I8_TILE_X], xa[I8_TILE_X];
        UNROLL for (int j = 0; j < NX; j++) {
            xs[j] = load_tail(xq + (size_t)j * in + k, in - k);
            xa[j] = _mm256_abs_epi8(xs[j]);
        }
        UNROLL for (int r = 0; r < RW; r++) {
            const __m256i wv = load_tail(w + r * ws.rs + ko, in - k);
            UNROLL for (int j = 0; j < NX; j++) acc[r][j] = dot_step(acc[r][j], xa[j], xs[j], wv);
        }
    }
    if (RW == 4) { /* AT_I8_OUT for 4 rows at once: the same operations, vectorized */
        const __m128 swv = _mm_loadu_ps(sw), bv = b ? _mm_loadu_ps(b) : _mm_setzero_ps();
        UNROLL for (int j = 0; j < NX; j++) {
            const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(acc[0][j], acc[1][j]),
                                                _mm256_hadd_epi32(acc[2][j], acc[3][j]));
            const __m128i s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
            _mm_storeu_ps(y + (size_t)j * ldy,
                          _mm_add_ps(_mm_mul_ps(_mm_cvtepi32_ps(s), _mm_mul_ps(_mm_set1_ps(sx[j]), swv)), bv));
        }
    } else {
        UNROLL for (int j = 0; j < NX; j++) UNROLL for (int r = 0; r < RW; r++)
            y[(size_t)j * ldy + r] = AT_I8_OUT(hsum_i32(acc[r][j]), sx[j], sw[r], b ? b[r] : 0.0f);
    }
}

#define I8_CASES(RW)                                                                          \
    switch (nx) {                                                                             \
    case 1: tile_i8(y, ldy, xq, sx, w, ws, in, sw, b, RW, 1); break;                          \
    case 2: tile_i8(y, ldy, xq, sx, w, ws, in, sw, b, RW, 2); break;                          \
    default: tile_i8(y, ldy, xq, sx, w, ws, in, sw, b, RW, 3); break;                         \
    }

static void tile_i8_4(float *y, int ldy, const int8_t *xq, const float *sx, const int8_t *w, wstride ws, int in,
                      const float *sw, const float *b, int nx) { I8_CASES(4) }
static void tile_i8_1(float *y, int ldy, const int8_t *xq, const float *sx, const int8_t *w, wstride ws, int in,
                      const float *sw, const float *b, int nx) { I8_CASES(1) }

static void simd_linear_i8(float *y, const float *x, const at_matrix *w, const float *b, int n) {
    const int out = w->rows, in = w->cols;
    float *sx;
    /* VNNI panels (a model packed under the avx512 set): the generic rows read any layout */
    const int8_t *xq = w->packed == AT_PACKED_VNNI ? NULL : at_quantize_rows_with(x, n, in, &sx, quantize_row);
    if (!xq) {
        at_kernels_generic.linear(y, x, w, b, n);
        return;
    }
    const double work = (double)n * out * in;
    const int RB = n == 1 ? stream_block_rows(w, at_threads()) : 64, nb = (out + RB - 1) / RB;
    const linear_job j = {y, x, w, b, n, RB, xq, sx, 0, 0};
    at_parallel_for(nb, work > SIMD_PARALLEL_GRAIN ? at_threads() : 1, i8_blocks, &j);
}

/* Blocks [lo, hi) of j->RB rows of W against every input row. */
static void i8_blocks(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const linear_job *j = ctx;
    const at_matrix *w = j->w;
    const int out = w->rows, in = w->cols, n = j->n, RB = j->RB, XB = 48;
    const int8_t *xq = j->xq, *W = (const int8_t *)w->data;
    const float *sx = j->sx, *b = j->b;
    float *y = j->y;
    const wstride ws = matrix_stride(w);
    for (int blk = lo; blk < hi; blk++) {
        const int o0 = blk * RB, o1 = o0 + RB < out ? o0 + RB : out;
        for (int t0 = 0; t0 < n; t0 += XB) {
            const int t1 = t0 + XB < n ? t0 + XB : n;
            int o = o0;
            for (; o + I8_TILE_W <= o1; o += I8_TILE_W)
                for (int t = t0; t < t1; t += I8_TILE_X) {
                    const int nx = t1 - t < I8_TILE_X ? t1 - t : I8_TILE_X;
                    tile_i8_4(y + (size_t)t * out + o, out, xq + (size_t)t * in, sx + t, W + at_matrix_index(w, o, 0), ws, in,
                              w->scale + o, b ? b + o : NULL, nx);
                }
            for (; o < o1; o++)
                for (int t = t0; t < t1; t += I8_TILE_X) {
                    const int nx = t1 - t < I8_TILE_X ? t1 - t : I8_TILE_X;
                    tile_i8_1(y + (size_t)t * out + o, out, xq + (size_t)t * in, sx + t, W + at_matrix_index(w, o, 0), ws, in,
                              w->scale + o, b ? b + o : NULL, nx);
                }
        }
    }
}

const at_kernels at_kernels_avx2 = {
    .name = "avx2",
    .linear = simd_linear,
    .linear_swish = simd_linear_swish,
    .dot = simd_dot,
    .axpy = simd_axpy,
    .swish = simd_swish,
    .gelu = simd_gelu,
    .sum_exp = simd_sum_exp,
    .argmax = simd_argmax,
    .add_scalar = simd_add_scalar,
    .first_above = simd_first_above,
    .attention_heads = simd_attention_heads,
    .softmax = simd_softmax,
    .f16_to_f32 = simd_f16_to_f32,
};
