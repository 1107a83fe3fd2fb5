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
