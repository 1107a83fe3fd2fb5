/* engine: the numeric kernels of attend, on plain pointers with explicit sizes.
 *
 * Matrices are row-major. A linear layer computes y[n,out] = x[n,in] · Wᵀ + b with W stored
 * [out,in] (PyTorch's layout) in f32, f16 or int8. Every kernel gives each output element the
 * same summation order whatever n is, so results never depend on how sentences are batched.
 *
 * The kernel set is chosen once from CPUID (at_kernels_init); ATTEND_ISA=generic|avx2|avx512
 * forces one, so tests can run every path on one machine. Kernels are thread-safe; the big
 * ones split their outer loop over the calling thread's pool (pool.h) when the work is large
 * enough. */
#ifndef ATTEND_KERNELS_H
#define ATTEND_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "pool.h"

enum at_dtype { AT_F32 = 0, AT_F16 = 1, AT_I8 = 2, AT_BF16 = 3 /* bf16 compute only (bf16.h) */ };

/* An AT_I8 matrix holds row r as int8 q[r, :] with w[r, c] ≈ q[r, c] * scale[r]; wsum[r] is
 * the sum of q[r, :] (the VNNI kernels need it; at_matrix_i8_sums computes it). A linear
 * layer on it quantizes each input row on the fly (at_quantize_row) and multiplies in
 * integers, which are exact: an int8 linear layer gives bit-identical results on every ISA
 * (the f32 parts around it, such as attention, still round differently per ISA). */
typedef struct {
    const void *data; /* rows x cols elements of dtype, laid out as `packed` says */
    int dtype;        /* enum at_dtype */
    int rows, cols;
    const float *scale;   /* AT_I8: [rows] per-row scales */
    const int32_t *wsum;  /* AT_I8: [rows] row sums of the int8 values */
    int packed;           /* enum at_layout: row-major (as in the file) or a packed layout below */
} at_matrix;

/* The packed layouts (at_matrix_pack).
 *
 * int8: rows go in groups of AT_PACK_ROWS; a group stores its rows' 64-byte chunks
 * interleaved: chunk 0 of rows 0..3, chunk 1 of rows 0..3, ... A kernel computing 4 rows at
 * once then reads memory strictly in order. Row-major, it reads 4 short streams (a
 * 512-column int8 row is 8 cache lines), which the hardware prefetchers barely follow:
 * batch-1 int8 ran at 7.4 GB/s against 18.8 GB/s packed, one thread (Zen 4). Columns are
 * zero-padded to whole chunks, rows to whole groups.
 *
 * f32 and f16: panels. Rows go in groups of AT_PANEL; a group stores column 0 of its
 * AT_PANEL rows side by side, then column 1, ... (rows zero-padded to whole groups). A
 * linear layer then runs as outer products (a column of W times inputs broadcast), each
 * output one chain of fused multiply-adds over the columns in order, at every batch size;
 * batch 1 still reads W as one stream.
 *
 * int8 on CPUs with AVX-512 VNNI: VNNI panels instead of chunks. Rows go in panels of
 * AT_I8_PANEL; a panel stores 4 columns of its 16 rows at a time (64 bytes: row 0's columns
 * 0..3, row 1's 0..3, ...), then the next 4 columns. That is the operand vpdpbusd multiplies
 * by 4 broadcast input bytes, and the B tile of AMX's tdpbusd, so the GEMMs read W as it
 * lies (they transposed it per call before: a sixth of the int8 batch-64 time). Columns are
 * zero-padded to multiples of 64, rows to multiples of 64 (a GEMM block). */
enum at_layout { AT_ROW_MAJOR = 0, AT_PACKED = 1, AT_PACKED_VNNI = 2, AT_PACKED_BF16 = 3 /* bf16.h */ };
#define AT_PACK_ROWS 4
#define AT_PACK_BYTES 64
#define AT_PANEL 64
#define AT_I8_PANEL 16
#define AT_VNNI_BLOCK 64 /* VNNI panels: rows per GEMM block, and the row padding */
static inline int at_dtype_size(int dtype) { return dtype == AT_F32 ? 4 : dtype == AT_F16 || dtype == AT_BF16 ? 2 : 1; }
/* int8: elements per chunk (a power of two) and chunks per row. */
static inline int at_pack_chunk(int dtype) { return AT_PACK_BYTES / at_dtype_size(dtype); }
static inline size_t at_pack_chunks(const at_matrix *m) {
    const int ce = at_pack_chunk(m->dtype);
    return ((size_t)m->cols + ce - 1) / ce;
}
/* AT_PACKED_VNNI: 4-byte column groups per panel (the padded columns / 4). */
static inline size_t at_vnni_steps(int cols) { return ((size_t)cols + 63) / 64 * 16; }
/* Index of element (r, c) in m->data, in elements, for any layout. */
static inline size_t at_matrix_index(const at_matrix *m, int r, int c) {
    if (!m->packed) return (size_t)r * m->cols + c;
    if (m->packed == AT_PACKED_BF16) /* bf16.h: 16-row panels of column pairs */
        return (((size_t)(r / 16) * (((size_t)m->cols + 1) / 2) + c / 2) * 16 + r % 16) * 2 + c % 2;
    if (m->packed == AT_PACKED_VNNI)
        return (((size_t)(r / AT_I8_PANEL) * at_vnni_steps(m->cols) + c / 4) * AT_I8_PANEL + r % AT_I8_PANEL) * 4 + c % 4;
    if (m->dtype != AT_I8) return ((size_t)(r / AT_PANEL) * m->cols + c) * AT_PANEL + r % AT_PANEL;
    const size_t ce = (size_t)at_pack_chunk(m->dtype);
    return (((size_t)(r / AT_PACK_ROWS) * at_pack_chunks(m) + c / ce) * AT_PACK_ROWS + r % AT_PACK_ROWS) * ce + c % ce;
}
/* Elements a matrix occupies in its layout. */
size_t at_matrix_elems(const at_matrix *m);
/* Bytes the packed copy of a matrix takes: a multiple of AT_PACK_BYTES. */
size_t at_matrix_packed_bytes(const at_matrix *m);
/* A GEMM's prefetch of the next block of W (`lines` cache lines) spread over the `tiles`
 * passes of the current block, each `steps` long: a line every 2^shift steps, the smallest
 * spacing (up to 8) that still covers the block. */
static inline int at_prefetch_shift(size_t tiles, size_t steps, size_t lines) {
    int shift = 0;
    while (shift < 3 && tiles * (steps >> (shift + 1)) >= lines) shift++;
    return shift;
}
/* The layout at_matrix_pack gives a matrix of this dtype under the active kernel set. */
int at_pack_layout(int dtype);
/* Repack a row-major matrix into buf (at_matrix_packed_bytes(m) bytes, 64-byte aligned)
 * and point m at it. */
void at_matrix_pack_into(at_matrix *m, void *buf);
/* The same into a new buffer from at_alloc_weights (the caller frees it after use); NULL
 * if out of memory. */
void *at_matrix_pack(at_matrix *m);
/* Memory for weights: 64-byte aligned, and for large blocks 2 MiB aligned and marked for
 * transparent huge pages. Streaming weights through 4 KiB pages costs a TLB miss every
 * 4 KiB, which under a hypervisor's nested paging held batch-1 int8 reads at 21 GB/s, one
 * thread; on huge pages the same loop read 34 GB/s (Zen 4 VM). Freed with free(). */
void *at_alloc_weights(size_t bytes);
/* Per-thread working memory (engine/scratch.c): the calling thread's buffer `slot` of at
 * least `bytes`, 64-byte aligned, its contents lost whenever it grows; NULL if out of
 * memory. A thread keeps its buffers across calls and frees them when it exits. */
enum { AT_SCRATCH_QUANT, AT_SCRATCH_WIDEN, AT_SCRATCH_PANELS, AT_SCRATCH_BF16, AT_SCRATCH_SLOTS };
void *at_scratch(int slot, size_t bytes);
/* at_alloc_weights for large per-call buffers (a batch's encoder workspace and output,
 * attention caches, logits), and its free: a thread keeps the last few blocks it freed and
 * hands back the smallest one of a request's size to twice it, so a run of batches does not
 * fault in and zero fresh pages every time (4-5% of a batch-64 run, 14% of a batch-32
 * encoder). A request that fits none frees the kept blocks smaller than itself; a block no
 * request took for 16 requests is freed, and all when the thread exits. bytes: what was
 * asked for. */
void *at_block_alloc(size_t bytes);
void at_block_free(void *p, size_t bytes);
/* Row r's raw elements (dtype unchanged) into dst, cols elements. */
void at_matrix_raw_row(void *dst, const at_matrix *m, int r);

/* AT_ACT_GELU_TANH: GELU's tanh approximation (HF's gelu_new, T5's gated FFN).
 * AT_ACT_GELU_VEC: GELU (erf) through the kernel set's vector erfc (at_kernels.gelu), as
 * close to the true GELU as AT_ACT_GELU (within 9e-8), whose libm erff one value at a time
 * took a sixth of a speech encoder; text models keep AT_ACT_GELU, so their outputs stay
 * bit-identical to what they were. */
typedef enum { AT_ACT_SWISH = 0, AT_ACT_RELU, AT_ACT_GELU, AT_ACT_GELU_TANH, AT_ACT_GELU_VEC } at_activation;

/* The arguments of at_attention, for the kernel sets' per-head entry point. */
typedef struct {
    float *out;
    const float *q, *k, *v;
    float *probs, *scratch;
    int ld_o, ld_q, ld_kv, t_n, s_n, hd, causal, q_pos0;
    /* added to the scores before the softmax when not NULL: query row t, key s of head h
     * adds bias[h * bias_h + t * bias_t + s] (T5's relative position bias; bias_t may be
     * negative, a table indexed by s - t) */
    const float *bias;
    ptrdiff_t bias_h, bias_t;
} at_attention_args;

/* ISA-specific entry points; fields may be NULL-free generic fallbacks. */
typedef struct {
    const char *name;
    /* y[n,out] = x[n,in] · Wᵀ (+ b if b). */
    void (*linear)(float *y, const float *x, const at_matrix *w, const float *b, int n);
    /* the same followed by swish, for f32 / f16 W; NULL where the set has none (at_linear_act) */
    void (*linear_swish)(float *y, const float *x, const at_matrix *w, const float *b, int n);
    /* dot product of two f32 vectors */
    float (*dot)(const float *a, const float *b, int n);
    /* y[i] += a * x[i] */
    void (*axpy)(float *y, float a, const float *x, int n);
    /* f16 -> f32 */
    void (*f16_to_f32)(float *dst, const uint16_t *src, size_t n);
    /* x[i] = x[i] / (1 + exp(-x[i])) in place; each value's result depends on that value
     * only, never on its position */
    void (*swish)(float *x, size_t n);
    /* x[i] = x[i] Φ(x[i]) (GELU, erf form) in place, each value's result depending on that
     * value only; the generic set's is AT_ACT_GELU's libm loop */
    void (*gelu)(float *x, size_t n);
    /* sum of e^(x[i] - shift) in float (e^-inf = 0): the denominator of a log-softmax */
    float (*sum_exp)(const float *x, int n, float shift);
    /* at_argmax_loop's index, whatever the set */
    int (*argmax)(const float *x, int n);
    /* dst[i] = x[i] + a (dst may be x) */
    void (*add_scalar)(float *dst, const float *x, float a, int n);
    /* the first i with x[i] + add > thr (float sum, ordered compare: NaN never is), else n */
    int (*first_above)(const float *x, int n, float add, float thr);
    /* heads [h0, h1) of at_attention (all their query rows) */
    void (*attention_heads)(const at_attention_args *a, int h0, int h1);
    /* at_softmax with the set's own vector exp (long attention rows: libm's expf, one value
     * at a time, was a tenth of a speech encoder); -inf gives 0, a row of -inf all zeros */
    void (*softmax)(float *x, int n);
} at_kernels;

/* Key rows the prefetches run ahead of the dot products. */
#define AT_KV_AHEAD 2
/* Ask for the cache lines of x[0, n) (a hint: no fault, no result). */
static inline void at_prefetch_span(const float *x, size_t n) {
    const char *end = (const char *)(x + n);
    for (const char *c = (const char *)((uintptr_t)x & ~(uintptr_t)63); c < end; c += 64) __builtin_prefetch(c);
}

/* Scores of query row t against key rows [0, visible) for heads [h0, h1), into each head's
 * scratch row. The first query row asks for its keys a few rows ahead and for the values read
 * next: a decoder row's keys and values are rarely in cache, and the hardware prefetchers
 * start late on such short runs. */
static inline __attribute__((always_inline)) void at_attention_scores_with(
    const at_attention_args *a, int t, int visible, int h0, int h1,
    float (*dot)(const float *, const float *, int), void (*dot4)(float *, const float *, const float *, int)) {
    const int hd = a->hd, s_n = a->s_n;
    const float *qt = a->q + (size_t)t * a->ld_q;
    for (int s = 0; s < visible; s++) {
        const float *ks = a->k + (size_t)s * a->ld_kv, *ka = s + AT_KV_AHEAD < visible && t == 0 ? ks + (size_t)AT_KV_AHEAD * a->ld_kv : NULL;
        const float *vs = t == 0 ? a->v + (size_t)s * a->ld_kv : NULL;
        int h = h0;
        for (; h <= h1 - 4; h += 4) { /* requests spread between the dot products, not in bursts */
            if (ka) at_prefetch_span(ka + (size_t)h * hd, (size_t)4 * hd);
            if (vs) at_prefetch_span(vs + (size_t)h * hd, (size_t)4 * hd);
            float r[4];
            dot4(r, qt + (size_t)h * hd, ks + (size_t)h * hd, hd);
            for (int i = 0; i < 4; i++) a->scratch[(size_t)(h + i) * s_n + s] = r[i];
        }
        for (; h < h1; h++) {
            if (ka) at_prefetch_span(ka + (size_t)h * hd, (size_t)hd);
            if (vs) at_prefetch_span(vs + (size_t)h * hd, (size_t)hd);
            a->scratch[(size_t)h * s_n + s] = dot(qt + (size_t)h * hd, ks + (size_t)h * hd, hd);
        }
    }
}

/* Heads [h0, h1) of at_attention over a kernel set's dot products and axpy. Inlined into each
 * set's attention_heads with its own (static) kernels, so those calls are direct and inlined:
 * through the table's pointers, call overhead was a large share of dot products of 64.
 * dot4(r, a, b, n) gives r[i] = dot(a + i n, b + i n, n) for i < 4, each bit-identical to dot.
 *
 * Each query row visits key and value rows once for all its heads, in memory order (a head at
 * a time read a decoder row's keys as short runs a row apart, which waited on memory). Every
 * score is the same dot product and every output the same chain of axpys over positions in
 * order as one head at a time, so the results are those of any split of the heads. */
static inline __attribute__((always_inline)) void at_attention_heads_with(
    const at_attention_args *a, int h0, int h1, float (*dot)(const float *, const float *, int),
    void (*dot4)(float *, const float *, const float *, int),
    void (*axpy)(float *, float, const float *, int), void (*softmax)(float *, int)) {
    const int hd = a->hd, s_n = a->s_n;
    for (int s = 0; s < AT_KV_AHEAD && s < s_n; s++)
        at_prefetch_span(a->k + (size_t)s * a->ld_kv + (size_t)h0 * hd, (size_t)(h1 - h0) * hd);
    for (int t = 0; t < a->t_n; t++) {
        const int visible = a->causal ? (a->q_pos0 + t + 1 < s_n ? a->q_pos0 + t + 1 : s_n) : s_n;
        at_attention_scores_with(a, t, visible, h0, h1, dot, dot4);
        for (int h = h0; a->bias && h < h1; h++) {
            const float *br = a->bias + h * a->bias_h + t * a->bias_t;
            float *sc = a->scratch + (size_t)h * s_n;
            for (int s = 0; s < visible; s++) sc[s] += br[s];
        }
        for (int h = h0; h < h1; h++) softmax(a->scratch + (size_t)h * s_n, visible);
        float *o = a->out + (size_t)t * a->ld_o;
        for (size_t j = (size_t)h0 * hd; j < (size_t)h1 * hd; j++) o[j] = 0;
        for (int s = 0; s < visible; s++) {
            const float *vs = a->v + (size_t)s * a->ld_kv;
            for (int h = h0; h < h1; h++)
                axpy(o + (size_t)h * hd, a->scratch[(size_t)h * s_n + s], vs + (size_t)h * hd, hd);
        }
        for (int h = h0; a->probs && h < h1; h++) {
            const float *sc = a->scratch + (size_t)h * s_n;
            float *p = a->probs + ((size_t)h * a->t_n + t) * s_n;
            for (int s = 0; s < s_n; s++) p[s] = s < visible ? sc[s] : 0.0f;
        }
    }
}

/* Pick the kernels for this CPU (or $ATTEND_ISA). Returns 0, or -1 with a message if
 * $ATTEND_ISA names an ISA this CPU lacks or that is unknown. Safe to call more than once. */
int at_kernels_init(char *err, size_t errlen);
const at_kernels *at_k(void);

/* Generic implementations, also used as the naive reference by tests. */
extern const at_kernels at_kernels_generic;

/* x[n,d] = LayerNorm(x + r) * g + b, row by row (r may be NULL). */
void at_add_layernorm(float *x, const float *r, const float *g, const float *b, int n, int d,
                      float eps);
/* x[n,d] = x / sqrt(mean(x²) + eps) * g, row by row (T5's LayerNorm: no mean, no bias;
 * the mean of squares summed in float, as torch does for a float32 row). */
void at_rmsnorm(float *x, const float *g, int n, int d, float eps);
/* In-place activation over n values. */
void at_activate(float *x, size_t n, at_activation act);
/* y = act(x · Wᵀ + b): at_k()->linear then at_activate, with swish applied to each output
 * tile while it is in registers where the kernel set can (f32 / f16 panels): the same
 * numbers, without another pass over y */
void at_linear_act(float *y, const float *x, const at_matrix *w, const float *b, int n, at_activation act);
/* In-place softmax over n values; -INFINITY entries get probability 0. */
void at_softmax(float *x, int n);
/* Index of the largest value (the first one on ties, like torch.argmax); NaN never wins, but
 * a NaN at x[0] gives 0. at_argmax_loop is the rule; at_argmax (the kernel set's argmax)
 * returns the same index, faster. */
static inline int at_argmax_loop(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}
int at_argmax(const float *x, int n);
float at_f16_to_f32_1(uint16_t h);
/* x[n] -> q[n] in [-127, 127] with x ≈ q * scale: scale = max|x| / 127, q = x * (127 / max|x|)
 * rounded to nearest even. Returns the scale: 0 for a row that is zero or so small that
 * 127 / max|x| would overflow (q all zero), NaN for a row holding NaN or infinity. */
float at_quantize_row(int8_t *q, const float *x, int n);
/* Below this max|x| a row quantizes to zeros: 127 / max|x| stays finite for every max|x| ≥ it
 * (a subnormal max once gave inv = inf and 0 * inf = NaN, cast to int8: undefined). */
#define AT_QUANT_MIN_MAX 1e-30f
/* The shared edge cases of every ISA's row quantizer: 1 if the row is settled (q zeroed,
 * *scale set), 0 if it must be quantized with inv = 127 / amax. */
static inline int at_quantize_degenerate(int8_t *q, int n, float amax, float *scale) {
    if (amax >= AT_QUANT_MIN_MAX && __builtin_isfinite(amax)) return 0;
    for (int i = 0; i < n; i++) q[i] = 0;
    *scale = amax < AT_QUANT_MIN_MAX ? 0.0f : __builtin_nanf("");
    return 1;
}
/* Quantize x[n,in] row by row into the calling thread's scratch (reused by the next call):
 * returns n*in int8 values (64-byte padded), *scales gets the n row scales. NULL if OOM. */
int8_t *at_quantize_rows(const float *x, int n, int in, float **scales);
/* The same with an ISA's row quantizer, which must give at_quantize_row's exact results. */
int8_t *at_quantize_rows_with(const float *x, int n, int in, float **scales,
                              float (*row)(int8_t *, const float *, int));
/* One int8 output element from its exact integer dot product: the same expression on every ISA. */
#define AT_I8_OUT(acc, sx, sw, bias) ((float)(acc) * ((sx) * (sw)) + (bias))
/* Row sums of an int8 matrix, for at_matrix.wsum: malloc'd [rows], NULL if out of memory. */
int32_t *at_matrix_i8_sums(const int8_t *q, int rows, int cols);
/* Row r of any matrix as f32 (int8 rows dequantized), in either layout. */
void at_matrix_row(float *dst, const at_matrix *m, int r);
uint16_t at_f32_to_f16_1(float f);

/* Multi-head attention for one sentence.
 *   q [t_n, ld_q]   queries of heads side by side (head h at columns h*hd), already scaled
 *   k, v [s_n, ld_kv] keys and values
 *   out [t_n, ld_o] head outputs side by side
 *   causal: query i sees keys 0 .. q_pos0 + i (q_pos0 = position of the first query)
 *   probs: if not NULL, receives [heads, t_n, s_n] attention probabilities
 *   scratch: heads * s_n floats (heads run in parallel, one score row each) */
void at_attention(float *out, int ld_o, const float *q, int ld_q, const float *k,
                  const float *v, int ld_kv, int t_n, int s_n, int heads, int hd, int causal,
                  int q_pos0, float *probs, float *scratch);
/* The same with a score bias (at_attention_args.bias; NULL: at_attention exactly).
 * Sentences of at least AT_ATTENTION_GEMM_MIN query rows and keys (a speech window's 1500
 * frames) run as matrix products instead (at_attention_gemm); shorter ones, every text
 * sentence of usual length and every decoder step, as dot products, query row by row. */
void at_attention_bias(float *out, int ld_o, const float *q, int ld_q, const float *k,
                       const float *v, int ld_kv, int t_n, int s_n, int heads, int hd, int causal,
                       int q_pos0, float *probs, float *scratch, const float *bias,
                       ptrdiff_t bias_h, ptrdiff_t bias_t);

/* Attention as matrix products (engine/attention_gemm.c), for long sentences: per head,
 * scores = Q_h · K_hᵀ and out = P · V_h through the kernel set's linear layers on K_h and
 * V_hᵀ packed as weights, in blocks of query rows (a block's probabilities stay in L2),
 * heads and blocks in parallel. The same results as the dot products up to rounding (each
 * score one chain of fused multiply-adds, the softmax's exps the set's own), independent of
 * the thread count. Returns 0, or -1 when out of memory (nothing written). */
#define AT_ATTENTION_GEMM_MIN 128
int at_attention_gemm(const at_attention_args *a, int heads);

/* Threads (engine/threads.c): the calling thread's thread count (per thread, so callers on
 * several threads do not interfere). n 0 = at_default_threads(). Returns the
 * previous setting, to restore it. */
int at_set_threads(int n);
int at_threads(void);
/* $OMP_NUM_THREADS if set, else at_physical_cores(). */
int at_default_threads(void);
/* Physical cores among the CPUs this process may run on (its affinity mask). */
int at_physical_cores(void);

#endif
