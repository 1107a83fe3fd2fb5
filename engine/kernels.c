/* Generic kernels, ISA dispatch and the small kernels every path shares. */
#include "kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "bf16.h"
#include "gemm_i8_vnni.h"
#include "isa.h"
#include "pool.h"

/* Below this many multiply-adds a parallel region costs more than it saves. */
#define PARALLEL_GRAIN (1 << 15)

/* ---------------------------------------------------------------------------------------
 * f16 <-> f32, exact (IEEE binary16, round to nearest even) */

float at_f16_to_f32_1(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalize */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) { man <<= 1; exp--; }
            bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000 | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t at_f32_to_f16_1(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, absx = x & 0x7fffffff;
    if (absx >= 0x7f800000) return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000 ? 0x200 : 0));
    if (absx >= 0x477ff000) return (uint16_t)(sign | 0x7c00); /* rounds to infinity */
    if (absx < 0x38800000) {                                  /* subnormal or zero */
        float a;
        memcpy(&a, &absx, 4);
        return (uint16_t)(sign | (uint32_t)lrintf(a * 16777216.0f)); /* a / 2^-24 */
    }
    uint32_t r = absx + 0xfff + ((absx >> 13) & 1) - ((127 - 15) << 23);
    return (uint16_t)(sign | (r >> 13));
}

static void generic_f16_to_f32(float *dst, const uint16_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = at_f16_to_f32_1(src[i]);
}

/* ---------------------------------------------------------------------------------------
 * Generic dot, axpy and linear */

static float generic_dot(const float *a, const float *b, int n) {
    /* 8 independent partial sums in a fixed order: the same result on every call */
    float s[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += a[i + j] * b[i + j];
    for (; i < n; i++) s[i & 7] += a[i] * b[i];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

static void generic_axpy(float *y, float a, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

/* y[n,out] = x[n,in] · Wᵀ + b: W rows are split over threads; an f16 row is widened once
 * and then used for every input row. */
/* ---------------------------------------------------------------------------------------
 * int8: quantization and the generic integer linear */

float at_quantize_row(int8_t *q, const float *x, int n) {
    float amax = 0;
    int nan = 0;
    for (int i = 0; i < n; i++) {
        const float a = fabsf(x[i]);
        nan |= a != a;
        amax = a > amax ? a : amax;
    }
    if (nan) amax = NAN;
    float scale;
    if (at_quantize_degenerate(q, n, amax, &scale)) return scale;
    const float inv = 127.0f / amax;
    for (int i = 0; i < n; i++) {
        float v = nearbyintf(x[i] * inv);
        q[i] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
    }
    return amax / 127.0f;
}

typedef struct {
    const int8_t *q;
    int cols;
    int32_t *s;
} i8_sums_args;

static void i8_sums_rows(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const i8_sums_args *a = ctx;
    for (int r = lo; r < hi; r++) {
        const int8_t *row = a->q + (size_t)r * a->cols;
        int32_t sum = 0;
        /* vectorized: at load this reads every int8 weight once (a scalar loop took 0.3 s of
         * a 600 MB model's load) */
#pragma omp simd reduction(+ : sum)
        for (int c = 0; c < a->cols; c++) sum += row[c];
        a->s[r] = sum;
    }
}

int32_t *at_matrix_i8_sums(const int8_t *q, int rows, int cols) {
    int32_t *s = malloc(sizeof(int32_t) * (size_t)(rows > 0 ? rows : 1));
    if (!s) return NULL;
    const i8_sums_args a = {q, cols, s};
    at_parallel_for(rows, (size_t)rows * cols >= ((size_t)1 << 20) ? at_threads() : 1, i8_sums_rows, &a);
    return s;
}

static int in_panels(const at_matrix *m) { return m->packed && m->dtype != AT_I8 && m->dtype != AT_BF16; }

int at_pack_layout(int dtype) { return dtype == AT_I8 && at_isa_vnni_panels() ? AT_PACKED_VNNI : AT_PACKED; }

size_t at_matrix_elems(const at_matrix *m) {
    if (!m->packed) return (size_t)m->rows * m->cols;
    if (m->packed == AT_PACKED_BF16) return at_matrix_bf16_bytes(m) / 2;
    if (m->packed == AT_PACKED_VNNI)
        return ((size_t)m->rows + AT_VNNI_BLOCK - 1) / AT_VNNI_BLOCK * AT_VNNI_BLOCK * at_vnni_steps(m->cols) * 4;
    if (in_panels(m)) return ((size_t)m->rows + AT_PANEL - 1) / AT_PANEL * AT_PANEL * m->cols;
    const size_t groups = ((size_t)m->rows + AT_PACK_ROWS - 1) / AT_PACK_ROWS;
    return groups * AT_PACK_ROWS * at_pack_chunks(m) * (size_t)at_pack_chunk(m->dtype);
}

/* Runs of a row that lie contiguously in m->data: a chunk for row-major and int8 layouts,
 * one element in panels, 4 in VNNI panels. */
static int row_run(const at_matrix *m) {
    return in_panels(m) || m->packed == AT_PACKED_BF16 ? 1 : m->packed == AT_PACKED_VNNI ? 4 : at_pack_chunk(m->dtype);
}

void at_matrix_raw_row(void *dst, const at_matrix *m, int r) {
    const size_t es = (size_t)at_dtype_size(m->dtype);
    const char *src = m->data;
    const int ce = row_run(m);
    for (int c = 0; c < m->cols; c += ce) {
        const int len = m->cols - c < ce ? m->cols - c : ce;
        memcpy((char *)dst + (size_t)c * es, src + at_matrix_index(m, r, c) * es, es * (size_t)len);
    }
}

size_t at_matrix_packed_bytes(const at_matrix *m) {
    at_matrix p = *m;
    p.packed = at_pack_layout(m->dtype);
    return at_matrix_elems(&p) * (size_t)at_dtype_size(m->dtype);
}

typedef struct {
    const at_matrix *m, *p; /* the matrix as it is, and packed into dst */
    char *dst;
    size_t es, group_bytes;
    int ce, group_rows;
} pack_args;

/* Copy row groups [lo, hi) of a->m into their packed places. Panels are a transpose: it goes
 * in tiles of AT_PANEL columns, whose AT_PANEL x AT_PANEL elements stay in L1. */
static void pack_groups(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const pack_args *a = ctx;
    const at_matrix *m = a->m;
    const char *src = m->data;
    const size_t es = a->es;
    for (int g = lo; g < hi; g++) {
        if (a->p->packed == AT_PACKED_VNNI) { /* a block of VNNI panels, padding included */
            at_vnni_pack_rows(a->dst + (size_t)g * a->group_bytes, m, g * a->group_rows);
            continue;
        }
        memset(a->dst + (size_t)g * a->group_bytes, 0, a->group_bytes); /* the padding */
        const int r0 = g * a->group_rows, r1 = r0 + a->group_rows < m->rows ? r0 + a->group_rows : m->rows;
        if (in_panels(a->p)) {
            char *panel = a->dst + (size_t)g * a->group_bytes;
            for (int c0 = 0; c0 < m->cols; c0 += AT_PANEL) {
                const int c1 = c0 + AT_PANEL < m->cols ? c0 + AT_PANEL : m->cols;
                for (int r = r0; r < r1; r++) { /* typed copies: a memcpy call per element was slow */
                    const char *row = src + at_matrix_index(m, r, 0) * es;
                    if (es == 4)
                        for (int c = c0; c < c1; c++)
                            ((float *)panel)[(size_t)c * AT_PANEL + (r - r0)] = ((const float *)row)[c];
                    else
                        for (int c = c0; c < c1; c++)
                            ((uint16_t *)panel)[(size_t)c * AT_PANEL + (r - r0)] = ((const uint16_t *)row)[c];
                }
            }
            continue;
        }
        for (int r = r0; r < r1; r++)
            for (int c = 0; c < m->cols; c += a->ce) {
                const int len = m->cols - c < a->ce ? m->cols - c : a->ce;
                memcpy(a->dst + at_matrix_index(a->p, r, c) * es, src + at_matrix_index(m, r, c) * es, es * (size_t)len);
            }
    }
}

void at_matrix_pack_into(at_matrix *m, void *buf) {
    at_matrix p = *m;
    p.packed = at_pack_layout(m->dtype);
    p.data = buf;
    const size_t es = (size_t)at_dtype_size(m->dtype), bytes = at_matrix_packed_bytes(m);
    const int group_rows = in_panels(&p) ? AT_PANEL : p.packed == AT_PACKED_VNNI ? AT_VNNI_BLOCK : AT_PACK_ROWS;
    const int groups = (m->rows + group_rows - 1) / group_rows, ce = at_pack_chunk(m->dtype);
    /* groups fill disjoint ranges: threads share the copy of a large matrix */
    pack_args a = {m, &p, buf, es, bytes / (size_t)groups, ce, group_rows};
    at_parallel_for(groups, bytes >= ((size_t)1 << 20) ? at_threads() : 1, pack_groups, &a);
    *m = p;
}

void *at_matrix_pack(at_matrix *m) {
    void *buf = at_alloc_weights(at_matrix_packed_bytes(m));
    if (buf) at_matrix_pack_into(m, buf);
    return buf;
}

void *at_alloc_weights(size_t bytes) {
    const size_t huge = (size_t)2 << 20;
    if (bytes == 0) bytes = 1;
    if (bytes < huge) /* aligned_alloc wants a multiple of the alignment */
        return aligned_alloc(AT_PACK_BYTES, (bytes + AT_PACK_BYTES - 1) / AT_PACK_BYTES * AT_PACK_BYTES);
    const size_t n = (bytes + huge - 1) / huge * huge;
    void *p = aligned_alloc(huge, n);
#ifdef MADV_HUGEPAGE
    if (p) madvise(p, n, MADV_HUGEPAGE); /* before the first touch; advice only, may be ignored */
#endif
    return p;
}

void at_matrix_row(float *dst, const at_matrix *m, int r) {
    if (m->dtype == AT_BF16) {
        at_bf16_row(dst, m, r);
        return;
    }
    if (in_panels(m)) { /* column c of row r lies every AT_PANEL elements (embedding lookups) */
        const size_t at = (size_t)(r / AT_PANEL) * m->cols * AT_PANEL + (size_t)(r % AT_PANEL);
        if (m->dtype == AT_F32)
            for (int c = 0; c < m->cols; c++) dst[c] = ((const float *)m->data)[at + (size_t)c * AT_PANEL];
        else
            for (int c = 0; c < m->cols; c++) dst[c] = at_f16_to_f32_1(((const uint16_t *)m->data)[at + (size_t)c * AT_PANEL]);
        return;
    }
    const int ce = row_run(m);
    const size_t es = (size_t)at_dtype_size(m->dtype);
    for (int c = 0; c < m->cols; c += ce) {
        const int len = m->cols - c < ce ? m->cols - c : ce;
        const char *src = (const char *)m->data + at_matrix_index(m, r, c) * es;
        if (m->dtype == AT_F32) {
            memcpy(dst + c, src, es * (size_t)len);
        } else if (m->dtype == AT_F16) {
            uint16_t h[AT_PACK_BYTES / 2];
            memcpy(h, src, es * (size_t)len);
            for (int i = 0; i < len; i++) dst[c + i] = at_f16_to_f32_1(h[i]);
        } else {
            const int8_t *q = (const int8_t *)src;
            for (int i = 0; i < len; i++) dst[c + i] = (float)q[i] * m->scale[r];
        }
    }
}

static int8_t *i8_scratch(size_t n) { return at_scratch(AT_SCRATCH_QUANT, n); }

/* Rows [lo, hi) of at_quantize_rows_with. */
typedef struct {
    const float *x;
    int8_t *q;
    float *scales;
    int in;
    float (*row)(int8_t *, const float *, int);
} quantize_job;

static void quantize_rows_job(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const quantize_job *j = ctx;
    for (int t = lo; t < hi; t++) j->scales[t] = j->row(j->q + (size_t)t * j->in, j->x + (size_t)t * j->in, j->in);
}

/* Quantize x[n,in] row by row into the calling thread's scratch: n*in int8 followed by n
 * float scales. NULL if out of memory. */
int8_t *at_quantize_rows_with(const float *x, int n, int in, float **scales,
                              float (*row)(int8_t *, const float *, int)) {
    const size_t qb = ((size_t)n * in + 63) & ~(size_t)63;
    int8_t *q = i8_scratch(qb + sizeof(float) * (size_t)n);
    if (!q) return NULL;
    *scales = (float *)(q + qb);
    /* rows are independent: several are split over the threads (the same bytes) */
    const quantize_job j = {x, q, *scales, in, row};
    at_parallel_for(n, (double)n * in > PARALLEL_GRAIN / 2 ? at_threads() : 1, quantize_rows_job, &j);
    return q;
}

int8_t *at_quantize_rows(const float *x, int n, int in, float **scales) {
    return at_quantize_rows_with(x, n, in, scales, at_quantize_row);
}

/* One generic linear: y[n,out] = x[n,in] · Wᵀ + b, split over W's rows. */
typedef struct {
    float *y;
    const float *x;
    const at_matrix *w;
    const float *b;
    int n;
    const int8_t *xq; /* int8: x quantized, with its row scales sx */
    const float *sx;
} linear_args;

/* Rows [lo, hi) of an int8 linear. */
static void linear_i8_rows(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const linear_args *a = ctx;
    const at_matrix *w = a->w;
    const int out = w->rows, in = w->cols, n = a->n;
    const int8_t *W = w->data, *xq = a->xq;
    int8_t *buf = w->packed ? malloc((size_t)in) : NULL; /* a packed row, gathered */
    for (int o = lo; o < hi; o++) {
        const int8_t *wr = W + at_matrix_index(w, o, 0);
        if (buf) {
            at_matrix_raw_row(buf, w, o);
            wr = buf;
        }
        for (int t = 0; t < n; t++) {
            const int8_t *xr = xq + (size_t)t * in;
            int32_t acc = 0;
            if (w->packed && !buf) /* no memory for one row: element by element (exact either way) */
                for (int k = 0; k < in; k++) acc += (int32_t)xr[k] * W[at_matrix_index(w, o, k)];
            else
                for (int k = 0; k < in; k++) acc += (int32_t)xr[k] * wr[k];
            a->y[(size_t)t * out + o] = AT_I8_OUT(acc, a->sx[t], w->scale[o], a->b ? a->b[o] : 0.0f);
        }
    }
    free(buf);
}

/* y[n,out] = (xq · Wqᵀ) * sx * sw + b in exact integer arithmetic. */
static void generic_linear_i8(float *y, const float *x, const at_matrix *w, const float *b, int n) {
    const int out = w->rows, in = w->cols;
    float *sx;
    const int8_t *xq = at_quantize_rows(x, n, in, &sx);
    if (!xq) { /* out of memory for a few KiB: fall back to dequantized rows, slowly */
        float *row = malloc(sizeof(float) * (size_t)in);
        for (int o = 0; o < out && row; o++) {
            at_matrix_row(row, w, o);
            for (int t = 0; t < n; t++)
                y[(size_t)t * out + o] = generic_dot(x + (size_t)t * in, row, in) + (b ? b[o] : 0.0f);
        }
        free(row);
        return;
    }
    const double work = (double)n * out * in;
    linear_args a = {y, x, w, b, n, xq, sx};
    at_parallel_for(out, work > PARALLEL_GRAIN ? at_threads() : 1, linear_i8_rows, &a);
}

/* Element (o, k) of an f32 or f16 matrix as a float. */
static float matrix_elem(const at_matrix *w, int o, int k) {
    const size_t i = at_matrix_index(w, o, k);
    return w->dtype == AT_F16 ? at_f16_to_f32_1(((const uint16_t *)w->data)[i]) : ((const float *)w->data)[i];
}

/* generic_dot(a, row o of w) in generic_dot's exact order, reading w element by element:
 * the fallback when there is no memory for a row buffer. */
static float generic_dot_elems(const float *a, const at_matrix *w, int o, int n) {
    float s[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) s[j] += a[i + j] * matrix_elem(w, o, i + j);
    for (; i < n; i++) s[i & 7] += a[i] * matrix_elem(w, o, i);
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

/* Rows [lo, hi) of an f32 or f16 linear. */
static void linear_rows(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const linear_args *a = ctx;
    const at_matrix *w = a->w;
    const int out = w->rows, in = w->cols, n = a->n;
    const float *x = a->x;
    /* row-major f32 rows are used where they lie; f16 or packed rows are gathered first */
    const int direct = w->dtype == AT_F32 && !w->packed;
    float *buf = direct ? NULL : malloc(sizeof(float) * (size_t)in);
    for (int o = lo; o < hi; o++) {
        const float bias = a->b ? a->b[o] : 0.0f;
        float *y = a->y;
        if (!direct && !buf) {
            for (int t = 0; t < n; t++) y[(size_t)t * out + o] = generic_dot_elems(x + (size_t)t * in, w, o, in) + bias;
            continue;
        }
        const float *row = (const float *)w->data + (size_t)o * in;
        if (!direct) {
            at_matrix_row(buf, w, o);
            row = buf;
        }
        for (int t = 0; t < n; t++) y[(size_t)t * out + o] = generic_dot(x + (size_t)t * in, row, in) + bias;
    }
    free(buf);
}

static void generic_linear(float *y, const float *x, const at_matrix *w, const float *b, int n) {
    if (w->dtype == AT_BF16) {
        at_linear_bf16_ref(y, x, w, b, n);
        return;
    }
    if (w->dtype == AT_I8) {
        generic_linear_i8(y, x, w, b, n);
        return;
    }
    const double work = (double)n * w->rows * w->cols;
    linear_args a = {y, x, w, b, n, NULL, NULL};
    at_parallel_for(w->rows, work > PARALLEL_GRAIN ? at_threads() : 1, linear_rows, &a);
}

static void generic_swish(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = x[i] / (1.0f + expf(-x[i]));
}

static void generic_gelu(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

static float generic_sum_exp(const float *x, int n, float shift) {
    float sum = 0;
    for (int i = 0; i < n; i++) sum += expf(x[i] - shift);
    return sum;
}

static void generic_add_scalar(float *dst, const float *x, float a, int n) {
    for (int i = 0; i < n; i++) dst[i] = x[i] + a;
}

static int generic_first_above(const float *x, int n, float add, float thr) {
    for (int i = 0; i < n; i++)
        if (x[i] + add > thr) return i;
    return n;
}

static int generic_argmax(const float *x, int n) {
    if (n < 64 || x[0] != x[0]) return at_argmax_loop(x, n);
    /* the largest value over 8 independent lanes (NaN never wins, as in the loop), then the
     * first index holding it: the loop's answer, several times faster */
    float m[8];
    for (int j = 0; j < 8; j++) m[j] = x[0];
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) m[j] = x[i + j] > m[j] ? x[i + j] : m[j];
    for (; i < n; i++) m[0] = x[i] > m[0] ? x[i] : m[0];
    float mx = m[0];
    for (int j = 1; j < 8; j++) mx = m[j] > mx ? m[j] : mx;
    for (i = 0; i < n; i++)
        if (x[i] == mx) return i;
    return 0;
}

static void generic_dot4(float *r, const float *a, const float *b, int n) {
    for (int i = 0; i < 4; i++) r[i] = generic_dot(a + (size_t)i * n, b + (size_t)i * n, n);
}

static void generic_attention_heads(const at_attention_args *a, int h0, int h1) {
    at_attention_heads_with(a, h0, h1, generic_dot, generic_dot4, generic_axpy, at_softmax);
}

const at_kernels at_kernels_generic = {
    .name = "generic",
    .linear = generic_linear,
    .dot = generic_dot,
    .axpy = generic_axpy,
    .swish = generic_swish,
    .gelu = generic_gelu,
    .sum_exp = generic_sum_exp,
    .argmax = generic_argmax,
    .add_scalar = generic_add_scalar,
    .first_above = generic_first_above,
    .attention_heads = generic_attention_heads,
    .softmax = at_softmax,
    .f16_to_f32 = generic_f16_to_f32,
};

/* ---------------------------------------------------------------------------------------
 * Dispatch */

/* Set by every attend_load (to the same value unless $ATTEND_ISA changed in between), read
 * by every kernel call: atomic, as loads and translations may run on several threads. */
static const at_kernels *active = &at_kernels_generic;

int at_kernels_init(char *err, size_t errlen) {
    const char *want = getenv("ATTEND_ISA");
    const at_kernels *k = want && *want ? at_isa_by_name(want) : at_isa_best();
    if (!k) {
        snprintf(err, errlen, "ATTEND_ISA=%s: unknown or not supported by this CPU (%s)", want,
                 at_isa_list());
        return -1;
    }
    __atomic_store_n(&active, k, __ATOMIC_RELEASE);
    return 0;
}

const at_kernels *at_k(void) { return __atomic_load_n(&active, __ATOMIC_ACQUIRE); }

/* ---------------------------------------------------------------------------------------
 * Shared small kernels */

/* An element-wise loop GCC's -O2 leaves scalar, vectorized on request (clang vectorizes such
 * loops itself, and warns when a sanitizer build at -O1 cannot honour the request). */
#ifdef __clang__
#define ELEMENTWISE_SIMD
#else
#define ELEMENTWISE_SIMD _Pragma("omp simd")
#endif

/* Rows whose mean and variance sums run side by side in at_add_layernorm. */
#define NORM_ROWS 8
/* Elements from which at_add_layernorm splits its groups over threads: its sums in double,
 * a row after another, cost several times a multiply-add per element, and serial at greedy
 * batch 32 (32 rows of 320) they were 3% of the samples on the calling thread while the
 * other one waited. */
#define NORM_GRAIN (1 << 13)

/* x[k*d ..] for k < NORM_ROWS (or `rows` < NORM_ROWS): LayerNorm(x + r) * g + b. Each row's
 * sums are the same sequential double sums as a row alone would get; running NORM_ROWS rows'
 * sums side by side only overlaps their additions, whose latency (4 cycles each, one after
 * another in a single row) made this a tenth of int8 batch-64 decoding. */
static void layernorm_rows(float *x, const float *r, const float *g, const float *b, int rows, int d, float eps) {
    /* element-wise passes: vectorized explicitly (-O2 leaves them scalar); each value gets
     * the same single operations either way */
    if (r) {
        const size_t len = (size_t)rows * d;
        ELEMENTWISE_SIMD
        for (size_t i = 0; i < len; i++) x[i] += r[i];
    }
    double mean[NORM_ROWS] = {0}, var[NORM_ROWS] = {0};
    if (rows == NORM_ROWS) {
        for (int i = 0; i < d; i++)
            _Pragma("GCC unroll 8") for (int k = 0; k < NORM_ROWS; k++) mean[k] += x[(size_t)k * d + i];
    } else {
        for (int k = 0; k < rows; k++)
            for (int i = 0; i < d; i++) mean[k] += x[(size_t)k * d + i];
    }
    for (int k = 0; k < rows; k++) mean[k] /= d;
    if (rows == NORM_ROWS) {
        for (int i = 0; i < d; i++)
            _Pragma("GCC unroll 8") for (int k = 0; k < NORM_ROWS; k++) {
                const float v = x[(size_t)k * d + i];
                var[k] += (v - mean[k]) * (v - mean[k]);
            }
    } else {
        for (int k = 0; k < rows; k++)
            for (int i = 0; i < d; i++) {
                const float v = x[(size_t)k * d + i];
                var[k] += (v - mean[k]) * (v - mean[k]);
            }
    }
    for (int k = 0; k < rows; k++) {
        float *row = x + (size_t)k * d;
        var[k] /= d;
        const float m = (float)mean[k], inv = (float)(1.0 / sqrt(var[k] + eps));
        ELEMENTWISE_SIMD
        for (int i = 0; i < d; i++) row[i] = (row[i] - m) * inv * g[i] + b[i];
    }
}

typedef struct {
    float *x;
    const float *r, *g, *b;
    int n, d;
    float eps;
} layernorm_args;

/* Groups [lo, hi) of NORM_ROWS rows of at_add_layernorm. */
static void layernorm_groups(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const layernorm_args *a = ctx;
    for (int q = lo; q < hi; q++) {
        const int t0 = q * NORM_ROWS, rows = a->n - t0 < NORM_ROWS ? a->n - t0 : NORM_ROWS;
        layernorm_rows(a->x + (size_t)t0 * a->d, a->r ? a->r + (size_t)t0 * a->d : NULL, a->g, a->b, rows, a->d,
                       a->eps);
    }
}

void at_add_layernorm(float *x, const float *r, const float *g, const float *b, int n, int d,
                      float eps) {
    /* groups of rows are independent: threads split them, each row computed the same way */
    const layernorm_args a = {x, r, g, b, n, d, eps};
    const int groups = (n + NORM_ROWS - 1) / NORM_ROWS;
    at_parallel_for(groups, (double)n * d >= NORM_GRAIN ? at_threads() : 1, layernorm_groups, &a);
}

/* 4096: an FFN's 32 rows of 1280 (greedy, batch 32) in 10 chunks; with 16384 they were 3,
 * two of them on one thread */
enum { ACTIVATE_CHUNK = 4096 };

typedef struct {
    float *x;
    size_t n;
    at_activation act;
} activate_args;

/* Chunks [lo, hi) of ACTIVATE_CHUNK elements of at_activate. */
static void activate_chunks(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const activate_args *a = ctx;
    for (int i = lo; i < hi; i++) {
        const size_t from = (size_t)i * ACTIVATE_CHUNK;
        at_activate(a->x + from, a->n - from < ACTIVATE_CHUNK ? a->n - from : ACTIVATE_CHUNK, a->act);
    }
}

void at_rmsnorm(float *x, const float *g, int n, int d, float eps) {
    for (int r = 0; r < n; r++) {
        float *row = x + (size_t)r * d, ss = 0.0f;
        for (int j = 0; j < d; j++) ss += row[j] * row[j];
        const float inv = 1.0f / sqrtf(ss / (float)d + eps);
        for (int j = 0; j < d; j++) row[j] = g[j] * (row[j] * inv);
    }
}

void at_activate(float *x, size_t n, at_activation act) {
    /* element-wise: large arrays are split over threads in chunks, results unchanged */
    const size_t chunk = ACTIVATE_CHUNK;
    if (n > 2 * chunk && at_threads() > 1) {
        activate_args a = {x, n, act};
        at_parallel_for((int)((n + chunk - 1) / chunk), at_threads(), activate_chunks, &a);
        return;
    }
    switch (act) {
    case AT_ACT_SWISH:
        at_k()->swish(x, n);
        break;
    case AT_ACT_RELU:
        for (size_t i = 0; i < n; i++) x[i] = x[i] > 0 ? x[i] : 0;
        break;
    case AT_ACT_GELU:
        generic_gelu(x, n);
        break;
    case AT_ACT_GELU_VEC:
        at_k()->gelu(x, n);
        break;
    case AT_ACT_GELU_TANH:
        for (size_t i = 0; i < n; i++) {
            const float v = x[i];
            x[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
        }
        break;
    }
}

void at_linear_act(float *y, const float *x, const at_matrix *w, const float *b, int n, at_activation act) {
    if (act == AT_ACT_SWISH && w->dtype != AT_I8 && at_k()->linear_swish) {
        at_k()->linear_swish(y, x, w, b, n);
        return;
    }
    at_k()->linear(y, x, w, b, n);
    at_activate(y, (size_t)n * w->rows, act);
}

void at_softmax(float *x, int n) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    if (mx == -INFINITY) { /* nothing visible: all zero rather than NaN */
        memset(x, 0, sizeof(float) * (size_t)n);
        return;
    }
    double sum = 0;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++) x[i] *= inv;
}

int at_argmax(const float *x, int n) { return at_k()->argmax(x, n); }

typedef struct {
    const at_kernels *K;
    const at_attention_args *a;
} attention_job;

/* Heads [lo, hi) of at_attention. */
static void attention_heads(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const attention_job *j = ctx;
    j->K->attention_heads(j->a, lo, hi);
}

void at_attention(float *out, int ld_o, const float *q, int ld_q, const float *k,
                  const float *v, int ld_kv, int t_n, int s_n, int heads, int hd, int causal,
                  int q_pos0, float *probs, float *scratch) {
    at_attention_bias(out, ld_o, q, ld_q, k, v, ld_kv, t_n, s_n, heads, hd, causal, q_pos0, probs, scratch, NULL,
                      0, 0);
}

void at_attention_bias(float *out, int ld_o, const float *q, int ld_q, const float *k,
                       const float *v, int ld_kv, int t_n, int s_n, int heads, int hd, int causal,
                       int q_pos0, float *probs, float *scratch, const float *bias,
                       ptrdiff_t bias_h, ptrdiff_t bias_t) {
    const at_attention_args a = {out,  q,   k,     v,      probs, scratch, ld_o, ld_q, ld_kv, t_n, s_n, hd, causal,
                                 q_pos0, bias, bias_h, bias_t, hd};
    at_attention_run(&a, heads);
}

void at_attention_run(const at_attention_args *a, int heads) {
    if (a->t_n >= AT_ATTENTION_GEMM_MIN && a->s_n >= AT_ATTENTION_GEMM_MIN && !at_attention_gemm(a, heads)) return;
    const double work = (double)heads * a->t_n * a->s_n * a->hd * 2;
    /* Heads in parallel when there is enough work; inside the model's own parallel loop over
     * sentences at_parallel_for runs them serially (nested loops never fork). */
    attention_job j = {at_k(), a};
    at_parallel_for(heads, work > PARALLEL_GRAIN ? at_threads() : 1, attention_heads, &j);
}
