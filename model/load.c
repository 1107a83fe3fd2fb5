/* Loading a checkpoint of any family: the container opened, the configuration read
 * (model/config.c), every tensor checked against it and bound by name, the tokenizer's parts
 * loaded (tokenizer/setup.c) and the position table made (model/positions.c); and freeing
 * it. Checking the content (model/verify.c) and packing (model/pack.c) come after. */
#include "load.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tokenizer/bpe.h"
#include "../tokenizer/text.h"
#include "align.h"

/* ---------------------------------------------------------------------------------------
 * Binding tensors by name, checked against the configuration */

typedef struct {
    const gguf_file *f;
    char *err;
    size_t errlen;
    unsigned char *used; /* per tensor: bound by name; leftovers are rejected */
    int any_f16;
    int any_i8;
    uint32_t version;  /* attend.format_version of the file */
    s2s_model *m;   /* owns the int8 row sums */
} binder;

/* Find tensor `name` with shape [rows, cols] (cols = 0: a vector of rows). */
static const gguf_tensor *find(binder *b, const char *name, int rows, int cols) {
    const gguf_tensor *t = gguf_find_tensor(b->f, name);
    if (!t) {
        s2s_fail(b->err, b->errlen, "tensor %s: missing", name);
        return NULL;
    }
    int want_dims = cols ? 2 : 1;
    if ((int)t->n_dims != want_dims || (cols ? (t->ne[0] != (uint64_t)cols || t->ne[1] != (uint64_t)rows)
                                            : t->ne[0] != (uint64_t)rows)) {
        char got[96];
        if (t->n_dims == 1) snprintf(got, sizeof got, "[%llu]", (unsigned long long)t->ne[0]);
        else snprintf(got, sizeof got, "[%llu, %llu%s]", (unsigned long long)t->ne[t->n_dims - 1],
                      (unsigned long long)t->ne[t->n_dims - 2], t->n_dims > 2 ? ", ..." : "");
        if (cols) s2s_fail(b->err, b->errlen, "tensor %s: shape %s, expected [%d, %d]", name, got, rows, cols);
        else s2s_fail(b->err, b->errlen, "tensor %s: shape %s, expected [%d]", name, got, rows);
        return NULL;
    }
    b->used[t - gguf_tensor_at(b->f, 0)] = 1;
    return t;
}

static int bind_vector(binder *b, const float **v, const char *name, int n);
static int bind_floats(binder *b, const float **v, const char *name, int rows, int cols);

static int bind_matrix(binder *b, at_matrix *m, const char *name, int rows, int cols) {
    const gguf_tensor *t = find(b, name, rows, cols);
    if (!t) return -1;
    const int i8_ok = b->version >= 2;
    if (t->type != GGUF_T_F32 && t->type != GGUF_T_F16 && !(t->type == GGUF_T_I8 && i8_ok)) {
        s2s_fail(b->err, b->errlen, "tensor %s: dtype %s, expected f32 or f16%s", name,
                 gguf_tensor_type_name(t->type), i8_ok ? " or i8" : " (i8 needs format version 2)");
        return -1;
    }
    m->data = t->data;
    m->dtype = t->type == GGUF_T_F16 ? AT_F16 : t->type == GGUF_T_I8 ? AT_I8 : AT_F32;
    m->rows = rows;
    m->cols = cols;
    m->scale = NULL;
    m->wsum = NULL;
    if (m->dtype == AT_F16) b->any_f16 = 1;
    if (m->dtype == AT_I8) { /* per-row scales beside it; row sums for the VNNI kernels */
        char sname[160];
        snprintf(sname, sizeof sname, "%s.scale", name);
        if (bind_vector(b, &m->scale, sname, rows)) return -1;
        for (int r = 0; r < rows; r++)
            if (!isfinite(m->scale[r]) || m->scale[r] < 0) {
                s2s_fail(b->err, b->errlen, "tensor %s: row %d scale is not a finite non-negative number", sname, r);
                return -1;
            }
        int32_t **owned = realloc(b->m->i8_sums, sizeof(int32_t *) * (size_t)(b->m->n_i8_sums + 1));
        int32_t *sums = owned ? at_matrix_i8_sums(t->data, rows, cols) : NULL;
        if (owned) b->m->i8_sums = owned;
        if (!sums) {
            s2s_fail(b->err, b->errlen, "out of memory");
            return -1;
        }
        owned[b->m->n_i8_sums++] = sums;
        m->wsum = sums;
        b->any_i8 = 1;
    }
    return 0;
}

static int bind_vector(binder *b, const float **v, const char *name, int n) {
    return bind_floats(b, v, name, n, 0);
}

/* An f32 tensor [rows, cols] (cols 0: a vector), copied out of the mapping by s2s_pack. */
static int bind_floats(binder *b, const float **v, const char *name, int rows, int cols) {
    const int n = cols ? rows * cols : rows;
    const gguf_tensor *t = find(b, name, rows, cols);
    if (!t) return -1;
    if (t->type != GGUF_T_F32) {
        s2s_fail(b->err, b->errlen, "tensor %s: dtype %s, expected f32", name,
                 gguf_tensor_type_name(t->type));
        return -1;
    }
    *v = t->data;
    s2s_model *m = b->m;
    if (m->n_vec_refs % 256 == 0) { /* s2s_pack copies it out of the mapping */
        s2s_vector_ref *r = realloc(m->vec_refs, sizeof *r * (size_t)(m->n_vec_refs + 256));
        if (!r) {
            s2s_fail(b->err, b->errlen, "out of memory");
            return -1;
        }
        m->vec_refs = r;
    }
    m->vec_refs[m->n_vec_refs++] = (s2s_vector_ref){v, n};
    return 0;
}

/* A linear layer: its weight, and its bias where the family has them (else b = NULL). */
static int bind_linear(binder *b, linear *l, const char *prefix, int out, int in) {
    char name[128];
    snprintf(name, sizeof name, "%s.weight", prefix);
    if (bind_matrix(b, &l->w, name, out, in)) return -1;
    l->b = NULL;
    if (!b->m->c.family->biases) return 0;
    snprintf(name, sizeof name, "%s.bias", prefix);
    return bind_vector(b, &l->b, name, out);
}

/* A LayerNorm's gain and bias; an RMS norm's gain only. */
static int bind_norm(binder *b, norm *n, const char *prefix, int d) {
    char name[128];
    snprintf(name, sizeof name, "%s.weight", prefix);
    if (bind_vector(b, &n->g, name, d)) return -1;
    n->b = NULL;
    if (b->m->c.family->rms_norm) return 0;
    snprintf(name, sizeof name, "%s.bias", prefix);
    return bind_vector(b, &n->b, name, d);
}

/* q, k, v: [inner, d]; o: [d, inner] (inner = heads * head width, d_model but in T5). */
static int bind_attn(binder *b, attn_weights *a, const char *prefix, int d, int inner) {
    char name[128];
    const char *parts[4] = {"q", "k", "v", "o"};
    linear *dst[4] = {&a->q, &a->k, &a->v, &a->o};
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s.%s", prefix, parts[i]);
        if (bind_linear(b, dst[i], name, i < 3 ? inner : d, i < 3 ? d : inner)) return -1;
    }
    return 0;
}

/* fc1 [ffn, d], the gate [ffn, d] of a gated FFN, fc2 [d, ffn]. */
static int bind_ffn(binder *b, linear *fc1, linear *gate, linear *fc2, const char *prefix, int d, int ffn) {
    char p[112];
    snprintf(p, sizeof p, "%s.ffn.fc1", prefix);
    if (bind_linear(b, fc1, p, ffn, d)) return -1;
    snprintf(p, sizeof p, "%s.ffn.gate", prefix);
    if (b->m->c.gated_ffn && bind_linear(b, gate, p, ffn, d)) return -1;
    snprintf(p, sizeof p, "%s.ffn.fc2", prefix);
    return bind_linear(b, fc2, p, d, ffn);
}

/* The embeddings, the output projection and the family's extras around the stacks
 * (logits bias, learned positions, embedding LayerNorms); shared and tied matrices are
 * bound once. */
static int bind_audio_input(s2s_model *m, binder *b);

static int bind_embeddings(s2s_model *m, binder *b) {
    const s2s_config *c = &m->c;
    const int d = c->d_model;
    if (c->family->audio) {
        if (bind_audio_input(m, b)) return -1;
    } else if (bind_matrix(b, &m->enc_embed, "enc.embed.weight", c->vocab_size, d)) {
        return -1;
    }
    if (c->shared_embeddings && !c->family->audio) m->dec_embed = m->enc_embed;
    else if (bind_matrix(b, &m->dec_embed, "dec.embed.weight", c->decoder_vocab_size, d)) return -1;
    if (c->tied_output) m->out_proj = m->dec_embed;
    else if (bind_matrix(b, &m->out_proj, "lm_head.weight", c->decoder_vocab_size, d)) return -1;
    const s2s_family *fam = c->family;
    if (fam->logits_bias && bind_vector(b, &m->final_logits_bias, "final_logits_bias", c->decoder_vocab_size))
        return -1;
    const int rows = c->max_pos + fam->pos_offset;
    if (fam->positions == POS_LEARNED &&
        ((!fam->audio && bind_matrix(b, &m->enc_pos, "enc.embed_positions.weight", rows, d)) ||
         bind_matrix(b, &m->dec_pos, "dec.embed_positions.weight", rows, d)))
        return -1;
    if (fam->embed_norm && (bind_norm(b, &m->enc_embed_norm, "enc.embed_norm", d) ||
                            bind_norm(b, &m->dec_embed_norm, "dec.embed_norm", d)))
        return -1;
    const int rel = c->rel_buckets * c->enc_heads;
    if (fam->positions == POS_RELATIVE && (bind_vector(b, &m->enc_rel_bias, "enc.relative_bias", rel) ||
                                           bind_vector(b, &m->dec_rel_bias, "dec.relative_bias", rel)))
        return -1;
    return 0;
}

/* A u32 array key of values below `lim`, copied (the mapping's arrays are unaligned) into
 * *out (owned by the model) with their count. */
static int bind_ids(binder *b, const char *key, int lim, int **out, int *n) {
    const gguf_kv *kv = gguf_get_array(b->f, key, GGUF_U32, b->err, b->errlen);
    if (!kv) return -1;
    if (kv->count > 1u << 20) {
        s2s_fail(b->err, b->errlen, "key %s: %llu entries", key, (unsigned long long)kv->count);
        return -1;
    }
    *n = (int)kv->count;
    *out = malloc(sizeof(int) * (size_t)(*n + 1));
    if (!*out) {
        s2s_fail(b->err, b->errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < *n; i++) {
        uint32_t v;
        memcpy(&v, kv->data + 4 * (size_t)i, 4);
        if (v >= (uint32_t)lim) {
            s2s_fail(b->err, b->errlen, "key %s: entry %d = %u outside 0..%d", key, i, v, lim - 1);
            return -1;
        }
        (*out)[i] = (int)v;
    }
    return 0;
}

/* The speech encoder's input side: two convolutions as linear layers over three stacked
 * frames, the encoder's position table, the optional mel filter bank; and the decoding
 * lists (suppressed tokens, alignment heads). */
static int bind_audio_input(s2s_model *m, binder *b) {
    const s2s_config *c = &m->c;
    const int d = c->d_model, mels = c->speech.n_mels;
    if (bind_matrix(b, &m->conv1.w, "enc.conv1.weight", d, 3 * mels) ||
        bind_vector(b, &m->conv1.b, "enc.conv1.bias", d) ||
        bind_matrix(b, &m->conv2.w, "enc.conv2.weight", d, 3 * d) ||
        bind_vector(b, &m->conv2.b, "enc.conv2.bias", d) ||
        bind_matrix(b, &m->enc_pos, "enc.embed_positions.weight", c->speech.n_frames, d))
        return -1;
    m->mel_filters = NULL;
    if (gguf_find_tensor(b->f, "enc.mel_filters") &&
        bind_vector(b, &m->mel_filters, "enc.mel_filters", mels * 201))
        return -1;
    const int lim = c->dec_layers > c->dec_heads ? c->dec_layers : c->dec_heads;
    if (bind_ids(b, "whisper.suppress_tokens", c->decoder_vocab_size, &m->suppress_ids, &m->n_suppress_ids) ||
        bind_ids(b, "whisper.begin_suppress_tokens", c->decoder_vocab_size, &m->begin_suppress_ids,
                 &m->n_begin_suppress_ids) ||
        bind_ids(b, "whisper.alignment_heads", lim, &m->alignment_heads, &m->n_alignment_heads))
        return -1;
    if (m->n_alignment_heads % 2 || !m->n_alignment_heads) {
        s2s_fail(b->err, b->errlen, "key whisper.alignment_heads: not (layer, head) pairs");
        return -1;
    }
    for (int i = 0; i < m->n_alignment_heads; i += 2)
        if (m->alignment_heads[i] >= c->dec_layers || m->alignment_heads[i + 1] >= c->dec_heads) {
            s2s_fail(b->err, b->errlen, "key whisper.alignment_heads: pair %d names a layer or head the decoder lacks",
                     i / 2);
            return -1;
        }
    m->n_alignment_heads /= 2;
    return 0;
}

/* Encoder layer i: enc.<i>.self_attn, .self_attn_norm, .ffn.fc1, .ffn.fc2, .ffn_norm. */
static int bind_enc_layer(binder *b, enc_layer *L, int i, const s2s_config *c) {
    const int d = c->d_model;
    char p[96];
    snprintf(p, sizeof p, "enc.%d.self_attn", i);
    if (bind_attn(b, &L->self_attn, p, d, c->enc_inner)) return -1;
    snprintf(p, sizeof p, "enc.%d.self_attn_norm", i);
    if (bind_norm(b, &L->self_attn_norm, p, d)) return -1;
    snprintf(p, sizeof p, "enc.%d", i);
    if (bind_ffn(b, &L->fc1, &L->gate, &L->fc2, p, d, c->enc_ffn)) return -1;
    snprintf(p, sizeof p, "enc.%d.ffn_norm", i);
    return bind_norm(b, &L->ffn_norm, p, d);
}

/* Decoder layer i: the encoder's parts plus .cross_attn and .cross_attn_norm. */
static int bind_dec_layer(binder *b, dec_layer *L, int i, const s2s_config *c) {
    const int d = c->d_model;
    char p[96];
    snprintf(p, sizeof p, "dec.%d.self_attn", i);
    if (bind_attn(b, &L->self_attn, p, d, c->dec_inner)) return -1;
    snprintf(p, sizeof p, "dec.%d.self_attn_norm", i);
    if (bind_norm(b, &L->self_attn_norm, p, d)) return -1;
    snprintf(p, sizeof p, "dec.%d.cross_attn", i);
    if (bind_attn(b, &L->cross_attn, p, d, c->dec_inner)) return -1;
    snprintf(p, sizeof p, "dec.%d.cross_attn_norm", i);
    if (bind_norm(b, &L->cross_attn_norm, p, d)) return -1;
    snprintf(p, sizeof p, "dec.%d", i);
    if (bind_ffn(b, &L->fc1, &L->gate, &L->fc2, p, d, c->dec_ffn)) return -1;
    snprintf(p, sizeof p, "dec.%d.ffn_norm", i);
    return bind_norm(b, &L->ffn_norm, p, d);
}

/* The trained alignment head's f32 tensors (align_head.{q,k}.{weight,bias}: [width, d] and
 * [width]) when the file's keys name one (model/config.c). */
static int bind_align_head(binder *b, s2s_model *m) {
    const int w = m->c.align_head_width, d = m->c.d_model;
    if (w <= 0) return 0;
    if (bind_floats(b, &m->align_q_w, ATTEND_ALIGN_HEAD_TENSORS ".q.weight", w, d) ||
        bind_floats(b, &m->align_q_b, ATTEND_ALIGN_HEAD_TENSORS ".q.bias", w, 0) ||
        bind_floats(b, &m->align_k_w, ATTEND_ALIGN_HEAD_TENSORS ".k.weight", w, d) ||
        bind_floats(b, &m->align_k_b, ATTEND_ALIGN_HEAD_TENSORS ".k.bias", w, 0))
        return -1;
    return 0;
}

/* Every tensor the configuration names, in order; then no tensor may be left over. */
static int bind_all(s2s_model *m, binder *b) {
    const s2s_config *c = &m->c;
    if (bind_embeddings(m, b)) return -1;
    m->enc = calloc((size_t)c->enc_layers, sizeof(enc_layer));
    m->dec = calloc((size_t)c->dec_layers, sizeof(dec_layer));
    if (!m->enc || !m->dec) {
        s2s_fail(b->err, b->errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < c->enc_layers; i++)
        if (bind_enc_layer(b, &m->enc[i], i, c)) return -1;
    for (int i = 0; i < c->dec_layers; i++)
        if (bind_dec_layer(b, &m->dec[i], i, c)) return -1;
    if (c->family->final_norms && (bind_norm(b, &m->enc_final_norm, "enc.final_norm", c->d_model) ||
                                   bind_norm(b, &m->dec_final_norm, "dec.final_norm", c->d_model)))
        return -1;
    if (bind_align_head(b, m)) return -1;
    for (uint64_t i = 0; i < gguf_tensor_count(b->f); i++)
        if (!b->used[i]) {
            s2s_fail(b->err, b->errlen, "tensor %s: not part of this model's configuration",
                     gguf_tensor_at(b->f, i)->name);
            return -1;
        }
    m->dtype = b->any_i8 ? AT_I8 : b->any_f16 ? AT_F16 : AT_F32;
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Load / free */

/* Everything after opening the container: config, tensors, tokenizer. Frees m on failure. */
static s2s_model *load_opened(s2s_model *m, char *err, size_t errlen);

s2s_model *s2s_load(const char *path, char *err, size_t errlen) {
    s2s_model *m = calloc(1, sizeof *m);
    if (!m) {
        s2s_fail(err, errlen, "out of memory");
        return NULL;
    }
    m->file = gguf_open(path, err, errlen);
    return load_opened(m, err, errlen);
}

s2s_model *s2s_load_buffer(const void *buf, size_t len, char *err, size_t errlen) {
    s2s_model *m = calloc(1, sizeof *m);
    if (!m) {
        s2s_fail(err, errlen, "out of memory");
        return NULL;
    }
    m->file = gguf_open_buffer(buf, len, err, errlen);
    return load_opened(m, err, errlen);
}

/* Every tensor bound (bind_all); the CRC-32 list must have one entry per tensor. */
static int bind_tensors(s2s_model *m, char *err, size_t errlen) {
    binder b = {m->file, err, errlen, NULL, 0, 0, 0, m};
    b.used = calloc(gguf_tensor_count(m->file) + 1, 1);
    if (!b.used) {
        s2s_fail(err, errlen, "out of memory");
        return -1;
    }
    const int bad = gguf_get_u32(m->file, "attend.format_version", &b.version, err, errlen) || bind_all(m, &b);
    free(b.used);
    if (bad) return -1;
    const gguf_kv *crc = gguf_get_array(m->file, "attend.tensor_crc32", GGUF_U32, err, errlen);
    if (!crc) return -1;
    if (crc->count != gguf_tensor_count(m->file)) {
        s2s_fail(err, errlen, "key attend.tensor_crc32: %llu entries for %llu tensors",
                 (unsigned long long)crc->count, (unsigned long long)gguf_tensor_count(m->file));
        return -1;
    }
    return 0;
}

static s2s_model *load_opened(s2s_model *m, char *err, size_t errlen) {
    if (!m->file || s2s_read_config(m->file, &m->c, err, errlen) || bind_tensors(m, err, errlen) ||
        s2s_tokenizer_load(m, err, errlen) || s2s_tasks_load(m, err, errlen))
        goto fail;
    if (s2s_positions_init(m)) {
        s2s_fail(err, errlen, "out of memory");
        goto fail;
    }
    return m;
fail:
    s2s_free(m);
    return NULL;
}

s2s_model *s2s_load_verified(const char *path, char *err, size_t errlen) {
    s2s_model *m = s2s_load(path, err, errlen);
    if (m && s2s_verify(m, err, errlen)) {
        s2s_free(m);
        return NULL;
    }
    return m;
}

s2s_model *s2s_load_for_inference(const char *path, char *err, size_t errlen) {
    s2s_model *m = s2s_load_verified(path, err, errlen);
    if (m && s2s_pack(m, err, errlen)) {
        s2s_free(m);
        return NULL;
    }
    return m;
}

void s2s_free(s2s_model *m) {
    if (!m) return;
    free(m->packed);
    free(m->vectors);
    free(m->vec_refs);
    spm_free(m->src_spm);
    spm_free(m->tgt_spm);
    bpe_free(m->bpe);
    vocab_free(m->src_vocab);
    vocab_free(m->tgt_vocab);
    free(m->positions);
    for (int i = 0; m->lang_code && i < m->n_langs; i++) free(m->lang_code[i]);
    free(m->lang_code);
    free(m->lang_id);
    free(m->added_id);
    free(m->suppress_ids);
    free(m->begin_suppress_ids);
    free(m->alignment_heads);
    s2s_tasks_free(m);
    for (int i = 0; i < m->n_i8_sums; i++) free(m->i8_sums[i]);
    free(m->i8_sums);
    free(m->enc);
    free(m->dec);
    gguf_close(m->file);
    free(m);
}
