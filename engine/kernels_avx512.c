/* AVX-512 kernels (F, BW, VL; VNNI for int8 when the CPU has it): 16 f32 lanes.
 * Compiled for AVX-512 whatever the build flags; isa.c only selects this set after CPUID
 * and XGETBV say the CPU and the OS support it. */
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")
#include <immintrin.h>

#include "isa.h"

typedef __m512 V;
#define VN 16
#define V_ZERO() _mm512_setzero_ps()
#define V_LOAD(p) _mm512_loadu_ps(p)
#define V_STORE(p, v) _mm512_storeu_ps((p), (v))
#define V_LOADH(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p)))
#define V_MASK(k) ((__mmask16)((1u << (k)) - 1))
#define V_LOADN(p, k) _mm512_maskz_loadu_ps(V_MASK(k), (p))
#define V_LOADHN(p, k) _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(V_MASK(k), (const void *)(p)))
#define V_STOREN(p, v, k) _mm512_mask_storeu_ps((p), V_MASK(k), (v))
#define V_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define V_SET1(a) _mm512_set1_ps(a)

/* lanes summed as halves, then quarters, ... : one fixed order */
static inline float V_HSUM(__m512 v) {
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
}

#include "kernels_simd.h"

/* ---------------------------------------------------------------------------------------
 * int8 with VNNI: vpdpbusd multiplies unsigned by signed bytes, so each quantized input
 * row is stored shifted to u8 (q + 128) and 128 * rowsum(W) is subtracted afterwards:
 * Σ (q+128)·w − 128·Σw = Σ q·w exactly. */

#define I8_TILE_W 4
#define I8_TILE_X 4

static inline __attribute__((always_inline)) void tile_i8(float *y, int ldy, const uint8_t *xu, int ldx,
                                                         const float *sx, const int8_t *w, int in,
                                                         const float *sw, const int32_t *wsum,
                                                         const float *b, const int RW, const int NX) {
    __m512i acc[I8_TILE_W][I8_TILE_X];
    UNROLL for (int r = 0; r < RW; r++) UNROLL for (int j = 0; j < NX; j++) acc[r][j] = _mm512_setzero_si512();
    int k = 0;
    for (; k + 64 <= in; k += 64) {
        __m512i xv[I8_TILE_X];
        UNROLL for (int j = 0; j < NX; j++) xv[j] = _mm512_loadu_si512((const void *)(xu + (size_t)j * ldx + k));
        UNROLL for (int r = 0; r < RW; r++) {
            const __m512i wv = _mm512_loadu_si512((const void *)(w + (size_t)r * in + k));
            UNROLL for (int j = 0; j < NX; j++) acc[r][j] = _mm512_dpbusd_epi32(acc[r][j], xv[j], wv);
        }
    }
    if (k < in) {
        const __mmask64 m = (~0ULL) >> (64 - (in - k));
        __m512i xv[I8_TILE_X];
        UNROLL for (int j = 0; j < NX; j++) xv[j] = _mm512_maskz_loadu_epi8(m, (const void *)(xu + (size_t)j * ldx + k));
        UNROLL for (int r = 0; r < RW; r++) {
            const __m512i wv = _mm512_maskz_loadu_epi8(m, (const void *)(w + (size_t)r * in + k));
            UNROLL for (int j = 0; j < NX; j++) acc[r][j] = _mm512_dpbusd_epi32(acc[r][j], xv[j], wv);
        }
    }
    UNROLL for (int j = 0; j < NX; j++) UNROLL for (int r = 0; r < RW; r++) {
        const int32_t s = _mm512_reduce_add_epi32(acc[r][j]) - 128 * wsum[r];
        y[(size_t)j * ldy + r] = AT_I8_OUT(s, sx[j], sw[r], b ? b[r] : 0.0f);
    }
}

#define I8_CASES(RW)                                                                          \
    switch (nx) {                                                                             \
    case 1: tile_i8(y, ldy, xu, in, sx, w, in, sw, ws, b, RW, 1); break;                      \
    case 2: tile_i8(y, ldy, xu, in, sx, w, in, sw, ws, b, RW, 2); break;                      \
    case 3: tile_i8(y, ldy, xu, in, sx, w, in, sw, ws, b, RW, 3); break;                      \
    default: tile_i8(y, ldy, xu, in, sx, w, in, sw, ws, b, RW, 4); break;                     \
    }

static void tile_i8_4(float *y, int ldy, const uint8_t *xu, const float *sx, const int8_t *w, int in,
                      const float *sw, const int32_t *ws, const float *b, int nx) { I8_CASES(4) }
static void tile_i8_1(float *y, int ldy, const uint8_t *xu, const float *sx, const int8_t *w, int in,
                      const float *sw, const int32_t *ws, const float *b, int nx) { I8_CASES(1) }

static void simd_linear_i8(float *y, const float *x, const at_matrix *w, const float *b, int n) {
    if (!at_cpu_has("avx512vnni") || !w->wsum) {
        at_kernels_generic.linear(y, x, w, b, n);
        return;
    }
    const int out = w->rows, in = w->cols;
    float *sx;
    int8_t *xq = at_quantize_rows(x, n, in, &sx);
    if (!xq) {
        at_kernels_generic.linear(y, x, w, b, n);
        return;
    }
    /* to u8 in place: q + 128 is q with its top bit flipped */
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    size_t tot = (size_t)n * in, i = 0;
    for (; i + 64 <= tot; i += 64)
        _mm512_storeu_si512((void *)(xq + i), _mm512_xor_si512(_mm512_loadu_si512((const void *)(xq + i)), flip));
    for (; i < tot; i++) xq[i] = (int8_t)((uint8_t)xq[i] ^ 0x80);
    const uint8_t *xu = (const uint8_t *)xq;
    const int8_t *W = (const int8_t *)w->data;
    const double work = (double)n * out * in;
    const int RB = n == 1 ? 32 : 64, nb = (out + RB - 1) / RB, XB = 64;
#pragma omp parallel for schedule(static) if (work > 4 * SIMD_PARALLEL_GRAIN && at_threads() > 1)
    for (int blk = 0; blk < nb; blk++) {
        const int o0 = blk * RB, o1 = o0 + RB < out ? o0 + RB : out;
        for (int t0 = 0; t0 < n; t0 += XB) {
            const int t1 = t0 + XB < n ? t0 + XB : n;
            int o = o0;
            for (; o + I8_TILE_W <= o1; o += I8_TILE_W)
                for (int t = t0; t < t1; t += I8_TILE_X) {
                    const int nx = t1 - t < I8_TILE_X ? t1 - t : I8_TILE_X;
                    tile_i8_4(y + (size_t)t * out + o, out, xu + (size_t)t * in, sx + t, W + (size_t)o * in, in,
                              w->scale + o, w->wsum + o, b ? b + o : NULL, nx);
                }
            for (; o < o1; o++)
                for (int t = t0; t < t1; t += I8_TILE_X) {
                    const int nx = t1 - t < I8_TILE_X ? t1 - t : I8_TILE_X;
                    tile_i8_1(y + (size_t)t * out + o, out, xu + (size_t)t * in, sx + t, W + (size_t)o * in, in,
                              w->scale + o, w->wsum + o, b ? b + o : NULL, nx);
                }
        }
    }
}

const at_kernels at_kernels_avx512 = {
    .name = "avx512",
    .linear = simd_linear,
    .dot = simd_dot,
    .axpy = simd_axpy,
    .f16_to_f32 = simd_f16_to_f32,
};
