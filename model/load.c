/* Loading a checkpoint of any family: config from GGUF keys (the family's switches from
 * general.architecture), tensors checked and bound by name. */
#include "seq2seq.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../engine/pool.h"

static void fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* At most 40 bytes of a file string for a message, control bytes as '?' (one-line errors). */
static const char *shown(char *buf, size_t n, gguf_str s) {
    size_t k = 0;
    for (uint64_t i = 0; i < s.len && i < 40 && k + 1 < n; i++) {
        unsigned char ch = (unsigned char)s.ptr[i];
        buf[k++] = ch < 32 || ch == 127 ? '?' : (char)ch;
    }
    buf[k] = 0;
    return buf;
}

/* ---------------------------------------------------------------------------------------
 * Config */

static int get_int(const gguf_file *f, const char *key, int lo, int hi, int *out, char *err,
                   size_t errlen) {
    uint32_t v;
    if (gguf_get_u32(f, key, &v, err, errlen)) return -1;
    if (v < (uint32_t)lo || v > (uint32_t)hi) {
        fail(err, errlen, "key %s: value %u outside %d..%d", key, v, lo, hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* Optional keys: absent leaves *out as it is. */
static int opt_int(const gguf_file *f, const char *key, int lo, int hi, int *out, char *err, size_t errlen) {
    return gguf_find_kv(f, key) ? get_int(f, key, lo, hi, out, err, errlen) : 0;
}

static int opt_f32(const gguf_file *f, const char *key, float lo, float hi, float *out, char *err,
                   size_t errlen) {
    if (!gguf_find_kv(f, key)) return 0;
    float v;
    if (gguf_get_f32(f, key, &v, err, errlen)) return -1;
    if (!(v >= lo && v <= hi)) {
        fail(err, errlen, "key %s: value %g outside %g..%g", key, v, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

/* The generation defaults (HF's class defaults where a key is absent) and the tokenizer's
 * source limit. */
static int read_generation(const gguf_file *f, s2s_config *c, char *err, size_t errlen) {
    s2s_generation *g = &c->gen;
    *g = (s2s_generation){0, 1, 0, 0, 0, 0, 1.0f, 1.0f};
    g->recorded = gguf_find_kv(f, "generation.num_beams") != NULL;
    int lim = c->max_pos;
    if (opt_int(f, "generation.num_beams", 1, 1024, &g->num_beams, err, errlen) ||
        opt_f32(f, "generation.length_penalty", -100.0f, 100.0f, &g->length_penalty, err, errlen) ||
        opt_int(f, "generation.early_stopping", 0, 2, &g->early_stopping, err, errlen) ||
        opt_int(f, "generation.min_length", 0, 1 << 20, &g->min_length, err, errlen) ||
        opt_int(f, "generation.no_repeat_ngram_size", 0, 1 << 20, &g->no_repeat_ngram, err, errlen) ||
        opt_f32(f, "generation.repetition_penalty", 1e-6f, 1e6f, &g->repetition_penalty, err, errlen) ||
        opt_int(f, "tokenizer.model_max_length", 1, 1 << 30, &lim, err, errlen))
        return -1;
    if (gguf_find_kv(f, "generation.renormalize_logits") &&
        gguf_get_bool(f, "generation.renormalize_logits", &g->renormalize, err, errlen))
        return -1;
    c->model_max_length = lim < c->max_pos ? lim : c->max_pos;
    return 0;
}

/* The families: Marian's switches keep its behaviour exactly as before families existed. */
static const s2s_family FAMILIES[] = {
    /* name      pre  final emb_ln positions    bias ban_pad codes unk_sp langs mask */
    {"marian",   0,   0,    0,     POS_MARIAN,  1,   1,      1,    1,     0,    0},
    {"m2m_100",  1,   1,    0,     POS_FAIRSEQ, 0,   0,      0,    0,     1,    0},
    {"mbart",    1,   1,    1,     POS_LEARNED, 1,   0,      0,    0,     1,    1},
};

static const s2s_family *find_family(gguf_str s) {
    for (size_t i = 0; i < sizeof FAMILIES / sizeof *FAMILIES; i++)
        if (s.len == strlen(FAMILIES[i].name) && !memcmp(s.ptr, FAMILIES[i].name, s.len)) return &FAMILIES[i];
    return NULL;
}

/* "<family>.<name>": the family's hyperparameter keys (GGUF's convention) */
static const char *fkey(const s2s_config *c, const char *name) {
    static _Thread_local char buf[96];
    snprintf(buf, sizeof buf, "%s.%s", c->family->name, name);
    return buf;
}

static int read_config(const gguf_file *f, s2s_config *c, char *err, size_t errlen) {
    gguf_str s;
    uint32_t version;
    if (gguf_get_str(f, "general.architecture", &s, err, errlen)) return -1;
    c->family = find_family(s);
    if (!c->family) {
        char b[48];
        fail(err, errlen, "key general.architecture: '%s' is not a family attend runs (marian, m2m_100, mbart)",
             shown(b, sizeof b, s));
        return -1;
    }
    const int marian = c->family->positions == POS_MARIAN;
    if (gguf_get_u32(f, "attend.format_version", &version, err, errlen)) return -1;
    if (version == 0 || version > S2S_FORMAT_VERSION) {
        fail(err, errlen, "attend format version %u; this attend reads versions 1..%d "
             "(re-export the model or update attend)", version, S2S_FORMAT_VERSION);
        return -1;
    }
    const int BIG = 1 << 24;
    /* fairseq positions divide by d/2 - 1: at least 4 columns */
    const int min_d = c->family->positions == POS_FAIRSEQ ? 4 : 2;
    if (get_int(f, fkey(c, "vocab_size"), 3, BIG, &c->vocab_size, err, errlen) ||
        get_int(f, fkey(c, "decoder_vocab_size"), 3, BIG, &c->decoder_vocab_size, err, errlen) ||
        get_int(f, fkey(c, "d_model"), min_d, 65536, &c->d_model, err, errlen) ||
        get_int(f, fkey(c, "encoder_layers"), 1, 256, &c->enc_layers, err, errlen) ||
        get_int(f, fkey(c, "decoder_layers"), 1, 256, &c->dec_layers, err, errlen) ||
        get_int(f, fkey(c, "encoder_heads"), 1, 1024, &c->enc_heads, err, errlen) ||
        get_int(f, fkey(c, "decoder_heads"), 1, 1024, &c->dec_heads, err, errlen) ||
        get_int(f, fkey(c, "encoder_ffn_dim"), 1, 1 << 20, &c->enc_ffn, err, errlen) ||
        get_int(f, fkey(c, "decoder_ffn_dim"), 1, 1 << 20, &c->dec_ffn, err, errlen) ||
        get_int(f, fkey(c, "max_position_embeddings"), 2, 1 << 16, &c->max_pos, err, errlen) ||
        get_int(f, fkey(c, "max_length"), 2, 1 << 20, &c->max_length, err, errlen) ||
        gguf_get_bool(f, fkey(c, "scale_embedding"), &c->scale_embedding, err, errlen) ||
        gguf_get_bool(f, fkey(c, "shared_embeddings"), &c->shared_embeddings, err, errlen) ||
        gguf_get_bool(f, fkey(c, "tied_output"), &c->tied_output, err, errlen) ||
        gguf_get_bool(f, fkey(c, "forced_eos"), &c->forced_eos, err, errlen) ||
        gguf_get_f32(f, fkey(c, "layer_norm_eps"), &c->eps, err, errlen))
        return -1;
    if (marian && c->d_model % 2) { /* Marian's position table needs pairs of columns */
        fail(err, errlen, "key marian.d_model: %d is odd", c->d_model);
        return -1;
    }
    if (c->d_model % c->enc_heads || c->d_model % c->dec_heads) {
        fail(err, errlen, "key %s.encoder_heads/decoder_heads: %d/%d do not divide d_model %d",
             c->family->name, c->enc_heads, c->dec_heads, c->d_model);
        return -1;
    }
    if (!(c->eps > 0 && c->eps < 1)) {
        fail(err, errlen, "key %s: %g outside (0, 1)", fkey(c, "layer_norm_eps"), c->eps);
        return -1;
    }
    if (c->shared_embeddings && c->vocab_size != c->decoder_vocab_size) {
        fail(err, errlen, "shared embeddings but vocab_size %d != decoder_vocab_size %d",
             c->vocab_size, c->decoder_vocab_size);
        return -1;
    }
    int vt = c->decoder_vocab_size;
    if (get_int(f, fkey(c, "pad_id"), 0, vt - 1, &c->pad_id, err, errlen) ||
        get_int(f, fkey(c, "eos_id"), 0, vt - 1, &c->eos_id, err, errlen) ||
        /* <unk> stands for unknown pieces on both sides (forced decoding encodes targets) */
        get_int(f, fkey(c, "unk_id"), 0, (c->vocab_size < vt ? c->vocab_size : vt) - 1, &c->unk_id,
                err, errlen) ||
        get_int(f, fkey(c, "decoder_start_id"), 0, vt - 1, &c->start_id, err, errlen))
        return -1;
    c->bos_id = -1;
    if (!marian && get_int(f, fkey(c, "bos_id"), 0, vt - 1, &c->bos_id, err, errlen)) return -1;
    c->mask_id = -1;
    if (c->family->mask && get_int(f, fkey(c, "mask_id"), 0, vt - 1, &c->mask_id, err, errlen)) return -1;
    /* special tokens typed in a source become its ids: they must be source ids too */
    const int specials[] = {c->bos_id, c->pad_id, c->mask_id};
    const char *names[] = {"bos_id", "pad_id", "mask_id"};
    for (int i = 0; c->family->languages && i < 3; i++)
        if (specials[i] >= c->vocab_size) {
            fail(err, errlen, "key %s: %d outside the source vocabulary", fkey(c, names[i]), specials[i]);
            return -1;
        }
    if (c->eos_id >= c->vocab_size) {
        fail(err, errlen, "key %s: %d outside the source vocabulary", fkey(c, "eos_id"), c->eos_id);
        return -1;
    }
    if (c->pad_id == c->eos_id) {
        fail(err, errlen, "key %s: equals eos_id %d", fkey(c, "pad_id"), c->eos_id);
        return -1;
    }
    if (gguf_get_str(f, fkey(c, "activation"), &s, err, errlen)) return -1;
    if (s.len == 5 && !memcmp(s.ptr, "swish", 5)) c->act = AT_ACT_SWISH;
    else if (s.len == 4 && !memcmp(s.ptr, "relu", 4)) c->act = AT_ACT_RELU;
    else if (s.len == 4 && !memcmp(s.ptr, "gelu", 4)) c->act = AT_ACT_GELU;
    else {
        char b[48];
        fail(err, errlen, "key %s: '%s' not supported (swish, relu, gelu)", fkey(c, "activation"),
             shown(b, sizeof b, s));
        return -1;
    }
    return read_generation(f, c, err, errlen);
}

/* ---------------------------------------------------------------------------------------
 * Tensors */

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
        fail(b->err, b->errlen, "tensor %s: missing", name);
        return NULL;
    }
    int want_dims = cols ? 2 : 1;
    if ((int)t->n_dims != want_dims || (cols ? (t->ne[0] != (uint64_t)cols || t->ne[1] != (uint64_t)rows)
                                            : t->ne[0] != (uint64_t)rows)) {
        char got[96];
        if (t->n_dims == 1) snprintf(got, sizeof got, "[%llu]", (unsigned long long)t->ne[0]);
        else snprintf(got, sizeof got, "[%llu, %llu%s]", (unsigned long long)t->ne[t->n_dims - 1],
                      (unsigned long long)t->ne[t->n_dims - 2], t->n_dims > 2 ? ", ..." : "");
        if (cols) fail(b->err, b->errlen, "tensor %s: shape %s, expected [%d, %d]", name, got, rows, cols);
        else fail(b->err, b->errlen, "tensor %s: shape %s, expected [%d]", name, got, rows);
        return NULL;
    }
    b->used[t - gguf_tensor_at(b->f, 0)] = 1;
    return t;
}

static int bind_vector(binder *b, const float **v, const char *name, int n);

static int bind_matrix(binder *b, at_matrix *m, const char *name, int rows, int cols) {
    const gguf_tensor *t = find(b, name, rows, cols);
    if (!t) return -1;
    const int i8_ok = b->version >= 2;
    if (t->type != GGUF_T_F32 && t->type != GGUF_T_F16 && !(t->type == GGUF_T_I8 && i8_ok)) {
        fail(b->err, b->errlen, "tensor %s: dtype %s, expected f32 or f16%s", name,
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
                fail(b->err, b->errlen, "tensor %s: row %d scale is not a finite non-negative number", sname, r);
                return -1;
            }
        int32_t **owned = realloc(b->m->i8_sums, sizeof(int32_t *) * (size_t)(b->m->n_i8_sums + 1));
        int32_t *sums = owned ? at_matrix_i8_sums(t->data, rows, cols) : NULL;
        if (owned) b->m->i8_sums = owned;
        if (!sums) {
            fail(b->err, b->errlen, "out of memory");
            return -1;
        }
        owned[b->m->n_i8_sums++] = sums;
        m->wsum = sums;
        b->any_i8 = 1;
    }
    return 0;
}

static int bind_vector(binder *b, const float **v, const char *name, int n) {
    const gguf_tensor *t = find(b, name, n, 0);
    if (!t) return -1;
    if (t->type != GGUF_T_F32) {
        fail(b->err, b->errlen, "tensor %s: dtype %s, expected f32", name,
             gguf_tensor_type_name(t->type));
        return -1;
    }
    *v = t->data;
    s2s_model *m = b->m;
    if (m->n_vec_refs % 256 == 0) { /* s2s_pack copies it out of the mapping */
        s2s_vector_ref *r = realloc(m->vec_refs, sizeof *r * (size_t)(m->n_vec_refs + 256));
        if (!r) {
            fail(b->err, b->errlen, "out of memory");
            return -1;
        }
        m->vec_refs = r;
    }
    m->vec_refs[m->n_vec_refs++] = (s2s_vector_ref){v, n};
    return 0;
}

static int bind_linear(binder *b, linear *l, const char *prefix, int out, int in) {
    char name[128];
    snprintf(name, sizeof name, "%s.weight", prefix);
    if (bind_matrix(b, &l->w, name, out, in)) return -1;
    snprintf(name, sizeof name, "%s.bias", prefix);
    return bind_vector(b, &l->b, name, out);
}

static int bind_norm(binder *b, norm *n, const char *prefix, int d) {
    char name[128];
    snprintf(name, sizeof name, "%s.weight", prefix);
    if (bind_vector(b, &n->g, name, d)) return -1;
    snprintf(name, sizeof name, "%s.bias", prefix);
    return bind_vector(b, &n->b, name, d);
}

static int bind_attn(binder *b, attn_weights *a, const char *prefix, int d) {
    char name[128];
    const char *parts[4] = {"q", "k", "v", "o"};
    linear *dst[4] = {&a->q, &a->k, &a->v, &a->o};
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s.%s", prefix, parts[i]);
        if (bind_linear(b, dst[i], name, d, d)) return -1;
    }
    return 0;
}

static int bind_all(s2s_model *m, binder *b) {
    const s2s_config *c = &m->c;
    const int d = c->d_model;
    char p[96];
    if (bind_matrix(b, &m->enc_embed, "enc.embed.weight", c->vocab_size, d)) return -1;
    if (c->shared_embeddings) m->dec_embed = m->enc_embed;
    else if (bind_matrix(b, &m->dec_embed, "dec.embed.weight", c->decoder_vocab_size, d)) return -1;
    if (c->tied_output) m->out_proj = m->dec_embed;
    else if (bind_matrix(b, &m->out_proj, "lm_head.weight", c->decoder_vocab_size, d)) return -1;
    const s2s_family *fam = c->family;
    if (fam->logits_bias && bind_vector(b, &m->final_logits_bias, "final_logits_bias", c->decoder_vocab_size))
        return -1;
    if (fam->positions == POS_LEARNED &&
        (bind_matrix(b, &m->enc_pos, "enc.embed_positions.weight", c->max_pos + 2, d) ||
         bind_matrix(b, &m->dec_pos, "dec.embed_positions.weight", c->max_pos + 2, d)))
        return -1;
    if (fam->embed_norm && (bind_norm(b, &m->enc_embed_norm, "enc.embed_norm", d) ||
                            bind_norm(b, &m->dec_embed_norm, "dec.embed_norm", d)))
        return -1;
    m->enc = calloc((size_t)c->enc_layers, sizeof(enc_layer));
    m->dec = calloc((size_t)c->dec_layers, sizeof(dec_layer));
    if (!m->enc || !m->dec) {
        fail(b->err, b->errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < c->enc_layers; i++) {
        enc_layer *L = &m->enc[i];
        snprintf(p, sizeof p, "enc.%d.self_attn", i);
        if (bind_attn(b, &L->self_attn, p, d)) return -1;
        snprintf(p, sizeof p, "enc.%d.self_attn_norm", i);
        if (bind_norm(b, &L->self_attn_norm, p, d)) return -1;
        snprintf(p, sizeof p, "enc.%d.ffn.fc1", i);
        if (bind_linear(b, &L->fc1, p, c->enc_ffn, d)) return -1;
        snprintf(p, sizeof p, "enc.%d.ffn.fc2", i);
        if (bind_linear(b, &L->fc2, p, d, c->enc_ffn)) return -1;
        snprintf(p, sizeof p, "enc.%d.ffn_norm", i);
        if (bind_norm(b, &L->ffn_norm, p, d)) return -1;
    }
    for (int i = 0; i < c->dec_layers; i++) {
        dec_layer *L = &m->dec[i];
        snprintf(p, sizeof p, "dec.%d.self_attn", i);
        if (bind_attn(b, &L->self_attn, p, d)) return -1;
        snprintf(p, sizeof p, "dec.%d.self_attn_norm", i);
        if (bind_norm(b, &L->self_attn_norm, p, d)) return -1;
        snprintf(p, sizeof p, "dec.%d.cross_attn", i);
        if (bind_attn(b, &L->cross_attn, p, d)) return -1;
        snprintf(p, sizeof p, "dec.%d.cross_attn_norm", i);
        if (bind_norm(b, &L->cross_attn_norm, p, d)) return -1;
        snprintf(p, sizeof p, "dec.%d.ffn.fc1", i);
        if (bind_linear(b, &L->fc1, p, c->dec_ffn, d)) return -1;
        snprintf(p, sizeof p, "dec.%d.ffn.fc2", i);
        if (bind_linear(b, &L->fc2, p, d, c->dec_ffn)) return -1;
        snprintf(p, sizeof p, "dec.%d.ffn_norm", i);
        if (bind_norm(b, &L->ffn_norm, p, d)) return -1;
    }
    if (fam->final_norms && (bind_norm(b, &m->enc_final_norm, "enc.final_norm", d) ||
                             bind_norm(b, &m->dec_final_norm, "dec.final_norm", d)))
        return -1;
    for (uint64_t i = 0; i < gguf_tensor_count(b->f); i++)
        if (!b->used[i]) {
            fail(b->err, b->errlen, "tensor %s: not part of this model's configuration",
                 gguf_tensor_at(b->f, i)->name);
            return -1;
        }
    m->dtype = b->any_i8 ? AT_I8 : b->any_f16 ? AT_F16 : AT_F32;
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Tokenizer parts */

static vocab *load_vocab(const gguf_file *f, const char *key, int n, char *err, size_t errlen) {
    const gguf_kv *kv = gguf_get_array(f, key, GGUF_STRING, err, errlen);
    if (!kv) return NULL;
    if (kv->count != (uint64_t)n) {
        fail(err, errlen, "key %s: %llu pieces, the model has %d ids", key,
             (unsigned long long)kv->count, n);
        return NULL;
    }
    const char **pieces = malloc(sizeof(char *) * (size_t)n);
    uint64_t *lens = malloc(sizeof(uint64_t) * (size_t)n);
    vocab *v = NULL;
    if (!pieces || !lens) {
        fail(err, errlen, "out of memory");
    } else {
        for (int i = 0; i < n; i++) {
            pieces[i] = kv->strings[i].ptr;
            lens[i] = kv->strings[i].len;
        }
        v = vocab_new(pieces, lens, n, err, errlen);
    }
    free(pieces);
    free(lens);
    return v;
}

static spm_model *load_spm(const gguf_file *f, const char *key, char *err, size_t errlen) {
    const gguf_kv *kv = gguf_get_array(f, key, GGUF_U8, err, errlen);
    if (!kv) return NULL;
    char inner[200];
    spm_model *sp = spm_load(kv->data, kv->count, inner, sizeof inner);
    if (!sp) fail(err, errlen, "key %s: %s", key, inner);
    return sp;
}

/* ---------------------------------------------------------------------------------------
 * Load / free / verify */

static void position_row_marian(float *row, int pos, int d) {
    const int half = d / 2;
    for (int j = 0; j < d; j++) {
        /* column j has angle pos / 10000^(2*(j//2)/d); even columns' sines fill the
         * first half, odd columns' cosines the second half (HF Marian) */
        double angle = pos / pow(10000.0, 2.0 * (j / 2) / d);
        if (j % 2 == 0) row[j / 2] = (float)sin(angle);
        else row[half + j / 2] = (float)cos(angle);
    }
}

/* fairseq's table (HF M2M100SinusoidalPositionalEmbedding.get_embedding), in float32 as
 * torch computes it: frequencies exp(j * -log(10000)/(half-1)), angles pos * frequency. */
static void position_row_fairseq(float *row, int pos, int d, int pad) {
    const int half = d / 2;
    const float step = (float)(log(10000.0) / (half - 1));
    for (int j = 0; j < half; j++) {
        const float angle = (float)pos * expf((float)j * -step);
        row[j] = pos == pad ? 0.0f : sinf(angle);
        row[half + j] = pos == pad ? 0.0f : cosf(angle);
    }
    if (d % 2) row[d - 1] = 0.0f;
}

static void position_row(const s2s_config *c, float *row, int pos) {
    if (c->family->positions == POS_FAIRSEQ) position_row_fairseq(row, pos, c->d_model, c->pad_id);
    else position_row_marian(row, pos, c->d_model);
}

/* The first rows of the table, computed once: a file may declare up to 65,536 positions,
 * and a table that size would be out of proportion to a small model. */
static float *make_positions(const s2s_config *c, int n_pos) {
    float *p = malloc(sizeof(float) * (size_t)n_pos * c->d_model);
    if (!p) return NULL;
    for (int pos = 0; pos < n_pos; pos++) position_row(c, p + (size_t)pos * c->d_model, pos);
    return p;
}

const float *s2s_position(const s2s_model *m, int dec, int pos, float *buf) {
    if (m->c.family->positions == POS_LEARNED) { /* HF's offset of 2 rows */
        if (pos < 0 || pos >= m->c.max_pos) memset(buf, 0, sizeof(float) * (size_t)m->c.d_model);
        else at_matrix_row(buf, dec ? &m->dec_pos : &m->enc_pos, pos + 2);
        return buf;
    }
    if (pos < m->n_positions) return m->positions + (size_t)pos * m->c.d_model;
    position_row(&m->c, buf, pos);
    return buf;
}

int s2s_position_of(const s2s_config *c, int id, int i, int pads_before) {
    if (c->family->positions != POS_FAIRSEQ) return i;
    return id == c->pad_id ? c->pad_id : i - pads_before + c->pad_id + 1;
}

/* ---------------------------------------------------------------------------------------
 * Language tokens (multilingual families) */

/* tokenizer.languages (codes) and tokenizer.language_ids (their tokens' ids): as many of
 * each, codes non-empty and distinct, ids inside both vocabularies and distinct. */
static int load_languages(s2s_model *m, char *err, size_t errlen) {
    const gguf_kv *codes = gguf_get_array(m->file, "tokenizer.languages", GGUF_STRING, err, errlen);
    if (!codes) return -1;
    const gguf_kv *ids = gguf_get_array(m->file, "tokenizer.language_ids", GGUF_U32, err, errlen);
    if (!ids) return -1;
    if (codes->count != ids->count || codes->count < 1 || codes->count > 100000) {
        fail(err, errlen, "key tokenizer.language_ids: %llu ids for %llu codes (1..100000 needed)",
             (unsigned long long)ids->count, (unsigned long long)codes->count);
        return -1;
    }
    const int n = (int)codes->count;
    const int lim = m->c.vocab_size < m->c.decoder_vocab_size ? m->c.vocab_size : m->c.decoder_vocab_size;
    m->lang_code = calloc((size_t)n, sizeof(char *));
    m->lang_id = malloc(sizeof(int) * (size_t)n);
    if (!m->lang_code || !m->lang_id) {
        fail(err, errlen, "out of memory");
        return -1;
    }
    m->n_langs = n;
    for (int i = 0; i < n; i++) {
        gguf_str s = codes->strings[i];
        uint32_t id;
        memcpy(&id, ids->data + 4 * (size_t)i, 4);
        char b[48];
        if (s.len == 0 || s.len > 64 || memchr(s.ptr, 0, s.len)) {
            fail(err, errlen, "key tokenizer.languages: code %d '%s' is empty, too long or holds a NUL byte", i,
                 shown(b, sizeof b, s));
            return -1;
        }
        if (id >= (uint32_t)lim) {
            fail(err, errlen, "key tokenizer.language_ids: id %u of '%s' outside the vocabulary (0..%d)", id,
                 shown(b, sizeof b, s), lim - 1);
            return -1;
        }
        m->lang_code[i] = strndup(s.ptr, s.len);
        m->lang_id[i] = (int)id;
        if (!m->lang_code[i]) {
            fail(err, errlen, "out of memory");
            return -1;
        }
        for (int j = 0; j < i; j++)
            if (!strcmp(m->lang_code[j], m->lang_code[i]) || m->lang_id[j] == m->lang_id[i]) {
                fail(err, errlen, "key tokenizer.languages: '%s' repeats a code or an id", m->lang_code[i]);
                return -1;
            }
    }
    return 0;
}

/* tokenizer.class (optional): whose rules the text follows. Absent, the family's own
 * tokenizer (MarianTokenizer, M2M100Tokenizer); m2m_100 files may name NllbTokenizer. Then
 * the added tokens of a multilingual family, which the source text is split on. */
static int load_tokenizer(s2s_model *m, char *err, size_t errlen) {
    const s2s_config *c = &m->c;
    const int multi = c->family->languages;
    if (gguf_find_kv(m->file, "tokenizer.class")) {
        gguf_str s;
        if (gguf_get_str(m->file, "tokenizer.class", &s, err, errlen)) return -1;
#define IS(lit) (s.len == strlen(lit) && !memcmp(s.ptr, lit, s.len))
        if (multi && IS("NllbTokenizer")) {
            m->nllb = 1;
        } else if (!(multi ? IS("M2M100Tokenizer") : IS("MarianTokenizer"))) {
            char b[48];
            fail(err, errlen, "key tokenizer.class: '%s' is not a tokenizer attend runs for %s (%s)",
                 shown(b, sizeof b, s), c->family->name, multi ? "M2M100Tokenizer, NllbTokenizer" : "MarianTokenizer");
            return -1;
        }
#undef IS
    }
    if (!multi) return 0;
    if (m->nllb) { /* NLLB's <mask> is a piece of its vocabulary, not a key (mBART's is) */
        m->c.mask_id = vocab_id(m->src_vocab, "<mask>", 6);
        if (m->c.mask_id >= c->decoder_vocab_size) m->c.mask_id = -1;
    }
    m->added_id = malloc(sizeof(int) * (size_t)(m->n_langs + 5));
    if (!m->added_id) {
        fail(err, errlen, "out of memory");
        return -1;
    }
    const int lim = c->vocab_size < c->decoder_vocab_size ? c->vocab_size : c->decoder_vocab_size;
    for (int b = 0; b < 256; b++) /* counting sort by first byte, stable */
        for (int k = 0; k < m->n_langs + 5; k++) {
            const int fixed[5] = {c->bos_id, c->pad_id, c->eos_id, c->unk_id, c->mask_id};
            const int id = k < 4 ? fixed[k] : k < 4 + m->n_langs ? m->lang_id[k - 4] : fixed[4];
            const char *p = id >= 0 && id < lim ? vocab_piece(m->src_vocab, id) : NULL;
            if (!p || (unsigned char)p[0] != b || !*p) continue;
            int dup = 0;
            for (int j = 0; j < m->n_added; j++) dup |= m->added_id[j] == id;
            if (!dup) m->added_id[m->n_added++] = id;
        }
    /* added_start[b]: the first token starting with a byte >= b */
    for (int b = 256, k = m->n_added; b >= 0; b--) {
        while (k > 0 && b < 256 && (unsigned char)vocab_piece(m->src_vocab, m->added_id[k - 1])[0] >= b) k--;
        m->added_start[b] = b == 256 ? m->n_added : k;
    }
    return 0;
}

int s2s_language_id(const s2s_model *m, const char *code, size_t len) {
    for (int i = 0; i < m->n_langs; i++)
        if (strlen(m->lang_code[i]) == len && !memcmp(m->lang_code[i], code, len)) return m->lang_id[i];
    return -1;
}

char *s2s_language_list(const s2s_model *m) {
    size_t n = 1;
    for (int i = 0; i < m->n_langs; i++) n += strlen(m->lang_code[i]) + 2;
    char *out = m->n_langs ? malloc(n) : NULL;
    if (!out) return NULL;
    out[0] = 0;
    for (int i = 0; i < m->n_langs; i++) {
        if (i) strcat(out, ", ");
        strcat(out, m->lang_code[i]);
    }
    return out;
}

/* Everything after opening the container: config, tensors, tokenizer. Frees m on failure. */
static s2s_model *load_opened(s2s_model *m, char *err, size_t errlen);

s2s_model *s2s_load(const char *path, char *err, size_t errlen) {
    s2s_model *m = calloc(1, sizeof *m);
    if (!m) {
        fail(err, errlen, "out of memory");
        return NULL;
    }
    m->file = gguf_open(path, err, errlen);
    return load_opened(m, err, errlen);
}

s2s_model *s2s_load_buffer(const void *buf, size_t len, char *err, size_t errlen) {
    s2s_model *m = calloc(1, sizeof *m);
    if (!m) {
        fail(err, errlen, "out of memory");
        return NULL;
    }
    m->file = gguf_open_buffer(buf, len, err, errlen);
    return load_opened(m, err, errlen);
}

static s2s_model *load_opened(s2s_model *m, char *err, size_t errlen) {
    if (!m->file || read_config(m->file, &m->c, err, errlen)) goto fail;
    binder b = {m->file, err, errlen, NULL, 0, 0, 0, m};
    b.used = calloc(gguf_tensor_count(m->file) + 1, 1);
    if (!b.used) {
        fail(err, errlen, "out of memory");
        goto fail;
    }
    if (gguf_get_u32(m->file, "attend.format_version", &b.version, err, errlen) || bind_all(m, &b)) {
        free(b.used);
        goto fail;
    }
    free(b.used);
    const gguf_kv *crc = gguf_get_array(m->file, "attend.tensor_crc32", GGUF_U32, err, errlen);
    if (!crc) goto fail;
    if (crc->count != gguf_tensor_count(m->file)) {
        fail(err, errlen, "key attend.tensor_crc32: %llu entries for %llu tensors",
             (unsigned long long)crc->count, (unsigned long long)gguf_tensor_count(m->file));
        goto fail;
    }
    m->src_vocab = load_vocab(m->file, "tokenizer.source_pieces", m->c.vocab_size, err, errlen);
    if (!m->src_vocab) goto fail;
    m->tgt_vocab = load_vocab(m->file, "tokenizer.target_pieces", m->c.decoder_vocab_size, err, errlen);
    if (!m->tgt_vocab) goto fail;
    m->src_spm = load_spm(m->file, "tokenizer.source_spm", err, errlen);
    if (!m->src_spm) goto fail;
    m->tgt_spm = load_spm(m->file, "tokenizer.target_spm", err, errlen);
    if (!m->tgt_spm) goto fail;
    if (m->c.family->languages && load_languages(m, err, errlen)) goto fail;
    if (load_tokenizer(m, err, errlen)) goto fail;
    /* fairseq numbers positions from pad_id + 1; learned positions are stored, not computed */
    const int used = m->c.family->positions == POS_LEARNED ? 1
                     : m->c.max_pos + (m->c.family->positions == POS_FAIRSEQ ? m->c.pad_id + 1 : 0);
    m->n_positions = used < S2S_POSITIONS_CACHED ? used : S2S_POSITIONS_CACHED;
    m->positions = make_positions(&m->c, m->n_positions);
    if (!m->positions) {
        fail(err, errlen, "out of memory");
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

/* The linear layers' matrices into out (when not NULL), the output projection first:
 * packing the biggest first keeps the peak memory near the final size (see s2s_pack).
 * Returns how many there are. */
static int linear_matrices(s2s_model *m, at_matrix **out) {
    int n = 0;
#define PUT(x) (out ? (void)(out[n] = (x)) : (void)0, n++)
    PUT(&m->out_proj);
    for (int l = 0; l < m->c.enc_layers; l++) {
        enc_layer *L = &m->enc[l];
        linear *ls[] = {&L->self_attn.q, &L->self_attn.k, &L->self_attn.v, &L->self_attn.o, &L->fc1, &L->fc2};
        for (size_t i = 0; i < sizeof ls / sizeof *ls; i++) PUT(&ls[i]->w);
    }
    for (int l = 0; l < m->c.dec_layers; l++) {
        dec_layer *L = &m->dec[l];
        linear *ls[] = {&L->self_attn.q, &L->self_attn.k, &L->self_attn.v, &L->self_attn.o, &L->cross_attn.q,
                        &L->cross_attn.k, &L->cross_attn.v, &L->cross_attn.o, &L->fc1, &L->fc2};
        for (size_t i = 0; i < sizeof ls / sizeof *ls; i++) PUT(&ls[i]->w);
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
        fail(err, errlen, "out of memory");
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
        fail(err, errlen, "out of memory");
        return -1;
    }
    linear_matrices(m, mats);
    /* the vectors first, while s2s_verify's reading keeps the mapping in */
    if (pack_vectors(m, err, errlen)) {
        free(mats);
        return -1;
    }
    size_t total = 0; /* one block for all: small matrices get huge pages too */
    for (int i = 0; i < n; i++) total += at_matrix_packed_bytes(mats[i]);
    char *block = at_alloc_weights(total);
    if (!block) {
        free(mats);
        fail(err, errlen, "out of memory");
        return -1;
    }
    m->packed = block;
    /* s2s_verify read every page in: let them go first, so the peak is about one
     * model's size, not two (re-reading a page comes from the page cache) */
    release_tensors(m);
    const void *proj_rows = m->out_proj.data;
    for (int i = 0; i < n; i++) {
        const at_matrix before = *mats[i];
        const size_t bytes = at_matrix_packed_bytes(mats[i]);
        at_matrix_pack_into(mats[i], block);
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
    vocab_free(m->src_vocab);
    vocab_free(m->tgt_vocab);
    free(m->positions);
    for (int i = 0; m->lang_code && i < m->n_langs; i++) free(m->lang_code[i]);
    free(m->lang_code);
    free(m->lang_id);
    free(m->added_id);
    for (int i = 0; i < m->n_i8_sums; i++) free(m->i8_sums[i]);
    free(m->i8_sums);
    free(m->enc);
    free(m->dec);
    gguf_close(m->file);
    free(m);
}

/* attend.metadata_crc32 (optional: older files lack it) must be the last key, a u32, and
 * match the bytes of every key/value pair before it. Returns 0, 1 if absent, -1 on error. */
static int verify_metadata(const s2s_model *m, char *err, size_t errlen) {
    const gguf_kv *kv = gguf_find_kv(m->file, "attend.metadata_crc32");
    if (!kv) return 1;
    if (kv->type != GGUF_U32) {
        fail(err, errlen, "key attend.metadata_crc32: expected u32, found %s", gguf_type_name(kv->type));
        return -1;
    }
    if (kv != gguf_kv_at(m->file, gguf_kv_count(m->file) - 1)) {
        fail(err, errlen, "key attend.metadata_crc32: not the last key (it covers the keys before it)");
        return -1;
    }
    uint32_t want, got = gguf_metadata_crc(m->file, kv);
    memcpy(&want, kv->data, 4);
    if (got != want) {
        fail(err, errlen, "metadata: CRC-32 %08x, file says %08x (corrupted keys, vocabulary or "
             "tokenizer models)", got, want);
        return -1;
    }
    return 0;
}

/* Index of the first NaN or infinite element among elements [lo, hi) of an f32 or f16
 * tensor, or -1 (other types). The scan ORs exponent tests without branching so it
 * vectorizes: every load runs it. */
static int64_t first_non_finite(const gguf_tensor *t, uint64_t lo, uint64_t hi) {
    const uint64_t block = 4096;
    for (; lo < hi; lo += block) {
        const uint64_t end = lo + block < hi ? lo + block : hi;
        int bad = 0;
        if (t->type == GGUF_T_F32) {
            const uint32_t *v = t->data;
            for (uint64_t j = lo; j < end; j++) bad |= (v[j] & 0x7f800000u) == 0x7f800000u;
            if (bad)
                for (uint64_t j = lo; j < end; j++)
                    if ((v[j] & 0x7f800000u) == 0x7f800000u) return (int64_t)j;
        } else if (t->type == GGUF_T_F16) {
            const uint16_t *v = t->data;
            for (uint64_t j = lo; j < end; j++) bad |= (v[j] & 0x7c00u) == 0x7c00u;
            if (bad)
                for (uint64_t j = lo; j < end; j++)
                    if ((v[j] & 0x7c00u) == 0x7c00u) return (int64_t)j;
        }
    }
    return -1;
}

/* s2s_verify reads the tensors in pieces of at most VERIFY_PIECE bytes, on the pool's
 * threads: each piece's CRC-32 (combined in order per tensor: crc32_combine is exact) and
 * its first non-finite element. */
#define VERIFY_PIECE ((uint64_t)1 << 20)

typedef struct {
    uint32_t tensor;   /* index in the file */
    uint64_t lo, n;    /* byte range within the tensor */
    uint32_t crc;
    int64_t bad;       /* first non-finite element of the piece (tensor-relative), or -1 */
} verify_piece;

typedef struct {
    const gguf_file *f;
    verify_piece *p;
} verify_args;

static void verify_pieces(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const verify_args *a = ctx;
    for (int i = lo; i < hi; i++) {
        verify_piece *p = &a->p[i];
        const gguf_tensor *t = gguf_tensor_at(a->f, p->tensor);
        p->crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), (const uint8_t *)t->data + p->lo, (uInt)p->n);
        const uint64_t es = t->type == GGUF_T_F32 ? 4 : t->type == GGUF_T_F16 ? 2 : 0;
        p->bad = es ? first_non_finite(t, p->lo / es, (p->lo + p->n) / es) : -1;
    }
}

int s2s_verify(const s2s_model *m, char *err, size_t errlen) {
    if (verify_metadata(m, err, errlen) < 0) return -1;
    const gguf_kv *crc = gguf_get_array(m->file, "attend.tensor_crc32", GGUF_U32, err, errlen);
    if (!crc) return -1;
    const uint64_t nt = gguf_tensor_count(m->file);
    uint64_t n = 0;
    for (uint64_t i = 0; i < nt; i++) {
        const uint64_t bytes = gguf_tensor_at(m->file, i)->nbytes;
        n += bytes ? (bytes + VERIFY_PIECE - 1) / VERIFY_PIECE : 1;
    }
    verify_piece *pieces = n <= 0x7fffffff ? malloc(sizeof *pieces * (size_t)(n ? n : 1)) : NULL;
    if (!pieces) {
        fail(err, errlen, "out of memory");
        return -1;
    }
    uint64_t k = 0;
    for (uint64_t i = 0; i < nt; i++) {
        const uint64_t bytes = gguf_tensor_at(m->file, i)->nbytes;
        uint64_t lo = 0;
        do {
            const uint64_t len = bytes - lo < VERIFY_PIECE ? bytes - lo : VERIFY_PIECE;
            pieces[k++] = (verify_piece){(uint32_t)i, lo, len, 0, -1};
            lo += len;
        } while (lo < bytes);
    }
    const verify_args a = {m->file, pieces};
    at_parallel_for((int)n, at_threads(), verify_pieces, &a);
    /* in file order: a tensor's CRC-32, then its values, as a serial scan finds them */
    int rc = 0;
    k = 0;
    for (uint64_t i = 0; i < nt && !rc; i++) {
        const gguf_tensor *t = gguf_tensor_at(m->file, i);
        uint32_t want, got = pieces[k].crc;
        int64_t bad = pieces[k].bad;
        for (k++; k < n && pieces[k].tensor == i; k++) {
            got = (uint32_t)crc32_combine(got, pieces[k].crc, (z_off_t)pieces[k].n);
            if (bad < 0) bad = pieces[k].bad;
        }
        memcpy(&want, crc->data + 4 * i, 4);
        if (got != want) {
            fail(err, errlen, "tensor %s: CRC-32 %08x, file says %08x (corrupted data)", t->name,
                 got, want);
            rc = -1;
        } else if (bad >= 0 && t->n_dims == 2) { /* NaN/Inf weights would poison every translation */
            fail(err, errlen, "tensor %s: row %lld, column %lld is not finite (NaN or infinity)", t->name,
                 (long long)(bad / (int64_t)t->ne[0]), (long long)(bad % (int64_t)t->ne[0]));
            rc = -1;
        } else if (bad >= 0) {
            fail(err, errlen, "tensor %s: element %lld is not finite (NaN or infinity)", t->name,
                 (long long)bad);
            rc = -1;
        }
    }
    free(pieces);
    return rc;
}
