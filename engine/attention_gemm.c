/* Attention of long sentences as matrix products (kernels.h: at_attention_gemm).
 *
 * Query row by row, attention is two short dot-product loops per head: fine for a sentence
 * of text, but a speech window (1500 frames, 1500 x 1500 scores per head) spent more than
 * half of Whisper's encoder there. As matrix products the same work runs in the linear
 * layers' register tiles: per head, K_h [S, hd] and V_hᵀ [hd, S] are packed like weights
 * (at_matrix_pack_into), then for each block of query rows
 *     P = Q_b · K_hᵀ   [rows, S]    (the linear layer with W = K_h)
 *     P = softmax(P + bias, causal mask) row by row
 *     O = P · V_h      [rows, hd]   (the linear layer with W = V_hᵀ)
 * A block's scores stay in L2 between the two products. Work items are (head, block), each
 * computed the same way on whichever thread: results do not depend on the thread count. */
#include <math.h>
#include <string.h>

#include "kernels.h"

/* Query rows per block: 96 rows of 1500 scores are 576 KiB, in L2 beside the packed K_h
 * and V_hᵀ of their head (384 KiB each at hd 64). A multiple of the tiles' rows (6, 3). */
#define GEMM_ROWS 96

typedef struct {
    const at_attention_args *a;
    const at_kernels *K;
    at_matrix *keys, *values; /* [heads] each, packed */
    float *work;              /* per worker: work_floats from worker * work_floats */
    size_t work_floats;
    int blocks; /* blocks of GEMM_ROWS query rows per head */
} gemm_job;

static size_t floats_aligned(size_t bytes) { return (bytes + 63) / 64 * 16; }

/* Items [lo, hi): item 2h packs head h's keys, item 2h + 1 its values (through a row-major
 * copy in the worker's area: the pack reads whole rows). */
static void pack_heads(const void *ctx, int lo, int hi, int worker) {
    const gemm_job *j = ctx;
    const at_attention_args *a = j->a;
    float *stage = j->work + (size_t)worker * j->work_floats;
    const int hd = a->hd, s_n = a->s_n;
    for (int i = lo; i < hi; i++) {
        const int h = i / 2;
        at_matrix *m = i % 2 ? &j->values[h] : &j->keys[h];
        void *dst = (void *)m->data; /* the packed place, set by gemm_layout */
        if (i % 2 == 0) { /* K_h [s_n, hd] */
            for (int s = 0; s < s_n; s++)
                memcpy(stage + (size_t)s * hd, a->k + (size_t)s * a->ld_kv + (size_t)h * hd, sizeof(float) * hd);
        } else { /* V_hᵀ [hd, s_n] */
            for (int s = 0; s < s_n; s++) {
                const float *vs = a->v + (size_t)s * a->ld_kv + (size_t)h * hd;
                for (int c = 0; c < hd; c++) stage[(size_t)c * s_n + s] = vs[c];
            }
        }
        m->data = stage;
        m->packed = AT_ROW_MAJOR;
        at_matrix_pack_into(m, dst);
    }
}

/* Rows [t0, t1) of p [.., s_n] (row t of the sentence at p + (t - t0) * s_n) of head h:
 * the bias added, keys past the causal limit at -inf, then the softmax. */
static void softmax_rows(const gemm_job *j, float *p, int h, int t0, int t1) {
    const at_attention_args *a = j->a;
    const int s_n = a->s_n;
    for (int t = t0; t < t1; t++) {
        float *row = p + (size_t)(t - t0) * s_n;
        const int visible = a->causal ? (a->q_pos0 + t + 1 < s_n ? a->q_pos0 + t + 1 : s_n) : s_n;
        if (a->bias) {
            const float *br = a->bias + h * a->bias_h + t * a->bias_t;
            for (int s = 0; s < visible; s++) row[s] += br[s];
        }
        for (int s = visible; s < s_n; s++) row[s] = -INFINITY;
        j->K->softmax(row, s_n);
    }
}

/* Items [lo, hi): item i is block i % blocks of head i / blocks. */
static void attend_blocks(const void *ctx, int lo, int hi, int worker) {
    const gemm_job *j = ctx;
    const at_attention_args *a = j->a;
    const int hd = a->hd, s_n = a->s_n, t_n = a->t_n;
    float *q = j->work + (size_t)worker * j->work_floats;
    float *o = q + floats_aligned(sizeof(float) * GEMM_ROWS * hd);
    float *scores = o + floats_aligned(sizeof(float) * GEMM_ROWS * hd);
    for (int i = lo; i < hi; i++) {
        const int h = i / j->blocks, t0 = i % j->blocks * GEMM_ROWS;
        const int t1 = t0 + GEMM_ROWS < t_n ? t0 + GEMM_ROWS : t_n, rows = t1 - t0;
        for (int t = t0; t < t1; t++)
            memcpy(q + (size_t)(t - t0) * hd, a->q + (size_t)t * a->ld_q + (size_t)h * hd, sizeof(float) * hd);
        /* the probabilities go straight where the caller wants them */
        float *p = a->probs ? a->probs + ((size_t)h * t_n + t0) * s_n : scores;
        j->K->linear(p, q, &j->keys[h], NULL, rows);
        softmax_rows(j, p, h, t0, t1);
        j->K->linear(o, p, &j->values[h], NULL, rows);
        for (int t = t0; t < t1; t++)
            memcpy(a->out + (size_t)t * a->ld_o + (size_t)h * hd, o + (size_t)(t - t0) * hd, sizeof(float) * hd);
    }
}

/* Places the packed matrices of every head in `packed` (bytes each: kb, vb); returns the
 * bytes they take. */
static size_t gemm_layout(at_matrix *keys, at_matrix *values, int heads, const at_attention_args *a, char *packed) {
    const at_matrix k = {NULL, AT_F32, a->s_n, a->hd, NULL, NULL, AT_ROW_MAJOR};
    const at_matrix v = {NULL, AT_F32, a->hd, a->s_n, NULL, NULL, AT_ROW_MAJOR};
    const size_t kb = at_matrix_packed_bytes(&k), vb = at_matrix_packed_bytes(&v);
    for (int h = 0; packed && h < heads; h++) {
        keys[h] = k, values[h] = v;
        keys[h].data = packed + (kb + vb) * (size_t)h;
        values[h].data = packed + (kb + vb) * (size_t)h + kb;
    }
    return (kb + vb) * (size_t)heads;
}

int at_attention_gemm(const at_attention_args *a, int heads) {
    enum { MAX_HEADS = 128 };
    if (heads > MAX_HEADS || heads < 1) return -1;
    at_matrix keys[MAX_HEADS], values[MAX_HEADS];
    const int blocks = (a->t_n + GEMM_ROWS - 1) / GEMM_ROWS, items = heads * (blocks > 2 ? blocks : 2);
    const int nt = at_in_parallel() ? 1 : at_threads() < items ? at_threads() : items;
    /* a worker's area: a copy of K_h or V_hᵀ to pack, or a block's queries, outputs, scores */
    const size_t stage = floats_aligned(sizeof(float) * (size_t)a->s_n * a->hd);
    const size_t block = 2 * floats_aligned(sizeof(float) * GEMM_ROWS * a->hd) +
                         floats_aligned(sizeof(float) * GEMM_ROWS * (size_t)a->s_n);
    const size_t per = stage > block ? stage : block, packed = gemm_layout(keys, values, heads, a, NULL);
    const size_t bytes = packed + sizeof(float) * per * (size_t)nt;
    char *mem = at_block_alloc(bytes);
    if (!mem) return -1;
    gemm_layout(keys, values, heads, a, mem);
    gemm_job j = {a, at_k(), keys, values, (float *)(mem + packed), per, blocks};
    at_parallel_for(2 * heads, nt, pack_heads, &j);
    at_parallel_for(heads * blocks, nt, attend_blocks, &j);
    at_block_free(mem, bytes);
    return 0;
}
