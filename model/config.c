/* A checkpoint's configuration: its GGUF keys into s2s_config, each value checked against a
 * range and against the others. The family table lives here too: general.architecture picks
 * a row (marian, m2m_100, mbart), whose switches say what that family does differently and
 * whose name prefixes its hyperparameter keys. */
#include "load.h"

#include "align.h"
#include "align_head.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------
 * Typed, ranged keys */

static int get_int(const gguf_file *f, const char *key, int lo, int hi, int *out, char *err,
                   size_t errlen) {
    uint32_t v;
    if (gguf_get_u32(f, key, &v, err, errlen)) return -1;
    if (v < (uint32_t)lo || v > (uint32_t)hi) {
        s2s_fail(err, errlen, "key %s: value %u outside %d..%d", key, v, lo, hi);
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
        s2s_fail(err, errlen, "key %s: value %g outside %g..%g", key, v, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * The families */

/* Marian's switches keep its behaviour exactly as before families existed. */
static const s2s_family FAMILIES[] = {
    /* name      pre  final emb_ln positions     bias ban_pad codes unk_sp langs mask rms biases scaled sentinels
                                                                                           pos_offset audio */
    {"marian",   0,   0,    0,     POS_MARIAN,   1,   1,      1,    1,     0,    0,   0,  1,     1,     0, 0, 0},
    {"m2m_100",  1,   1,    0,     POS_FAIRSEQ,  0,   0,      0,    0,     1,    0,   0,  1,     1,     0, 0, 0},
    {"mbart",    1,   1,    1,     POS_LEARNED,  1,   0,      0,    0,     1,    1,   0,  1,     1,     0, 2, 0},
    {"t5",       1,   1,    0,     POS_RELATIVE, 0,   0,      0,    0,     0,    0,   1,  0,     0,     1, 0, 0},
    {"whisper",  1,   1,    0,     POS_LEARNED,  0,   0,      0,    0,     0,    0,   0,  1,     1,     0, 0, 1},
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

/* ---------------------------------------------------------------------------------------
 * The configuration, step by step */

/* general.architecture (the family) and attend.format_version. */
static int read_family(const gguf_file *f, s2s_config *c, char *err, size_t errlen) {
    gguf_str s;
    uint32_t version;
    if (gguf_get_str(f, "general.architecture", &s, err, errlen)) return -1;
    c->family = find_family(s);
    if (!c->family) {
        char b[48];
        s2s_fail(err, errlen, "key general.architecture: '%s' is not a family attend runs (marian, m2m_100, mbart, t5, whisper)",
                 s2s_shown(b, sizeof b, s));
        return -1;
    }
    if (gguf_get_u32(f, "attend.format_version", &version, err, errlen)) return -1;
    if (version == 0 || version > S2S_FORMAT_VERSION) {
        s2s_fail(err, errlen, "attend format version %u; this attend reads versions 1..%d "
                 "(re-export the model or update attend)", version, S2S_FORMAT_VERSION);
        return -1;
    }
    return 0;
}

/* T5's own keys: the head width (t5.d_kv, both stacks), the relative position buckets,
 * the gated FFN and the output scaling; its embeddings are one shared matrix. */
static int read_t5_sizes(const gguf_file *f, s2s_config *c, char *err, size_t errlen) {
    int scale_output = 0;
    if (get_int(f, fkey(c, "d_kv"), 1, 65536, &c->enc_hd, err, errlen) ||
        get_int(f, fkey(c, "relative_buckets"), 2, 65536, &c->rel_buckets, err, errlen) ||
        get_int(f, fkey(c, "relative_max_distance"), 1, 1 << 20, &c->rel_max_distance, err, errlen) ||
        gguf_get_bool(f, fkey(c, "gated_ffn"), &c->gated_ffn, err, errlen) ||
        gguf_get_bool(f, fkey(c, "scale_output"), &scale_output, err, errlen))
        return -1;
    if (c->enc_heads != c->dec_heads) {
        s2s_fail(err, errlen, "key t5.decoder_heads: %d differs from encoder_heads %d (T5 has one num_heads)",
                 c->dec_heads, c->enc_heads);
        return -1;
    }
    if ((long long)c->enc_hd * c->enc_heads > 65536) {
        s2s_fail(err, errlen, "key t5.d_kv: %d x %d heads is wider than 65536", c->enc_hd, c->enc_heads);
        return -1;
    }
    /* the buckets' log scale divides by log(max_distance / max_exact): it must exceed max_exact
     * (max_exact = buckets / 4, the decoder's buckets / 2) */
    if (c->rel_buckets < 4 || c->rel_max_distance <= c->rel_buckets / 2) {
        s2s_fail(err, errlen, "key t5.relative_max_distance: %d with %d buckets (needs at least 4 buckets and "
                 "a distance above buckets / 2)", c->rel_max_distance, c->rel_buckets);
        return -1;
    }
    if (!c->shared_embeddings || c->scale_embedding) {
        s2s_fail(err, errlen, "key t5.shared_embeddings/scale_embedding: T5 shares one unscaled embedding");
        return -1;
    }
    c->dec_hd = c->enc_hd;
    c->enc_inner = c->dec_inner = c->enc_hd * c->enc_heads;
    c->out_scale = scale_output ? 1.0f / sqrtf((float)c->d_model) : 1.0f;
    return 0;
}

/* Vocabularies, widths, layers, heads, positions, the embedding switches and the
 * LayerNorm epsilon. */
static int read_sizes(const gguf_file *f, s2s_config *c, char *err, size_t errlen) {
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
    if (c->family->positions == POS_MARIAN && c->d_model % 2) { /* Marian's position table needs pairs of columns */
        s2s_fail(err, errlen, "key marian.d_model: %d is odd", c->d_model);
        return -1;
    }
    if (c->family->positions == POS_RELATIVE) {
        if (read_t5_sizes(f, c, err, errlen)) return -1;
    } else if (c->d_model % c->enc_heads || c->d_model % c->dec_heads) {
        s2s_fail(err, errlen, "key %s.encoder_heads/decoder_heads: %d/%d do not divide d_model %d",
                 c->family->name, c->enc_heads, c->dec_heads, c->d_model);
        return -1;
    } else {
        c->enc_hd = c->d_model / c->enc_heads;
        c->dec_hd = c->d_model / c->dec_heads;
        c->enc_inner = c->dec_inner = c->d_model;
        c->out_scale = 1.0f;
    }
    if (!(c->eps > 0 && c->eps < 1)) {
        s2s_fail(err, errlen, "key %s: %g outside (0, 1)", fkey(c, "layer_norm_eps"), c->eps);
        return -1;
    }
    if (c->shared_embeddings && c->vocab_size != c->decoder_vocab_size) {
        s2s_fail(err, errlen, "shared embeddings but vocab_size %d != decoder_vocab_size %d",
                 c->vocab_size, c->decoder_vocab_size);
        return -1;
    }
    return 0;
}

/* The special tokens' ids: inside the vocabularies they are used in, pad and eos apart. */
static int read_token_ids(const gguf_file *f, s2s_config *c, char *err, size_t errlen) {
    int vt = c->decoder_vocab_size;
    if (get_int(f, fkey(c, "pad_id"), 0, vt - 1, &c->pad_id, err, errlen) ||
        get_int(f, fkey(c, "eos_id"), 0, vt - 1, &c->eos_id, err, errlen) ||
        /* <unk> stands for unknown pieces on both sides (forced decoding encodes targets) */
        get_int(f, fkey(c, "unk_id"), 0, (c->vocab_size < vt ? c->vocab_size : vt) - 1, &c->unk_id,
                err, errlen) ||
        get_int(f, fkey(c, "decoder_start_id"), 0, vt - 1, &c->start_id, err, errlen))
        return -1;
    c->bos_id = -1;
    if (c->family->positions != POS_MARIAN && c->family->positions != POS_RELATIVE &&
        get_int(f, fkey(c, "bos_id"), 0, vt - 1, &c->bos_id, err, errlen))
        return -1;
    c->mask_id = -1;
    if (c->family->mask && get_int(f, fkey(c, "mask_id"), 0, vt - 1, &c->mask_id, err, errlen)) return -1;
    /* special tokens typed in a source become its ids: they must be source ids too */
    const int specials[] = {c->bos_id, c->pad_id, c->mask_id};
    const char *names[] = {"bos_id", "pad_id", "mask_id"};
    for (int i = 0; c->family->languages && i < 3; i++)
        if (specials[i] >= c->vocab_size) {
            s2s_fail(err, errlen, "key %s: %d outside the source vocabulary", fkey(c, names[i]), specials[i]);
            return -1;
        }
    if (c->eos_id >= c->vocab_size) {
        s2s_fail(err, errlen, "key %s: %d outside the source vocabulary", fkey(c, "eos_id"), c->eos_id);
        return -1;
    }
    if (c->pad_id == c->eos_id && !c->family->audio) { /* Whisper pads with <|endoftext|> */
        s2s_fail(err, errlen, "key %s: equals eos_id %d", fkey(c, "pad_id"), c->eos_id);
        return -1;
    }
    return 0;
}

static int read_activation(const gguf_file *f, s2s_config *c, char *err, size_t errlen) {
    gguf_str s;
    if (gguf_get_str(f, fkey(c, "activation"), &s, err, errlen)) return -1;
    if (s.len == 5 && !memcmp(s.ptr, "swish", 5)) c->act = AT_ACT_SWISH;
    else if (s.len == 4 && !memcmp(s.ptr, "relu", 4)) c->act = AT_ACT_RELU;
    else if (s.len == 4 && !memcmp(s.ptr, "gelu", 4)) c->act = AT_ACT_GELU;
    else if (s.len == 9 && !memcmp(s.ptr, "gelu_tanh", 9)) c->act = AT_ACT_GELU_TANH;
    else {
        char b[48];
        s2s_fail(err, errlen, "key %s: '%s' not supported (swish, relu, gelu, gelu_tanh)", fkey(c, "activation"),
                 s2s_shown(b, sizeof b, s));
        return -1;
    }
    return 0;
}

/* A speech model's whisper.* keys: the input's shape and the special tokens decoding uses
 * (ids inside the decoder's vocabulary; no_speech_id may be its size: none). */
static int read_speech(const gguf_file *f, s2s_config *c, char *err, size_t errlen) {
    s2s_speech *s = &c->speech;
    const int V = c->decoder_vocab_size;
    if (get_int(f, fkey(c, "num_mel_bins"), 1, 512, &s->n_mels, err, errlen) ||
        get_int(f, fkey(c, "max_source_positions"), 1, 65536, &s->n_frames, err, errlen) ||
        get_int(f, fkey(c, "no_timestamps_id"), 0, V - 1, &s->no_timestamps_id, err, errlen) ||
        get_int(f, fkey(c, "timestamp_begin_id"), 0, V - 1, &s->timestamp_begin_id, err, errlen) ||
        get_int(f, fkey(c, "transcribe_id"), 0, V - 1, &s->transcribe_id, err, errlen) ||
        get_int(f, fkey(c, "translate_id"), 0, V - 1, &s->translate_id, err, errlen) ||
        get_int(f, fkey(c, "prev_id"), 0, V - 1, &s->prev_id, err, errlen) ||
        get_int(f, fkey(c, "no_speech_id"), 0, V, &s->no_speech_id, err, errlen) ||
        get_int(f, fkey(c, "max_initial_timestamp_index"), 0, V, &s->max_initial_timestamp, err, errlen) ||
        gguf_get_bool(f, fkey(c, "is_multilingual"), &s->multilingual, err, errlen))
        return -1;
    s->forced_task_id = s->transcribe_id; /* files from before the key: what they always did */
    if (gguf_find_kv(f, fkey(c, "forced_task_id"))) {
        if (get_int(f, fkey(c, "forced_task_id"), 0, V, &s->forced_task_id, err, errlen)) return -1;
        if (s->forced_task_id == V) s->forced_task_id = -1; /* the vocabulary's size: none */
    }
    s->forced_language_id = -1;
    if (gguf_find_kv(f, fkey(c, "forced_language_id"))) {
        if (get_int(f, fkey(c, "forced_language_id"), 0, V, &s->forced_language_id, err, errlen)) return -1;
        if (s->forced_language_id == V) s->forced_language_id = -1;
    }
    if (s->timestamp_begin_id <= c->eos_id) { /* the timestamp rule bans ranges on either side */
        s2s_fail(err, errlen, "key %s: %d is not after eos_id %d", fkey(c, "timestamp_begin_id"),
                 s->timestamp_begin_id, c->eos_id);
        return -1;
    }
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

/* attend.align_head.layer / .width: a trained alignment head (model/align_head.c), optional;
 * both keys or neither. */
static int read_align_head(const gguf_file *f, s2s_config *c, char *err, size_t errlen) {
    const int has_layer = gguf_find_kv(f, ATTEND_ALIGN_HEAD_KEY ".layer") != NULL;
    const int has_width = gguf_find_kv(f, ATTEND_ALIGN_HEAD_KEY ".width") != NULL;
    uint32_t layer = 0, width = 0;
    c->align_head_layer = -1, c->align_head_width = 0;
    if (!has_layer && !has_width) return 0;
    if (gguf_get_u32(f, ATTEND_ALIGN_HEAD_KEY ".layer", &layer, err, errlen) ||
        gguf_get_u32(f, ATTEND_ALIGN_HEAD_KEY ".width", &width, err, errlen))
        return -1;
    if (c->family->audio || layer >= (uint32_t)c->dec_layers || width < 1 || width > ALIGN_HEAD_MAX_WIDTH) {
        s2s_fail(err, errlen, "keys %s.layer %u and .width %u: a text model's decoder layer (0..%d) and a "
                 "width of 1..%d expected", ATTEND_ALIGN_HEAD_KEY, layer, width, c->dec_layers - 1,
                 ALIGN_HEAD_MAX_WIDTH);
        return -1;
    }
    c->align_head_layer = (int)layer, c->align_head_width = (int)width;
    return 0;
}

/* The alignment view the file records (a view that names layers and heads this model has),
 * else the default for its depth. */
static int read_alignment_view(const gguf_file *f, s2s_config *c, char *err, size_t errlen) {
    _Static_assert(sizeof c->align_view == ATTEND_VIEW_TEXT_MAX, "view text size");
    c->align_view_recorded = gguf_find_kv(f, ATTEND_ALIGNMENT_VIEW_KEY) != NULL;
    if (!c->align_view_recorded) {
        attend_default_view(c->dec_layers, c->align_view, sizeof c->align_view);
        return 0;
    }
    gguf_str s;
    char b[48], verr[400];
    attend_view v;
    if (gguf_get_str(f, ATTEND_ALIGNMENT_VIEW_KEY, &s, err, errlen)) return -1;
    if (s.len >= sizeof c->align_view || memchr(s.ptr, 0, s.len)) {
        s2s_fail(err, errlen, "key %s: '%s' is not an attention view", ATTEND_ALIGNMENT_VIEW_KEY,
                 s2s_shown(b, sizeof b, s));
        return -1;
    }
    memcpy(c->align_view, s.ptr, s.len);
    c->align_view[s.len] = 0;
    if (attend_view_parse(c->align_view, &v, verr, sizeof verr) ||
        attend_view_check(&v, c->dec_layers, c->dec_heads, verr, sizeof verr)) {
        s2s_fail(err, errlen, "key %s: %s", ATTEND_ALIGNMENT_VIEW_KEY, verr);
        return -1;
    }
    if (v.align && !c->align_head_width) {
        s2s_fail(err, errlen, "key %s: '%s' names the alignment head, and the file has none (%s.*)",
                 ATTEND_ALIGNMENT_VIEW_KEY, c->align_view, ATTEND_ALIGN_HEAD_KEY);
        return -1;
    }
    return 0;
}

int s2s_read_config(const gguf_file *f, s2s_config *c, char *err, size_t errlen) {
    if (read_family(f, c, err, errlen) || read_sizes(f, c, err, errlen) || read_token_ids(f, c, err, errlen) ||
        read_activation(f, c, err, errlen) || read_generation(f, c, err, errlen) ||
        (c->family->audio && read_speech(f, c, err, errlen)))
        return -1;
    if (read_align_head(f, c, err, errlen)) return -1;
    return read_alignment_view(f, c, err, errlen);
}
