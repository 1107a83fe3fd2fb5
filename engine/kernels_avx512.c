/* AVX-512 kernels (F, BW, VL; VNNI for int8 when the CPU has it): 16 f32 lanes.
 * Compiled for AVX-512 whatever the build flags; isa.c only selects this set after CPUID
 * and XGETBV say the CPU and the OS support it. */
#ifndef __clang__ /* clang gets -m flags from the Makefile (make fuzz) */
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")
#endif
#include <immintrin.h>
#include <math.h>

#include "gemm_i8_amx.h"
#include "gemm_i8_vnni.h"
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

#define V_ADD(a, b) _mm512_add_ps((a), (b))
#define V_MUL(a, b) _mm512_mul_ps((a), (b))
#define V_DIV(a, b) _mm512_div_ps((a), (b))
#define V_NEG(a) _mm512_sub_ps(_mm512_setzero_ps(), (a))
#define V_MIN(a, b) _mm512_min_ps((a), (b))
#define V_MAX(a, b) _mm512_max_ps((a), (b))
#define V_ROUND(a) _mm512_roundscale_ps((a), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
/* p * 2^n for integral n, by adding n to p's exponent bits: the result must be a normal float */
#define V_LDEXP(p, n) _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(p), \
                                          _mm512_slli_epi32(_mm512_cvtps_epi32(n), 23)))
#define V_GT(a, b) _mm512_cmp_ps_mask((a), (b), _CMP_GT_OQ)
#define V_MASK_T __mmask16 /* what V_GT gives */
#define V_ANY(m) ((m) != 0)
#define V_LT(a, b) _mm512_cmp_ps_mask((a), (b), _CMP_LT_OQ)
#define V_SELECT(m, a, b) _mm512_mask_blend_ps((m), (b), (a)) /* m ? a : b */

/* V_HSUM of four vectors at once, the same additions in the same order: halves, quarters,
 * then (q0 + q2) + (q1 + q3) inside each quarter. A third of the shuffles of four V_HSUMs. */
static inline __m128 V_HSUM4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
    /* [a.q0 + a.q2, a.q1 + a.q3] for a0, a1 and for a2, a3: each row's 8-lane half sum */
    const __m512 h01 = _mm512_add_ps(_mm512_shuffle_f32x4(a0, a1, 0x44), _mm512_shuffle_f32x4(a0, a1, 0xee));
    const __m512 h23 = _mm512_add_ps(_mm512_shuffle_f32x4(a2, a3, 0x44), _mm512_shuffle_f32x4(a2, a3, 0xee));
    /* quarter r = row r's low half + high half */
    const __m512 q = _mm512_add_ps(_mm512_shuffle_f32x4(h01, h23, 0x88), _mm512_shuffle_f32x4(h01, h23, 0xdd));
    const __m512 t = _mm512_add_ps(q, _mm512_permute_ps(q, 0x4e)); /* lane 0: q0 + q2, lane 1: q1 + q3 */
    const __m512 u = _mm512_add_ps(t, _mm512_permute_ps(t, 0xb1)); /* lane 0: (q0 + q2) + (q1 + q3) */
    return _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), u));
}

#include "kernels_simd.h"

extern const at_kernels at_kernels_avx2; /* int8 without VNNI */

/* ---------------------------------------------------------------------------------------
 * int8 with VNNI: vpdpbusd multiplies unsigned by signed bytes, so each quantized input
 * row is stored shifted to u8 (q + 128) and 128 * rowsum(W) is subtracted afterwards:
 * Σ (q+128)·w − 128·Σw = Σ q·w exactly. */

/* at_quantize_row, vectorized: the same max, the same 127/max, the same multiply and
 * round-to-nearest-even conversion, so the same bytes; with FLIP each byte stored with its
 * top bit flipped (q + 128 as u8, vpdpbusd's operand). Flipping in a second pass over the
 * row read each 64 bytes back from four 16-byte stores still in flight: a store-forwarding
 * stall per load, two thirds of the quantization's time. */
static inline __attribute__((always_inline)) float quantize_row_as(int8_t *q, const float *x, int n, const int FLIP) {
    __m512 mx = _mm512_setzero_ps();
    __mmask16 nan = 0;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        mx = _mm512_max_ps(_mm512_abs_ps(v), mx);
    }
    if (i < n) {
        const __m512 v = _mm512_maskz_loadu_ps(V_MASK(n - i), x + i);
        nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        mx = _mm512_max_ps(_mm512_abs_ps(v), mx);
    }
    const float amax = nan ? NAN : _mm512_reduce_max_ps(mx);
    float scale;
    if (at_quantize_degenerate(q, n, amax, &scale)) {
        if (FLIP) memset(q, 0x80, (size_t)n);
        return scale;
    }
    const float inv = 127.0f / amax;
    const __m512 iv = _mm512_set1_ps(inv);
    const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
    const __m128i flip = _mm_set1_epi8(FLIP ? (char)0x80 : 0);
    for (i = 0; i + 16 <= n; i += 16) {
        __m512i r = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + i), iv));
        r = _mm512_min_epi32(_mm512_max_epi32(r, lo), hi);
        _mm_storeu_si128((__m128i *)(void *)(q + i), _mm_xor_si128(_mm512_cvtepi32_epi8(r), flip));
    }
    for (; i < n; i++) {
        float v = nearbyintf(x[i] * inv);
        q[i] = (int8_t)((uint8_t)(int8_t)(v > 127 ? 127 : v < -127 ? -127 : v) ^ (FLIP ? 0x80 : 0));
    }
    return amax / 127.0f;
}

/* 4 rows' int32 accumulators -> their 4 totals (integer sums: any order is exact). */
static inline __m128i reduce4(__m512i a0, __m512i a1, __m512i a2, __m512i a3) {
#define HALF(a) _mm256_add_epi32(_mm512_castsi512_si256(a), _mm512_extracti64x4_epi64(a, 1))
    const __m256i b01 = _mm256_hadd_epi32(HALF(a0), HALF(a1)), b23 = _mm256_hadd_epi32(HALF(a2), HALF(a3));
#undef HALF
    const __m256i c = _mm256_hadd_epi32(b01, b23);
    return _mm_add_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
}

#define I8_TILE_W 4
#define I8_TILE_X 4
/* The GEMM transposes W once per call, and the dot products it replaces cost one lane
 * reduction per output and W row, whatever the row length: it wins from about 12 input rows
 * on for 256 columns, 32 for 1024 (one thread, Xeon with AVX-512 VNNI, tools in BENCHMARKS.md). */
static int i8_gemm_pays(int n, int in) { return n >= 12 && (size_t)n * 32 >= (size_t)in; }
/* From this many input rows AMX beats the VNNI GEMM (a tile multiply costs the same for 1 row
 * as for 16) */
#define AMX_MIN_ROWS 8

static inline __attribute__((always_inline)) void tile_i8(float *y, int ldy, const uint8_t *xu, int ldx,
                                                         const float *sx, const int8_t *w, int in,
                                                         const float *sw, const int32_t *wsum,
                                                         const float *b, const int RW, const int NX,
                                                         const int PK) {
    /* one step is one 64-byte chunk: packed (PK), row r's chunk k/64 is at r * 64 + k * 4 */
    const size_t rs = PK ? AT_PACK_BYTES : (size_t)in, ks = PK ? AT_PACK_ROWS : 1;
    __m512i acc[I8_TILE_W][I8_TILE_X];
    UNROLL for (int r = 0; r < RW; r++) UNROLL for (int j = 0; j < NX; j++) acc[r][j] = _mm512_setzero_si512();
    int k = 0;
    for (; k + 64 <= in; k += 64) {
        const size_t ko = (size_t)k * ks;
        __m512i xv[I8_TILE_X];
        UNROLL for (int j = 0; j < NX; j++) xv[j] = _mm512_loadu_si512((const void *)(xu + (size_t)j * ldx + k));
        UNROLL for (int r = 0; r < RW; r++) {
            const __m512i wv = _mm512_loadu_si512((const void *)(w + r * rs + ko));
            UNROLL for (int j = 0; j < NX; j++) acc[r][j] = _mm512_dpbusd_epi32(acc[r][j], xv[j], wv);
        }
    }
    if (k < in) {
        const __mmask64 m = (~0ULL) >> (64 - (in - k));
        const size_t ko = (size_t)k * ks;
        __m512i xv[I8_TILE_X];
        UNROLL for (int j = 0; j < NX; j++) xv[j] = _mm512_maskz_loadu_epi8(m, (const void *)(xu + (size_t)j * ldx + k));
        UNROLL for (int r = 0; r < RW; r++) {
            const __m512i wv = _mm512_maskz_loadu_epi8(m, (const void *)(w + r * rs + ko));
            UNROLL for (int j = 0; j < NX; j++) acc[r][j] = _mm512_dpbusd_epi32(acc[r][j], xv[j], wv);
        }
    }
    if (RW == 4) { /* AT_I8_OUT for 4 rows at once: the same operations, vectorized */
        const __m128i comp = _mm_mullo_epi32(_mm_loadu_si128((const __m128i *)(const void *)wsum), _mm_set1_epi32(128));
        const __m128 swv = _mm_loadu_ps(sw), bv = b ? _mm_loadu_ps(b) : _mm_setzero_ps();
        UNROLL for (int j = 0; j < NX; j++) {
            const __m128i s = _mm_sub_epi32(reduce4(acc[0][j], acc[1][j], acc[2][j], acc[3][j]), comp);
            const __m128 v = _mm_add_ps(_mm_mul_ps(_mm_cvtepi32_ps(s), _mm_mul_ps(_mm_set1_ps(sx[j]), swv)), bv);
            _mm_storeu_ps(y + (size_t)j * ldy, v);
        }
    } else {
        UNROLL for (int j = 0; j < NX; j++) UNROLL for (int r = 0; r < RW; r++) {
            const int32_t s = _mm512_reduce_add_epi32(acc[r][j]) - 128 * wsum[r];
            y[(size_t)j * ldy + r] = AT_I8_OUT(s, sx[j], sw[r], b ? b[r] : 0.0f);
        }
    }
}

#define I8_CASES(RW, PK)                                                                      \
    switch (nx) {                                                                             \
    case 1: tile_i8(y, ldy, xu, in, sx, w, in, sw, ws, b, RW, 1, PK); break;                  \
    case 2: tile_i8(y, ldy, xu, in, sx, w, in, sw, ws, b, RW, 2, PK); break;                  \
    case 3: tile_i8(y, ldy, xu, in, sx, w, in, sw, ws, b, RW, 3, PK); break;                  \
    default: tile_i8(y, ldy, xu, in, sx, w, in, sw, ws, b, RW, 4, PK); break;                 \
    }

/* Instances for 4 rows or 1, row-major or packed (the strides become constants). */
static void tile_i8_4(float *y, int ldy, const uint8_t *xu, const float *sx, const int8_t *w, int packed, int in,
                      const float *sw, const int32_t *ws, const float *b, int nx) {
    if (packed) I8_CASES(4, 1) else I8_CASES(4, 0)
}
static void tile_i8_1(float *y, int ldy, const uint8_t *xu, const float *sx, const int8_t *w, int packed, int in,
                      const float *sw, const int32_t *ws, const float *b, int nx) {
    if (packed) I8_CASES(1, 1) else I8_CASES(1, 0)
}

/* Rows [lo, hi) of quantize_rows_u8's job. */
typedef struct {
    const float *x;
    int8_t *q;
    float *scales;
    int n, in, ld;
} quantize_job;

static void quantize_u8_rows(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const quantize_job *j = ctx;
    const int in = j->in, ld = j->ld;
    for (int t = lo; t < hi; t++) {
        int8_t *r = j->q + (size_t)t * ld;
        if (t >= j->n) {
            memset(r, 0, (size_t)ld);
            continue;
        }
        j->scales[t] = quantize_row_as(r, j->x + (size_t)t * in, in, 1);
        memset(r + in, 0, (size_t)(ld - in));
    }
}

/* The rows of x quantized (quantize_row_as) and stored as u8, q + 128 (q with its top bit
 * flipped: vpdpbusd's and tdpbusd's unsigned operand), ld bytes apart, each flipped while it is
 * still in L1; the columns past in and the rows from n to rows zero (AMX's whole tiles; W is
 * zero there too). The scales follow the rows (gemm_i8_vnni.c reads within this buffer). In
 * the calling thread's scratch; NULL without memory. Several rows are split over the threads
 * (row by row, the same bytes): serial, it held the other threads waiting before every int8
 * layer (a batch-32 encoder's 640 rows x 2048 columns: a sixth of it at 2 threads). */
static int8_t *quantize_rows_u8(const float *x, int n, int in, int ld, int rows, float **scales) {
    const size_t qb = ((size_t)rows * ld + 63) & ~(size_t)63;
    int8_t *q = at_scratch(AT_SCRATCH_QUANT, qb + sizeof(float) * (size_t)n);
    if (!q) return NULL;
    *scales = (float *)(void *)(q + qb);
    const quantize_job j = {x, q, *scales, n, in, ld};
    at_parallel_for(rows, (double)n * in > SIMD_PARALLEL_GRAIN / 4 ? at_threads() : 1, quantize_u8_rows, &j);
    return q;
}

static void simd_linear_i8(float *y, const float *x, const at_matrix *w, const float *b, int n) {
    if (!at_cpu_has("avx512vnni") || !w->wsum) { /* Skylake-SP class: AVX2's vpmaddubsw path */
        at_kernels_avx2.linear(y, x, w, b, n);
        return;
    }
    const int out = w->rows, in = w->cols;
    /* AMX tiles for several rows of VNNI panels (gemm_i8_amx.c) read the rows padded */
    const int amx = w->packed == AT_PACKED_VNNI && n >= AMX_MIN_ROWS && at_cpu_has("amx");
    const int ld = amx ? AT_AMX_STRIDE(in) : in;
    float *sx;
    int8_t *xq = quantize_rows_u8(x, n, in, ld, amx ? AT_AMX_ROWS(n) : n, &sx);
    if (!xq) {
        at_kernels_generic.linear(y, x, w, b, n);
        return;
    }
    if (amx) {
        at_gemm_i8_amx(y, (const uint8_t *)xq, ld, sx, w, b, n);
        return;
    }
    /* VNNI panels, or several rows: 16 outputs a vector, no lane reductions (gemm_i8_vnni.c) */
    if ((w->packed == AT_PACKED_VNNI || i8_gemm_pays(n, in)) && at_gemm_i8_vnni(y, (const uint8_t *)xq, sx, w, b, n) == 0)
        return;
    const double work = (double)n * out * in;
    const int RB = n == 1 ? stream_block_rows(w, at_threads()) : 64, nb = (out + RB - 1) / RB;
    const linear_job j = {y, x, w, b, n, RB, xq, sx, 0, 0};
    at_parallel_for(nb, work > SIMD_PARALLEL_GRAIN ? at_threads() : 1, i8_blocks, &j);
}

/* Blocks [lo, hi) of j->RB rows of W against every input row (xq already flipped to u8). */
static void i8_blocks(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const linear_job *j = ctx;
    const at_matrix *w = j->w;
    const int out = w->rows, in = w->cols, n = j->n, RB = j->RB, XB = 64;
    const uint8_t *xu = (const uint8_t *)j->xq;
    const int8_t *W = (const int8_t *)w->data;
    const float *sx = j->sx, *b = j->b;
    float *y = j->y;
    for (int blk = lo; blk < hi; blk++) {
        const int o0 = blk * RB, o1 = o0 + RB < out ? o0 + RB : out;
        for (int t0 = 0; t0 < n; t0 += XB) {
            const int t1 = t0 + XB < n ? t0 + XB : n;
            int o = o0;
            for (; o + I8_TILE_W <= o1; o += I8_TILE_W)
                for (int t = t0; t < t1; t += I8_TILE_X) {
                    const int nx = t1 - t < I8_TILE_X ? t1 - t : I8_TILE_X;
                    tile_i8_4(y + (size_t)t * out + o, out, xu + (size_t)t * in, sx + t, W + at_matrix_index(w, o, 0), w->packed, in,
                              w->scale + o, w->wsum + o, b ? b + o : NULL, nx);
                }
            for (; o < o1; o++)
                for (int t = t0; t < t1; t += I8_TILE_X) {
                    const int nx = t1 - t < I8_TILE_X ? t1 - t : I8_TILE_X;
                    tile_i8_1(y + (size_t)t * out + o, out, xu + (size_t)t * in, sx + t, W + at_matrix_index(w, o, 0), w->packed, in,
                              w->scale + o, w->wsum + o, b ? b + o : NULL, nx);
                }
        }
    }
}

const at_kernels at_kernels_avx512 = {
    .name = "avx512",
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
