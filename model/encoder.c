/* The encoder side of the forward pass (layers.h): a packed batch of sources through the
 * encoder stack, then each decoder layer's cross-attention keys and values over it. One pass
 * for every family; sublayer.h places the LayerNorms. */
#include "layers.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sublayer.h"

/* ---------------------------------------------------------------------------------------
 * Encoder */

/* Self-attention of sentences [lo, hi) of encoder layer l, each over its own rows. bias:
 * POS_RELATIVE's table [H, 2 max_len - 1] by distance (s2s_relative_bias), else NULL. */
typedef struct {
    float *C;
    const float *Q, *K, *V, *bias;
    const int *off, *len;
    float *const *enc_self;
    float *scratch;
    int inner, H, hd, l, max_len;
} enc_attention_job;

static void enc_attention(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const enc_attention_job *j = ctx;
    const int w = j->inner, H = j->H, span = 2 * j->max_len - 1;
    /* row t, key s reads the table at distance s - t: column max_len - 1 - t + s */
    const float *bias = j->bias ? j->bias + (j->max_len - 1) : NULL;
    for (int i = lo; i < hi; i++) {
        const size_t o = (size_t)j->off[i] * w;
        const int len = j->len[i];
        float *probs = j->enc_self && j->enc_self[i] ? j->enc_self[i] + (size_t)j->l * H * len * len : NULL;
        at_attention_bias(j->C + o, w, j->Q + o, w, j->K + o, j->V + o, w, len, len, H, j->hd, 0, 0, probs,
                          j->scratch + (size_t)i * H * j->max_len, bias, span, -1);
    }
}

/* The working arrays of one encode call, in one block (at_block_alloc): malloc'd afresh,
 * they were faulted in and zeroed every batch, 14% of a batch-32 encoder on Zen 5. */
typedef struct {
    float *block, *Q, *K, *V, *C, *F, *G, *pos, *scratch, *Hn, *bias;
    size_t bytes;
} enc_work;

static int enc_work_alloc(enc_work *w, const s2s_config *c, int n, int total, int max_len) {
    const size_t wide = (size_t)total * (c->enc_inner > c->d_model ? c->enc_inner : c->d_model);
    const size_t ff = (size_t)total * c->enc_ffn, H = (size_t)c->enc_heads;
    const size_t sizes[] = {wide, wide, wide, wide, ff, c->gated_ffn ? ff : 0, (size_t)c->d_model,
                            (size_t)n * H * max_len, c->family->pre_norm ? (size_t)total * c->d_model : 0,
                            c->family->positions == POS_RELATIVE ? H * (2 * (size_t)max_len - 1) : 0};
    enum { NBUF = sizeof sizes / sizeof sizes[0] };
    size_t at[NBUF + 1] = {0};
    for (int i = 0; i < NBUF; i++) at[i + 1] = at[i] + (sizes[i] + 15) / 16 * 16; /* 64-byte aligned */
    w->bytes = sizeof(float) * at[NBUF];
    w->block = at_block_alloc(w->bytes);
    if (!w->block) return -1;
    float *const b = w->block;
    w->Q = b + at[0], w->K = b + at[1], w->V = b + at[2], w->C = b + at[3], w->F = b + at[4], w->G = b + at[5];
    w->pos = b + at[6], w->scratch = b + at[7]; /* scratch: [sentence][H][S] */
    w->Hn = c->family->pre_norm ? b + at[8] : NULL;
    w->bias = sizes[9] ? b + at[9] : NULL;
    return 0;
}

/* The encoder stack over X [total, d] (embedded rows), in place. */
static int encode_stack(const s2s_model *m, enc_work *w, const int *off, const int *len, int n, int total,
                        int max_len, float *X, float *const *enc_self, const volatile int *stop) {
    const s2s_config *c = &m->c;
    const int H = c->enc_heads, hd = c->enc_hd;
    float *Q = w->Q, *K = w->K, *V = w->V, *C = w->C;
    if (c->family->embed_norm) norm_rows(c, X, &m->enc_embed_norm, total);
    if (w->bias) s2s_relative_bias(m, 0, 1 - max_len, 2 * max_len - 1, w->bias, 2 * max_len - 1);
    for (int l = 0; l < c->enc_layers; l++) {
        if (stop && *stop) return -2; /* a large batch's encoder takes seconds: stop between layers */
        const enc_layer *L = &m->enc[l];
        /* self-attention, each sentence over its own rows: C [total, enc_inner] */
        const float *in = sublayer_in(c, X, w->Hn, &L->self_attn_norm, total);
        at_k()->linear(Q, in, &L->self_attn.q.w, L->self_attn.q.b, total);
        at_k()->linear(K, in, &L->self_attn.k.w, L->self_attn.k.b, total);
        at_k()->linear(V, in, &L->self_attn.v.w, L->self_attn.v.b, total);
        scale_queries(c, Q, (size_t)total * c->enc_inner, hd);
        const enc_attention_job j = {C, Q, K, V, w->bias, off, len, enc_self, w->scratch, c->enc_inner, H, hd, l,
                                     max_len};
        /* sentences in parallel; fewer sentences than threads (a speech window): each one's
         * heads in parallel instead (a loop inside at_parallel_for never forks) */
        if (n < at_threads()) enc_attention(&j, 0, n, 0);
        else at_parallel_for(n, at_threads(), enc_attention, &j);
        at_k()->linear(Q, C, &L->self_attn.o.w, L->self_attn.o.b, total);
        sublayer_out(c, X, Q, &L->self_attn_norm, total);
        /* feed-forward: F [total, enc_ffn] */
        ffn_rows(c, Q, sublayer_in(c, X, w->Hn, &L->ffn_norm, total), &L->fc1, &L->gate, &L->fc2, w->F, w->G,
                 total);
        sublayer_out(c, X, Q, &L->ffn_norm, total);
    }
    if (c->family->final_norms) norm_rows(c, X, &m->enc_final_norm, total);
    return 0;
}

static int longest(const int *len, int n) {
    int max_len = 1;
    for (int i = 0; i < n; i++) max_len = len[i] > max_len ? len[i] : max_len;
    return max_len;
}

int encode(const s2s_model *m, const int *const *ids, const int *off, const int *len, int n,
           int total, float *X, float *const *enc_self, const volatile int *stop) {
    const s2s_config *c = &m->c;
    const int d = c->d_model, max_len = longest(len, n);
    const float escale = embed_scale(c);
    enc_work w;
    if (enc_work_alloc(&w, c, n, total, max_len)) return -1;
    /* X [total, d]: token embedding * scale + position, sentence by sentence */
    for (int i = 0; i < n; i++)
        for (int j = 0, pads = 0; j < len[i]; j++) {
            const int id = ids[i][j];
            embed_row(X + (size_t)(off[i] + j) * d, &m->enc_embed, id, escale,
                      s2s_position(m, 0, s2s_position_of(c, id, j, pads), w.pos), d);
            pads += id == c->pad_id;
        }
    const int rc = encode_stack(m, &w, off, len, n, total, max_len, X, enc_self, stop);
    at_block_free(w.block, w.bytes);
    return rc;
}

int encode_audio(const s2s_model *m, const float *const *mels, const int *off, const int *len, int n,
                 int total, float *X, float *const *enc_self, const volatile int *stop) {
    const int max_len = longest(len, n);
    enc_work w;
    if (enc_work_alloc(&w, &m->c, n, total, max_len)) return -1;
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) rc = encode_audio_input(m, mels[i], X + (size_t)off[i] * m->c.d_model);
    if (!rc) rc = encode_stack(m, &w, off, len, n, total, max_len, X, enc_self, stop);
    at_block_free(w.block, w.bytes);
    return rc;
}

/* Keys and values a decoder step reads all of (every row's cross and self attention) live in
 * blocks from at_alloc_weights, on huge pages where the system gives them: through 4 KiB
 * pages nearly every row of keys missed the TLB (a batch-64 step reads about 60 MB of them).
 * at_block_alloc keeps them for the thread's next batch. */
/* rows [total, H * hd] of a linear layer's output into dst, each sentence's rows head by head
 * ([H][len][hd] from its first row's place) */
static void heads_apart(float *dst, const float *rows, const enc_memory *mem, int H, int hd) {
    const size_t d = (size_t)H * hd;
    for (int i = 0; i < mem->n; i++) {
        const size_t o = (size_t)mem->off[i] * d, len = (size_t)mem->len[i];
        for (size_t t = 0; t < len; t++)
            for (int h = 0; h < H; h++)
                memcpy(dst + o + ((size_t)h * len + t) * hd, rows + o + t * d + (size_t)h * hd, sizeof(float) * hd);
    }
}

int cross_kv(const s2s_model *m, const float *X, enc_memory *mem) {
    const int L = m->c.dec_layers, H = m->c.dec_heads, hd = m->c.dec_hd;
    const size_t td = (size_t)mem->total * m->c.dec_inner;
    mem->cross_k = calloc((size_t)L, sizeof(float *));
    mem->cross_v = calloc((size_t)L, sizeof(float *));
    mem->cross_bytes = sizeof(float) * td * 2 * (size_t)L;
    mem->cross_block = at_block_alloc(mem->cross_bytes);
    float *rows = at_block_alloc(sizeof(float) * td);
    if (!mem->cross_k || !mem->cross_v || !mem->cross_block || !rows) {
        at_block_free(rows, sizeof(float) * td);
        return -1;
    }
    for (int l = 0; l < L; l++) {
        mem->cross_k[l] = mem->cross_block + td * 2 * (size_t)l;
        mem->cross_v[l] = mem->cross_k[l] + td;
        at_k()->linear(rows, X, &m->dec[l].cross_attn.k.w, m->dec[l].cross_attn.k.b, mem->total);
        heads_apart(mem->cross_k[l], rows, mem, H, hd);
        at_k()->linear(rows, X, &m->dec[l].cross_attn.v.w, m->dec[l].cross_attn.v.b, mem->total);
        heads_apart(mem->cross_v[l], rows, mem, H, hd);
    }
    at_block_free(rows, sizeof(float) * td);
    return 0;
}

void enc_memory_free(const s2s_model *m, enc_memory *mem) {
    (void)m;
    at_block_free(mem->cross_block, mem->cross_bytes);
    free(mem->cross_k);
    free(mem->cross_v);
    free(mem->align_k);
    mem->cross_k = mem->cross_v = NULL;
    mem->align_k = NULL;
    mem->cross_block = NULL;
}
