/* sublayer: the pieces the encoder and the decoder are both built from (an embedded row,
 * a sublayer's input and residual, a stack's extra LayerNorm), with s2s_family's switches
 * (post-norm or pre-norm) in one place. Internal to encoder.c and decoder.c. */
#ifndef ATTEND_SUBLAYER_H
#define ATTEND_SUBLAYER_H

#include <math.h>
#include <string.h>

#include "seq2seq.h"

/* Element-wise loops vectorized explicitly: -O2 leaves them scalar (the queries' scaling was
 * 2% of a greedy batch-32 run, serial on the calling thread); each value gets the same single
 * operations either way (engine/kernels.c's ELEMENTWISE_SIMD) */
#ifdef __clang__
#define SUBLAYER_SIMD
#else
#define SUBLAYER_SIMD _Pragma("omp simd")
#endif

static inline void embed_row(float *dst, const at_matrix *e, int id, float scale, const float *pos, int d) {
    at_matrix_row(dst, e, id);
    SUBLAYER_SIMD
    for (int j = 0; j < d; j++) dst[j] = dst[j] * scale + pos[j];
}

static inline void scale_rows(float *x, size_t n, float s) {
    SUBLAYER_SIMD
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

static inline float embed_scale(const s2s_config *c) {
    return c->scale_embedding ? sqrtf((float)c->d_model) : 1.0f;
}

/* A sublayer's input: x itself (post-norm), or LN(x) copied into h (pre-norm). */
static inline const float *sublayer_in(const s2s_config *c, const float *x, float *h, const norm *n, int rows) {
    if (!c->family->pre_norm) return x;
    memcpy(h, x, sizeof(float) * (size_t)rows * c->d_model);
    if (c->family->rms_norm) at_rmsnorm(h, n->g, rows, c->d_model, c->eps);
    else at_add_layernorm(h, NULL, n->g, n->b, rows, c->d_model, c->eps);
    return h;
}

/* The residual around a sublayer with output y: x = LN(x + y) (post-norm), or x += y. */
static inline void sublayer_out(const s2s_config *c, float *x, const float *y, const norm *n, int rows) {
    if (!c->family->pre_norm) {
        at_add_layernorm(x, y, n->g, n->b, rows, c->d_model, c->eps);
        return;
    }
    const size_t all = (size_t)rows * c->d_model;
    for (size_t i = 0; i < all; i++) x[i] += y[i];
}

/* A stack's optional LayerNorm (final or embedding), in place on rows of x. */
static inline void norm_rows(const s2s_config *c, float *x, const norm *n, int rows) {
    if (c->family->rms_norm) at_rmsnorm(x, n->g, rows, c->d_model, c->eps);
    else at_add_layernorm(x, NULL, n->g, n->b, rows, c->d_model, c->eps);
}

/* Queries divided by sqrt(head width hd), where the family scales its scores (T5 does not). */
static inline void scale_queries(const s2s_config *c, float *q, size_t n, int hd) {
    if (c->family->scaled_scores) scale_rows(q, n, 1.0f / sqrtf((float)hd));
}

/* The FFN's activation as run: speech models take GELU through the kernel set's vector erfc
 * (kernels.h: AT_ACT_GELU_VEC), text models libm's, as their recorded outputs were made. */
static inline at_activation ffn_activation(const s2s_config *c) {
    return c->family->audio && c->act == AT_ACT_GELU ? AT_ACT_GELU_VEC : c->act;
}

/* The feed-forward sublayer on rows of in into y [rows, d]: fc2(act(fc1 in)), or with a gate
 * (T5's gated FFN) fc2(act(fc1 in) * (gate in)). f, g: [rows, ffn] working rows. */
static inline void ffn_rows(const s2s_config *c, float *y, const float *in, const linear *fc1, const linear *gate,
                            const linear *fc2, float *f, float *g, int rows) {
    at_linear_act(f, in, &fc1->w, fc1->b, rows, ffn_activation(c));
    if (c->gated_ffn) {
        at_k()->linear(g, in, &gate->w, gate->b, rows);
        const size_t all = (size_t)rows * fc1->w.rows;
        for (size_t i = 0; i < all; i++) f[i] *= g[i];
    }
    at_k()->linear(y, f, &fc2->w, fc2->b, rows);
}

#endif
