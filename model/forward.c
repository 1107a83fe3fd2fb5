/* The transformer's forward computation: encoder, cross keys/values, decoder step. One
 * pass for every family; s2s_family's switches place the LayerNorms (after each
 * sublayer, or before it with a final one per stack) and choose positions and logits bias. */
#include "forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void embed_row(float *dst, const at_matrix *e, int id, float scale, const float *pos, int d) {
    at_matrix_row(dst, e, id);
    for (int j = 0; j < d; j++) dst[j] = dst[j] * scale + pos[j];
}

static void scale_rows(float *x, size_t n, float s) {
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

static float embed_scale(const s2s_config *c) {
    return c->scale_embedding ? sqrtf((float)c->d_model) : 1.0f;
}

/* A sublayer's input: x itself (post-norm), or LN(x) copied into h (pre-norm). */
static const float *sublayer_in(const s2s_config *c, const float *x, float *h, const norm *n, int rows) {
    if (!c->family->pre_norm) return x;
    memcpy(h, x, sizeof(float) * (size_t)rows * c->d_model);
    at_add_layernorm(h, NULL, n->g, n->b, rows, c->d_model, c->eps);
    return h;
}

/* The residual around a sublayer with output y: x = LN(x + y) (post-norm), or x += y. */
static void sublayer_out(const s2s_config *c, float *x, const float *y, const norm *n, int rows) {
    if (!c->family->pre_norm) {
        at_add_layernorm(x, y, n->g, n->b, rows, c->d_model, c->eps);
        return;
    }
    const size_t all = (size_t)rows * c->d_model;
    for (size_t i = 0; i < all; i++) x[i] += y[i];
}

/* A stack's optional LayerNorm (final or embedding), in place on rows of x. */
static void norm_rows(const s2s_config *c, float *x, const norm *n, int rows) {
    at_add_layernorm(x, NULL, n->g, n->b, rows, c->d_model, c->eps);
}

static int max_heads(const s2s_config *c) {
    return c->dec_heads > c->enc_heads ? c->dec_heads : c->enc_heads;
}

/* ---------------------------------------------------------------------------------------
 * Encoder */

/* Self-attention of sentences [lo, hi) of encoder layer l, each over its own rows. */
typedef struct {
    float *C;
    const float *Q, *K, *V;
    const int *off, *len;
    float *const *enc_self;
    float *scratch;
    int d, H, l, max_len;
} enc_attention_job;

static void enc_attention(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const enc_attention_job *j = ctx;
    const int d = j->d, H = j->H, hd = d / H;
    for (int i = lo; i < hi; i++) {
        const size_t o = (size_t)j->off[i] * d;
        const int len = j->len[i];
        float *probs = j->enc_self && j->enc_self[i] ? j->enc_self[i] + (size_t)j->l * H * len * len : NULL;
        at_attention(j->C + o, d, j->Q + o, d, j->K + o, j->V + o, d, len, len, H, hd, 0, 0, probs,
                     j->scratch + (size_t)i * H * j->max_len);
    }
}

int encode(const s2s_model *m, const int *const *ids, const int *off, const int *len, int n,
           int total, float *X, float *const *enc_self) {
    const s2s_config *c = &m->c;
    const int d = c->d_model, H = c->enc_heads, hd = d / H;
    const size_t td = (size_t)total * d;
    const float escale = embed_scale(c), qscale = 1.0f / sqrtf((float)hd);
    int max_len = 1;
    for (int i = 0; i < n; i++) max_len = len[i] > max_len ? len[i] : max_len;
    /* one block for the layer's working arrays, kept for the thread's next batch
     * (at_block_alloc): malloc'd afresh, they were faulted in and zeroed every batch, 14% of a
     * batch-32 encoder on Zen 5 */
    const size_t sizes[] = {td, td, td, td, (size_t)total * c->enc_ffn, (size_t)d, (size_t)n * H * max_len,
                            c->family->pre_norm ? td : 0};
    enum { NBUF = sizeof sizes / sizeof sizes[0] };
    size_t at[NBUF + 1] = {0};
    for (int i = 0; i < NBUF; i++) at[i + 1] = at[i] + (sizes[i] + 15) / 16 * 16; /* 64-byte aligned */
    const size_t bytes = sizeof(float) * at[NBUF];
    float *block = at_block_alloc(bytes);
    if (!block) return -1;
    float *Q = block + at[0], *K = block + at[1], *V = block + at[2], *C = block + at[3], *F = block + at[4];
    float *pos = block + at[5], *scratch = block + at[6]; /* scratch: [sentence][H][S] */
    float *Hn = c->family->pre_norm ? block + at[7] : NULL;
    /* X [total, d]: token embedding * scale + position, sentence by sentence */
    for (int i = 0; i < n; i++)
        for (int j = 0, pads = 0; j < len[i]; j++) {
            const int id = ids[i][j];
            embed_row(X + (size_t)(off[i] + j) * d, &m->enc_embed, id, escale,
                      s2s_position(m, 0, s2s_position_of(c, id, j, pads), pos), d);
            pads += id == c->pad_id;
        }
    if (c->family->embed_norm) norm_rows(c, X, &m->enc_embed_norm, total);
    for (int l = 0; l < c->enc_layers; l++) {
        const enc_layer *L = &m->enc[l];
        /* self-attention, each sentence over its own rows: C [total, d] */
        const float *in = sublayer_in(c, X, Hn, &L->self_attn_norm, total);
        at_k()->linear(Q, in, &L->self_attn.q.w, L->self_attn.q.b, total);
        at_k()->linear(K, in, &L->self_attn.k.w, L->self_attn.k.b, total);
        at_k()->linear(V, in, &L->self_attn.v.w, L->self_attn.v.b, total);
        scale_rows(Q, td, qscale);
        const enc_attention_job j = {C, Q, K, V, off, len, enc_self, scratch, d, H, l, max_len};
        at_parallel_for(n, at_threads(), enc_attention, &j);
        at_k()->linear(Q, C, &L->self_attn.o.w, L->self_attn.o.b, total);
        sublayer_out(c, X, Q, &L->self_attn_norm, total);
        /* feed-forward: F [total, enc_ffn] */
        at_linear_act(F, sublayer_in(c, X, Hn, &L->ffn_norm, total), &L->fc1.w, L->fc1.b, total, c->act);
        at_k()->linear(Q, F, &L->fc2.w, L->fc2.b, total);
        sublayer_out(c, X, Q, &L->ffn_norm, total);
    }
    if (c->family->final_norms) norm_rows(c, X, &m->enc_final_norm, total);
    at_block_free(block, bytes);
    return 0;
}

/* Keys and values a decoder step reads all of (every row's cross and self attention) live in
 * blocks from at_alloc_weights, on huge pages where the system gives them: through 4 KiB
 * pages nearly every row of keys missed the TLB (a batch-64 step reads about 60 MB of them).
 * at_block_alloc keeps them for the thread's next batch. */
int cross_kv(const s2s_model *m, const float *X, enc_memory *mem) {
    const int L = m->c.dec_layers;
    const size_t td = (size_t)mem->total * m->c.d_model;
    mem->cross_k = calloc((size_t)L, sizeof(float *));
    mem->cross_v = calloc((size_t)L, sizeof(float *));
    mem->cross_bytes = sizeof(float) * td * 2 * (size_t)L;
    mem->cross_block = at_block_alloc(mem->cross_bytes);
    if (!mem->cross_k || !mem->cross_v || !mem->cross_block) return -1;
    for (int l = 0; l < L; l++) {
        mem->cross_k[l] = mem->cross_block + td * 2 * (size_t)l;
        mem->cross_v[l] = mem->cross_k[l] + td;
        at_k()->linear(mem->cross_k[l], X, &m->dec[l].cross_attn.k.w, m->dec[l].cross_attn.k.b, mem->total);
        at_k()->linear(mem->cross_v[l], X, &m->dec[l].cross_attn.v.w, m->dec[l].cross_attn.v.b, mem->total);
    }
    return 0;
}

void enc_memory_free(const s2s_model *m, enc_memory *mem) {
    (void)m;
    at_block_free(mem->cross_block, mem->cross_bytes);
    free(mem->cross_k);
    free(mem->cross_v);
    mem->cross_k = mem->cross_v = NULL;
    mem->cross_block = NULL;
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
    const size_t R = (size_t)max_rows, d = (size_t)c->d_model;
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
    s->logits_bytes = sizeof(float) * R * c->decoder_vocab_size;
    s->logits = at_block_alloc(s->logits_bytes); /* read whole every step */
    if (!s->self_k || !s->self_v || !s->x || !s->q || !s->k || !s->v || !s->ctx || !s->tmp || !s->h || !s->ff ||
        !s->logits)
        return -1;
    return dec_reserve(s, cap);
}

/* The caches for `positions` positions in a new block, layer by layer (a step's rows read
 * one layer's caches after another), the first cap positions of each copied over. */
static int move_caches(dec_state *s, int positions) {
    const int L = s->m->c.dec_layers;
    const size_t d = (size_t)s->m->c.d_model, per = (size_t)positions * d;
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
    if (move_caches(s, positions)) return -1;
    s->cap = positions;
    return 0;
}

void dec_copy_slot(dec_state *s, int dst, int src, int len) {
    const int L = s->m->c.dec_layers;
    const size_t bytes = sizeof(float) * (size_t)len * s->m->c.d_model;
    for (int l = 0; l < L; l++) {
        memcpy(s->self_k[dst * L + l], s->self_k[src * L + l], bytes);
        memcpy(s->self_v[dst * L + l], s->self_v[src * L + l], bytes);
    }
}

void dec_free(dec_state *s) {
    at_block_free(s->cache, s->cache_bytes);
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
    size_t scratch_per_row;
    int t, l;
} dec_attention_job;

static void dec_self_attention(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const dec_attention_job *j = ctx;
    dec_state *s = j->s;
    const s2s_config *c = &s->m->c;
    const int d = c->d_model, H = c->dec_heads, hd = d / H, L = c->dec_layers, t = j->t, l = j->l;
    for (int b = lo; b < hi; b++) {
        float *K = s->self_k[j->rows[b].slot * L + l], *V = s->self_v[j->rows[b].slot * L + l];
        memcpy(K + (size_t)t * d, s->k + (size_t)b * d, sizeof(float) * (size_t)d);
        memcpy(V + (size_t)t * d, s->v + (size_t)b * d, sizeof(float) * (size_t)d);
        float *probs = j->att && j->att[b] ? j->att[b] + (size_t)l * H * (t + 1) : NULL;
        at_attention(s->ctx + (size_t)b * d, d, s->q + (size_t)b * d, d, K, V, d, 1, t + 1, H, hd, 1, t, probs,
                     s->scratch + (size_t)b * j->scratch_per_row);
    }
}

static void dec_cross_attention(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const dec_attention_job *j = ctx;
    dec_state *s = j->s;
    const enc_memory *mem = s->mem;
    const s2s_config *c = &s->m->c;
    const int d = c->d_model, H = c->dec_heads, hd = d / H, l = j->l;
    for (int b = lo; b < hi; b++) {
        const int i = j->rows[b].sent, S = mem->len[i];
        const size_t o = (size_t)mem->off[i] * d;
        float *probs = j->att && j->att[b] ? j->att[b] + (size_t)l * H * S : NULL;
        at_attention(s->ctx + (size_t)b * d, d, s->q + (size_t)b * d, d, mem->cross_k[l] + o, mem->cross_v[l] + o, d, 1,
                     S, H, hd, 0, 0, probs, s->scratch + (size_t)b * j->scratch_per_row);
    }
}

void decoder_step(dec_state *s, const dec_row *rows, int n, int t, float *const *att_self,
                  float *const *att_cross) {
    const s2s_model *m = s->m;
    const s2s_config *c = &m->c;
    const int d = c->d_model, H = c->dec_heads, hd = d / H, L = c->dec_layers;
    const float qscale = 1.0f / sqrtf((float)hd);
    const size_t scratch_per_row = (size_t)max_heads(c) * (s->cap > s->max_src ? s->cap : s->max_src);
    float *x = s->x, *q = s->q, *ctx = s->ctx, *tmp = s->tmp, *ff = s->ff;

    /* x [n, d]: token embedding * scale + position t (tmp is free until the first layer) */
    for (int b = 0; b < n; b++) {
        const int id = rows[b].token;
        embed_row(x + (size_t)b * d, &m->dec_embed, id, embed_scale(c),
                  s2s_position(m, 1, s2s_position_of(c, id, t, 0), tmp), d);
    }
    if (c->family->embed_norm) norm_rows(c, x, &m->dec_embed_norm, n);

    for (int l = 0; l < L; l++) {
        const dec_layer *Ly = &m->dec[l];
        /* masked self-attention over the row's own cache, positions 0..t */
        const float *in = sublayer_in(c, x, s->h, &Ly->self_attn_norm, n);
        at_k()->linear(q, in, &Ly->self_attn.q.w, Ly->self_attn.q.b, n);
        at_k()->linear(s->k, in, &Ly->self_attn.k.w, Ly->self_attn.k.b, n);
        at_k()->linear(s->v, in, &Ly->self_attn.v.w, Ly->self_attn.v.b, n);
        scale_rows(q, (size_t)n * d, qscale);
        const dec_attention_job self = {s, rows, att_self, scratch_per_row, t, l};
        at_parallel_for(n, at_threads(), dec_self_attention, &self);
        at_k()->linear(tmp, ctx, &Ly->self_attn.o.w, Ly->self_attn.o.b, n);
        sublayer_out(c, x, tmp, &Ly->self_attn_norm, n);

        /* cross-attention over the row's sentence */
        at_k()->linear(q, sublayer_in(c, x, s->h, &Ly->cross_attn_norm, n), &Ly->cross_attn.q.w,
                       Ly->cross_attn.q.b, n);
        scale_rows(q, (size_t)n * d, qscale);
        const dec_attention_job cross = {s, rows, att_cross, scratch_per_row, t, l};
        at_parallel_for(n, at_threads(), dec_cross_attention, &cross);
        at_k()->linear(tmp, ctx, &Ly->cross_attn.o.w, Ly->cross_attn.o.b, n);
        sublayer_out(c, x, tmp, &Ly->cross_attn_norm, n);

        /* feed-forward: ff [n, dec_ffn] */
        at_linear_act(ff, sublayer_in(c, x, s->h, &Ly->ffn_norm, n), &Ly->fc1.w, Ly->fc1.b, n, c->act);
        at_k()->linear(tmp, ff, &Ly->fc2.w, Ly->fc2.b, n);
        sublayer_out(c, x, tmp, &Ly->ffn_norm, n);
    }
    if (c->family->final_norms) norm_rows(c, x, &m->dec_final_norm, n);
    /* logits [n, decoder_vocab_size] */
    at_k()->linear(s->logits, x, &m->out_proj, m->final_logits_bias, n);
}
