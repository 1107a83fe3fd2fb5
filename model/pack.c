/* Packing a loaded model for inference (s2s_pack): every linear layer's matrix copied into
 * the packed layout the kernels read fastest, the vectors (biases, norms, int8 scales) into
 * one owned block, and the file mapping's tensor pages let go, so that the resident size
 * stays about one model's. */
#include "load.h"
#include "../engine/bf16.h"

#include <stdlib.h>
#include <string.h>

/* The linear layers' matrices into out (when not NULL), the output projection first:
 * packing the biggest first keeps the peak memory near the final size (see s2s_pack).
 * Returns how many there are. */
static int linear_matrices(s2s_model *m, at_matrix **out) {
    int n = 0;
#define PUT(x) (out ? (void)(out[n] = (x)) : (void)0, n++)
    PUT(&m->out_proj);
    if (m->c.family->audio) { /* the speech encoder's convolutions */
        PUT(&m->conv1.w);
        PUT(&m->conv2.w);
    }
    for (int l = 0; l < m->c.enc_layers; l++) {
        enc_layer *L = &m->enc[l];
        linear *ls[] = {&L->self_attn.q, &L->self_attn.k, &L->self_attn.v, &L->self_attn.o, &L->fc1, &L->fc2};
        for (size_t i = 0; i < sizeof ls / sizeof *ls; i++) PUT(&ls[i]->w);
        if (m->c.gated_ffn) PUT(&L->gate.w);
    }
    for (int l = 0; l < m->c.dec_layers; l++) {
        dec_layer *L = &m->dec[l];
        linear *ls[] = {&L->self_attn.q, &L->self_attn.k, &L->self_attn.v, &L->self_attn.o, &L->cross_attn.q,
                        &L->cross_attn.k, &L->cross_attn.v, &L->cross_attn.o, &L->fc1, &L->fc2};
        for (size_t i = 0; i < sizeof ls / sizeof *ls; i++) PUT(&ls[i]->w);
        if (m->c.gated_ffn) PUT(&L->gate.w); /* T5's gated FFN */
    }
#undef PUT
    return n;
}

static void release_matrix(const s2s_model *m, const at_matrix *w) {
    if (!w->packed) gguf_release(m->file, w->data, at_matrix_elems(w) * (uint64_t)at_dtype_size(w->dtype));
}

/* The vectors (biases, norms, int8 scales) copied out of the mapping into one owned block,
 * so that after packing nothing reads the mapping's tensor bytes any more. Otherwise reading
 * a few vectors maps whole page-cache folios around them (up to 2 MiB each with large
 * folios), and the file's pages stay resident beside the packed copy: 200 MiB of a 600 MB
 * int8 model. Vectors bound twice (tied embeddings' scales) are copied once. */
static int pack_vectors(s2s_model *m, char *err, size_t errlen) {
    if (m->vectors) return 0; /* a s2s_pack that failed later copied them already */
    const int n = m->n_vec_refs;
    const float **from = malloc(sizeof *from * (size_t)(n ? n : 1));
    float **to = malloc(sizeof *to * (size_t)(n ? n : 1));
    size_t total = 0;
    for (int i = 0; i < n; i++) total += ((size_t)m->vec_refs[i].n + 15) / 16 * 16; /* 64-byte aligned each */
    float *block = from && to ? at_alloc_weights(sizeof(float) * (total ? total : 1)) : NULL;
    if (!block) {
        free(from);
        free(to);
        s2s_fail(err, errlen, "out of memory");
        return -1;
    }
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        const s2s_vector_ref *r = &m->vec_refs[i];
        from[i] = *r->ref;
        to[i] = NULL;
        for (int j = 0; j < i && !to[i]; j++)
            if (from[j] == from[i] && m->vec_refs[j].n >= r->n) to[i] = to[j];
        if (!to[i]) {
            to[i] = block + off;
            memcpy(to[i], from[i], sizeof(float) * (size_t)r->n);
            off += ((size_t)r->n + 15) / 16 * 16;
        }
    }
    for (int i = 0; i < n; i++) *m->vec_refs[i].ref = to[i];
    free(from);
    free(to);
    m->vectors = block;
    return 0;
}

/* Let go of the mapping's tensor bytes, from the first tensor to the end of the last
 * (re-reading a page comes from the page cache). */
static void release_tensors(const s2s_model *m) {
    const uint8_t *lo = NULL, *hi = NULL;
    for (uint64_t i = 0; i < gguf_tensor_count(m->file); i++) {
        const gguf_tensor *t = gguf_tensor_at(m->file, i);
        const uint8_t *a = t->data, *e = a + t->nbytes;
        if (!lo || a < lo) lo = a;
        if (!hi || e > hi) hi = e;
    }
    if (lo) gguf_release(m->file, lo, (uint64_t)(hi - lo));
}

int s2s_pack(s2s_model *m, char *err, size_t errlen) {
    if (m->packed) return 0;
    const int n = linear_matrices(m, NULL);
    at_matrix **mats = malloc(sizeof *mats * (size_t)n);
    if (!mats) {
        s2s_fail(err, errlen, "out of memory");
        return -1;
    }
    linear_matrices(m, mats);
    /* the vectors first, while s2s_verify's reading keeps the mapping in */
    if (pack_vectors(m, err, errlen)) {
        free(mats);
        return -1;
    }
    size_t total = 0; /* one block for all: small matrices get huge pages too */
    for (int i = 0; i < n; i++) total += m->bf16 ? at_matrix_bf16_bytes(mats[i]) : at_matrix_packed_bytes(mats[i]);
    char *block = at_alloc_weights(total);
    if (!block) {
        free(mats);
        s2s_fail(err, errlen, "out of memory");
        return -1;
    }
    m->packed = block;
    /* s2s_verify read every page in: let them go first, so the peak is about one
     * model's size, not two (re-reading a page comes from the page cache) */
    release_tensors(m);
    const void *proj_rows = m->out_proj.data;
    for (int i = 0; i < n; i++) {
        const at_matrix before = *mats[i];
        const size_t bytes = m->bf16 ? at_matrix_bf16_bytes(mats[i]) : at_matrix_packed_bytes(mats[i]);
        if (m->bf16) at_matrix_to_bf16_into(mats[i], block);
        else at_matrix_pack_into(mats[i], block);
        block += bytes;
        release_matrix(m, &before);
    }
    /* tied embeddings read rows of the same (now packed) matrix */
    if (m->enc_embed.data == proj_rows) m->enc_embed = m->out_proj;
    if (m->dec_embed.data == proj_rows) m->dec_embed = m->out_proj;
    free(mats);
    release_tensors(m); /* pages mapped with a neighbour's folio */
    return 0;
}
