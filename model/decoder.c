/* The decoder side of the forward pass (layers.h): its workspace (self-attention caches per
 * slot, one step's buffers) and decoder_step, one target position for a set of rows. One
 * pass for every family; sublayer.h places the LayerNorms. */
#include "layers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "align_head.h"
#include "sublayer.h"

static int max_heads(const s2s_config *c) {
    return c->dec_heads > c->enc_heads ? c->dec_heads : c->enc_heads;
}

/* ---------------------------------------------------------------------------------------
 * Decoder state */

static int grow(float **p, size_t n) {
    float *q = realloc(*p, sizeof(float) * n);
    if (!q) return -1;
    *p = q;
    return 0;
}

int dec_init(dec_state *s, const s2s_model *m, const enc_memory *mem, int n_slots, int max_rows,
             int cap) {
    const s2s_config *c = &m->c;
    const size_t R = (size_t)max_rows, d = (size_t)(c->dec_inner > c->d_model ? c->dec_inner : c->d_model);
    memset(s, 0, sizeof *s);
    s->m = m;
    s->mem = mem;
    s->n_slots = n_slots;
    s->max_rows = max_rows;
    for (int i = 0; i < mem->n; i++) s->max_src = mem->len[i] > s->max_src ? mem->len[i] : s->max_src;
    s->self_k = calloc((size_t)n_slots * c->dec_layers, sizeof(float *));
    s->self_v = calloc((size_t)n_slots * c->dec_layers, sizeof(float *));
    s->x = malloc(sizeof(float) * R * d);
    s->q = malloc(sizeof(float) * R * d);
    s->k = malloc(sizeof(float) * R * d);
    s->v = malloc(sizeof(float) * R * d);
    s->ctx = malloc(sizeof(float) * R * d);
    s->tmp = malloc(sizeof(float) * R * d);
    s->h = malloc(sizeof(float) * R * d);
    s->ff = malloc(sizeof(float) * R * c->dec_ffn);
    s->gate = c->gated_ffn ? malloc(sizeof(float) * R * c->dec_ffn) : NULL;
    s->logits_bytes = sizeof(float) * R * c->decoder_vocab_size;
    s->logits = at_block_alloc(s->logits_bytes); /* read whole every step */
    s->copies = malloc(sizeof *s->copies * (size_t)n_slots);
    if (!s->self_k || !s->self_v || !s->x || !s->q || !s->k || !s->v || !s->ctx || !s->tmp || !s->h || !s->ff ||
        !s->logits || (c->gated_ffn && !s->gate) || !s->copies)
        return -1;
    return dec_reserve(s, cap);
}

/* The caches for `positions` positions in a new block, layer by layer (a step's rows read
 * one layer's caches after another), the first cap positions of each copied over. */
static int move_caches(dec_state *s, int positions) {
    const int L = s->m->c.dec_layers;
    const size_t d = (size_t)s->m->c.dec_inner, per = (size_t)positions * d;
    const size_t bytes = sizeof(float) * per * 2 * (size_t)s->n_slots * L;
    float *cache = at_block_alloc(bytes);
    if (!cache) return -1;
    for (int l = 0; l < L; l++)
        for (int slot = 0; slot < s->n_slots; slot++) {
            const int i = slot * L + l;
            float *k = cache + per * 2 * ((size_t)l * s->n_slots + slot), *v = k + per;
            if (s->cap > 0) {
                memcpy(k, s->self_k[i], sizeof(float) * (size_t)s->cap * d);
                memcpy(v, s->self_v[i], sizeof(float) * (size_t)s->cap * d);
            }
            s->self_k[i] = k;
            s->self_v[i] = v;
        }
    at_block_free(s->cache, s->cache_bytes);
    s->cache = cache;
    s->cache_bytes = bytes;
    return 0;
}

int dec_reserve(dec_state *s, int positions) {
    if (positions <= s->cap) return 0;
    const s2s_config *c = &s->m->c;
    const int width = positions > s->max_src ? positions : s->max_src;
    if (grow(&s->scratch, (size_t)s->max_rows * max_heads(c) * width)) return -1;
    if (c->family->positions == POS_RELATIVE && grow(&s->relbias, (size_t)c->dec_heads * positions)) return -1;
    if (move_caches(s, positions)) return -1;
    s->cap = positions;
    return 0;
}

void dec_copy_slot(dec_state *s, int dst, int src, int len) {
    s->copies[s->n_copies][0] = dst, s->copies[s->n_copies][1] = src, s->copies[s->n_copies][2] = len;
    s->n_copies++;
}

/* Items [lo, hi): copy i / L's layer i % L */
static void copy_layers(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const dec_state *s = ctx;
    const int L = s->m->c.dec_layers;
    for (int i = lo; i < hi; i++) {
        const int *c = s->copies[i / L], l = i % L;
        const size_t bytes = sizeof(float) * (size_t)c[2] * s->m->c.dec_inner;
        memcpy(s->self_k[c[0] * L + l], s->self_k[c[1] * L + l], bytes);
        memcpy(s->self_v[c[0] * L + l], s->self_v[c[1] * L + l], bytes);
    }
}

/* In parallel: a beam-4 step at batch 32 copied a few MB while the other thread waited (2%
 * of an int8 run's time, serial) */
void dec_run_copies(dec_state *s) {
    const int items = s->n_copies * s->m->c.dec_layers;
    size_t bytes = 0;
    for (int i = 0; i < s->n_copies; i++) bytes += (size_t)s->copies[i][2];
    bytes *= 2 * sizeof(float) * (size_t)s->m->c.dec_inner * s->m->c.dec_layers;
    s->n_copies = 0;
    at_parallel_for(items, bytes > (256 << 10) ? at_threads() : 1, copy_layers, s);
}

void dec_free(dec_state *s) {
    at_block_free(s->cache, s->cache_bytes);
    free(s->copies);
    free(s->self_k);
    free(s->self_v);
    free(s->x);
    free(s->q);
    free(s->k);
    free(s->v);
    free(s->ctx);
    free(s->tmp);
    free(s->h);
    free(s->ff);
    free(s->gate);
    free(s->relbias);
    at_block_free(s->logits, s->logits_bytes);
    free(s->scratch);
    memset(s, 0, sizeof *s);
}

/* ---------------------------------------------------------------------------------------
 * One decoder step */

/* Attention of decoder rows [lo, hi) at step t, layer l: one query row each, over the row's
 * own cache (self) or over its sentence (cross). */
typedef struct {
    dec_state *s;
    const dec_row *rows;
    float *const *att;
    const float *bias; /* self-attention's score biases (POS_RELATIVE), else NULL */
    size_t scratch_per_row;
    int t, l;
} dec_attention_job;

/* Ask for [p, p + bytes) into L2 (a hint). A row's keys and values (its own cache, its
 * sentence's cross-attention memory: tens of KB a layer) come from L3 or memory, and in
 * attention's short runs over them the hardware prefetchers start late; asked for while the
 * row before computes, they are there when the row starts. */
static void prefetch_l2(const float *p, size_t bytes) {
    const char *c = (const char *)p, *end = c + bytes;
    for (; c < end; c += 64) __builtin_prefetch(c, 0, 2);
}

static void dec_self_attention(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const dec_attention_job *j = ctx;
    dec_state *s = j->s;
    const s2s_config *c = &s->m->c;
    const int d = c->dec_inner, H = c->dec_heads, hd = c->dec_hd, L = c->dec_layers, t = j->t, l = j->l;
    for (int b = lo; b < hi; b++) {
        float *K = s->self_k[j->rows[b].slot * L + l], *V = s->self_v[j->rows[b].slot * L + l];
        if (b + 1 < hi) { /* the next row's keys and values (K and V lie side by side) */
            const size_t bytes = sizeof(float) * (size_t)t * d;
            prefetch_l2(s->self_k[j->rows[b + 1].slot * L + l], bytes);
            prefetch_l2(s->self_v[j->rows[b + 1].slot * L + l], bytes);
        }
        memcpy(K + (size_t)t * d, s->k + (size_t)b * d, sizeof(float) * (size_t)d);
        memcpy(V + (size_t)t * d, s->v + (size_t)b * d, sizeof(float) * (size_t)d);
        float *probs = j->att && j->att[b] ? j->att[b] + (size_t)l * H * (t + 1) : NULL;
        /* POS_RELATIVE: s->relbias holds this step's [H, t + 1] biases */
        at_attention_bias(s->ctx + (size_t)b * d, d, s->q + (size_t)b * d, d, K, V, d, 1, t + 1, H, hd, 1, t, probs,
                          s->scratch + (size_t)b * j->scratch_per_row, j->bias, t + 1, 0);
    }
}

static void dec_cross_attention(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const dec_attention_job *j = ctx;
    dec_state *s = j->s;
    const enc_memory *mem = s->mem;
    const s2s_config *c = &s->m->c;
    const int d = c->dec_inner, H = c->dec_heads, hd = c->dec_hd, l = j->l;
    for (int b = lo; b < hi; b++) {
        const int i = j->rows[b].sent, S = mem->len[i];
        const size_t o = (size_t)mem->off[i] * d;
        const int next = b + 1 < hi ? j->rows[b + 1].sent : i;
        if (next != i) { /* another sentence's memory: its heads lie in one block */
            const size_t no = (size_t)mem->off[next] * d, bytes = sizeof(float) * (size_t)mem->len[next] * d;
            prefetch_l2(mem->cross_k[l] + no, bytes);
            prefetch_l2(mem->cross_v[l] + no, bytes);
        }
        float *probs = j->att && j->att[b] ? j->att[b] + (size_t)l * H * S : NULL;
        /* the memory's heads lie apart (layers.h: enc_memory) */
        const at_attention_args a = {s->ctx + (size_t)b * d, s->q + (size_t)b * d, mem->cross_k[l] + o,
                                     mem->cross_v[l] + o, probs, s->scratch + (size_t)b * j->scratch_per_row, d, d, hd,
                                     1, S, hd, 0, 0, NULL, 0, 0, (ptrdiff_t)S * hd};
        at_attention_run(&a, H);
    }
}

void decoder_step(dec_state *s, const dec_row *rows, int n, int t, float *const *att_self,
                  float *const *att_cross) {
    const s2s_model *m = s->m;
    const s2s_config *c = &m->c;
    const int d = c->d_model, hd = c->dec_hd, L = c->dec_layers;
    const size_t wide = (size_t)n * c->dec_inner;
    const size_t scratch_per_row = (size_t)max_heads(c) * (s->cap > s->max_src ? s->cap : s->max_src);
    float *x = s->x, *q = s->q, *ctx = s->ctx, *tmp = s->tmp;

    /* x [n, d]: token embedding * scale + position t (tmp is free until the first layer) */
    for (int b = 0; b < n; b++) {
        const int id = rows[b].token;
        embed_row(x + (size_t)b * d, &m->dec_embed, id, embed_scale(c),
                  s2s_position(m, 1, s2s_position_of(c, id, t, 0), tmp), d);
    }
    if (c->family->embed_norm) norm_rows(c, x, &m->dec_embed_norm, n);
    /* POS_RELATIVE: the biases of keys 0..t for query t, distances -t..0 */
    const float *bias = NULL;
    if (c->family->positions == POS_RELATIVE) {
        s2s_relative_bias(m, 1, -t, t + 1, s->relbias, t + 1);
        bias = s->relbias;
    }

    for (int l = 0; l < L; l++) {
        const dec_layer *Ly = &m->dec[l];
        /* masked self-attention over the row's own cache, positions 0..t */
        const float *in = sublayer_in(c, x, s->h, &Ly->self_attn_norm, n);
        at_k()->linear(q, in, &Ly->self_attn.q.w, Ly->self_attn.q.b, n);
        at_k()->linear(s->k, in, &Ly->self_attn.k.w, Ly->self_attn.k.b, n);
        at_k()->linear(s->v, in, &Ly->self_attn.v.w, Ly->self_attn.v.b, n);
        scale_queries(c, q, wide, hd);
        const dec_attention_job self = {s, rows, att_self, bias, scratch_per_row, t, l};
        at_parallel_for(n, at_threads(), dec_self_attention, &self);
        at_k()->linear(tmp, ctx, &Ly->self_attn.o.w, Ly->self_attn.o.b, n);
        sublayer_out(c, x, tmp, &Ly->self_attn_norm, n);

        /* cross-attention over the row's sentence (and the alignment head beside it) */
        const float *cin = sublayer_in(c, x, s->h, &Ly->cross_attn_norm, n);
        at_k()->linear(q, cin, &Ly->cross_attn.q.w, Ly->cross_attn.q.b, n);
        if (att_cross && s->mem->align_k && l == c->align_head_layer)
            align_head_rows(m, s->mem, rows, n, cin, att_cross);
        scale_queries(c, q, wide, hd);
        const dec_attention_job cross = {s, rows, att_cross, NULL, scratch_per_row, t, l};
        at_parallel_for(n, at_threads(), dec_cross_attention, &cross);
        at_k()->linear(tmp, ctx, &Ly->cross_attn.o.w, Ly->cross_attn.o.b, n);
        sublayer_out(c, x, tmp, &Ly->cross_attn_norm, n);

        /* feed-forward: ff [n, dec_ffn] */
        ffn_rows(c, tmp, sublayer_in(c, x, s->h, &Ly->ffn_norm, n), &Ly->fc1, &Ly->gate, &Ly->fc2, s->ff, s->gate,
                 n);
        sublayer_out(c, x, tmp, &Ly->ffn_norm, n);
    }
    if (c->family->final_norms) norm_rows(c, x, &m->dec_final_norm, n);
    /* T5's tied output: the states scaled by d_model^-0.5 first */
    if (c->out_scale != 1.0f) scale_rows(x, (size_t)n * d, c->out_scale);
    /* logits [n, decoder_vocab_size] */
    at_k()->linear(s->logits, x, &m->out_proj, m->final_logits_bias, n);
}
