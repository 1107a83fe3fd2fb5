/* seq2seq: the encoder-decoder transformer of every family attend runs (MarianMT, M2M-100, NLLB-200,
 * mBART-50): one model, one forward pass, a few switches per family (s2s_family: weights,
 * tokenizer, configuration). Names are prefixed s2s_. Internal to libattend; the public API is attend.h. */
#ifndef ATTEND_SEQ2SEQ_H
#define ATTEND_SEQ2SEQ_H

#include <stddef.h>

#include "../engine/kernels.h"
#include "../tokenizer/spm.h"
#include "../tokenizer/vocab.h"
#include "../weights/gguf.h"

/* Version 2 adds int8 matrices (I8 + per-row F32 scales); f32/f16 files stay version 1. */
#define S2S_FORMAT_VERSION 2

/* The generation defaults a checkpoint records (the generation.* keys of FORMAT.md). */
typedef struct {
    int recorded; /* 0: an older file without them: decode greedily */
    int num_beams, early_stopping, min_length, no_repeat_ngram, renormalize;
    float length_penalty, repetition_penalty;
} s2s_generation;

/* How token positions become vectors. */
typedef enum {
    POS_MARIAN,  /* position p = token index; angle p / 10000^(2*(j//2)/d), sines of even j
                    then cosines of odd j (HF Marian, float64) */
    POS_FAIRSEQ, /* position p = token index + pad_id + 1 (pad_id for a <pad> token); sin
                    then cos of p * exp(-j * log(10000) / (d/2 - 1)), a zero column when d
                    is odd, row pad_id zero (fairseq / HF M2M-100, float32) */
    POS_LEARNED, /* position p = token index; row p + family->pos_offset of the side's
                    stored table (enc/dec.embed_positions.weight; HF mBART's offset of 2,
                    Whisper's 0) */
    POS_RELATIVE, /* none in the embeddings: a learned bias per head and relative-distance
                     bucket added to every self-attention score (T5; layers.h) */
} pos_kind;

/* What one family does differently: chosen by general.architecture, never stored. */
typedef struct {
    const char *name;   /* general.architecture, also the prefix of its keys */
    int pre_norm;       /* x + f(LN(x)) around each sublayer, instead of LN(x + f(x)) */
    int final_norms;    /* a LayerNorm after the encoder stack and after the decoder stack */
    int embed_norm;     /* a LayerNorm on the embeddings (mBART's layernorm_embedding) */
    pos_kind positions;
    int logits_bias;    /* the final_logits_bias tensor is added to the logits */
    int ban_pad;        /* <pad> is never generated (Marian: bad_words_ids and
                           adjust_logits_during_generation) */
    int text_codes;     /* a >>xx<< code in the source text is one piece (MarianTokenizer) */
    int unk_space;      /* decoded text puts a space after a <unk> (MarianTokenizer) */
    int languages;      /* language tokens: tokenizer.languages / language_ids required; the
                           text is split at added tokens typed in it (<s>, </s>, <pad>, <unk>,
                           <mask>, language codes), each its own id, as HF's tokenizers do */
    int mask;           /* a <mask> token: <family>.mask_id required, skipped when decoding */
    int rms_norm;       /* T5's LayerNorm: x / rms(x) * g, no mean, no bias (at_rmsnorm) */
    int biases;         /* the linear layers have biases (T5's have none) */
    int scaled_scores;  /* attention scores divided by sqrt(head width) (T5's are not) */
    int sentinels;      /* T5Tokenizer: <pad> </s> <unk> and the <extra_id_N> pieces typed in the
                           text are their ids (an extra id eats the whitespace on both sides); no
                           second </s> after a typed one; decoding skips them and ids without
                           a piece */
    int pos_offset;     /* POS_LEARNED: the stored row of position 0 */
    int audio;          /* the encoder reads log-mel frames through two convolutions, not
                           token ids (Whisper; model/audio_encoder.c) */
} s2s_family;

/* A speech model's tokens and decoding rules (family->audio; the whisper.* keys). */
typedef struct {
    int n_mels;          /* log-mel bins of the input (80 or 128) */
    int n_frames;        /* encoder frames: whisper.max_source_positions; the input has twice as many */
    int no_timestamps_id, timestamp_begin_id, transcribe_id, translate_id, prev_id;
    int no_speech_id;    /* decoder_vocab_size when the tokenizer has none */
    int max_initial_timestamp; /* HF's max_initial_timestamp_index */
    int multilingual;    /* the prompt names the language and the task (not *.en models) */
    int forced_task_id;  /* the task token of the checkpoint's forced_decoder_ids, -1: none
                            (whisper.forced_task_id; files without it: transcribe_id) */
    int forced_language_id; /* the language token of the checkpoint's forced_decoder_ids, -1:
                               none (whisper.forced_language_id; files without it: none) */
} s2s_speech;

typedef struct {
    const s2s_family *family;
    int vocab_size, decoder_vocab_size, d_model;
    int enc_layers, dec_layers, enc_heads, dec_heads, enc_ffn, dec_ffn, max_pos;
    at_activation act;
    int scale_embedding, shared_embeddings, tied_output, forced_eos;
    float eps;
    int pad_id, eos_id, unk_id, start_id, max_length;
    int bos_id; /* <s>, skipped when decoding text; -1 when the family has none (Marian) */
    int mask_id; /* <mask> (family->mask), skipped when decoding text; else -1 */
    int model_max_length; /* source tokens kept: tokenizer.model_max_length, at most max_pos */
    int enc_hd, dec_hd; /* a head's width: d_model / heads, or t5.d_kv (heads * d_kv may differ
                           from d_model: the attention's inner width, enc/dec_inner) */
    int enc_inner, dec_inner;
    int rel_buckets, rel_max_distance; /* POS_RELATIVE: t5.relative_buckets / _max_distance */
    int gated_ffn;      /* t5.gated_ffn: fc2(act(fc1 x) * gate x) */
    float out_scale;    /* the decoder's output times this before the output projection
                           (t5.scale_output: d_model^-0.5), else 1 */
    s2s_generation gen;
    s2s_speech speech;  /* family->audio only */
    char align_view[512]; /* the alignment view: the file's attend.alignment.view, else the default */
    int align_view_recorded;
    /* A trained alignment head (attend.align_head.*; model/align_head.c): the decoder layer
     * whose cross-attention input its query reads and its width; width 0: the file has none */
    int align_head_layer, align_head_width;
} s2s_config;

typedef struct {
    at_matrix w;
    const float *b;
} linear;

typedef struct {
    const float *g, *b;
} norm;

typedef struct {
    linear q, k, v, o;
} attn_weights;

typedef struct {
    attn_weights self_attn;
    norm self_attn_norm;
    linear fc1, gate, fc2; /* gate: c.gated_ffn only */
    norm ffn_norm;
} enc_layer;

typedef struct {
    attn_weights self_attn;
    norm self_attn_norm;
    attn_weights cross_attn;
    norm cross_attn_norm;
    linear fc1, gate, fc2;
    norm ffn_norm;
} dec_layer;

typedef struct s2s_vector_ref {
    const float **ref; /* the field that points at the vector */
    int n;             /* floats */
} s2s_vector_ref;

typedef struct s2s_model {
    s2s_config c;
    gguf_file *file;
    int dtype; /* of the matrices: AT_F32, AT_F16 or AT_I8 (mixed files report the smallest) */
    int32_t **i8_sums; /* owned row sums of the int8 matrices (at_matrix.wsum) */
    int n_i8_sums;
    void *packed;      /* owned: the packed copies of the matrices, one block (s2s_pack) */
    int bf16;          /* s2s_pack converts the f32 / f16 matrices to bf16 (bf16 compute) */
    /* every vector bound to the file (biases, norms, int8 scales): where its pointer lives and
     * its length, so s2s_pack can copy them out of the mapping (s2s_vector_ref) */
    struct s2s_vector_ref *vec_refs;
    int n_vec_refs;
    float *vectors;    /* owned: those copies, one block (s2s_pack) */
    at_matrix enc_embed, dec_embed, out_proj;
    const float *final_logits_bias; /* NULL unless family->logits_bias */
    norm enc_final_norm, dec_final_norm; /* family->final_norms */
    norm enc_embed_norm, dec_embed_norm; /* family->embed_norm */
    at_matrix enc_pos, dec_pos; /* POS_LEARNED: [max_pos + pos_offset, d] tables, position p at row
                                   p + pos_offset (Whisper's encoder: [speech.n_frames, d]) */
    linear conv1, conv2;        /* family->audio: [d, 3 n_mels] and [d, 3 d], kernel tap-major */
    const float *mel_filters;   /* family->audio: the file's bank [n_mels, 201], else NULL */
    /* family->audio: whisper.suppress_tokens, .begin_suppress_tokens, .alignment_heads
     * ((layer, head) pairs: n_alignment_heads of them), owned copies */
    int *suppress_ids, *begin_suppress_ids, *alignment_heads;
    int n_suppress_ids, n_begin_suppress_ids, n_alignment_heads;
    /* POS_RELATIVE: [rel_buckets, heads] of each stack, bucket-major (HF's
     * relative_attention_bias.weight of its first layer, used by every layer) */
    const float *enc_rel_bias, *dec_rel_bias;
    int n_langs;       /* language tokens (family->languages), in the file's order */
    char **lang_code;  /* [n_langs] NUL-terminated codes, e.g. "de" */
    int *lang_id;      /* [n_langs] the id of each code's token, e.g. of __de__ */
    int nllb;          /* tokenizer.class "NllbTokenizer": decoded text joins the pieces
                          (HF's NllbTokenizer), skipping <mask> and ids without a piece */
    int n_added;       /* multilingual families: HF's added tokens, cut out of the text
                          before SentencePiece sees it (<s> <pad> </s> <unk>, the language
                          tokens, <mask>), their ids; their pieces are the vocabulary's */
    int *added_id;     /* [n_added], ordered by their pieces' first byte: those starting */
    int added_start[257]; /* with byte b are added_id[added_start[b] .. added_start[b+1]) */
    int n_tasks;       /* task prefixes (<family>.tasks / .task_prefixes; model/tasks.c) */
    char **task_name, **task_prefix; /* [n_tasks] NUL-terminated copies */
    enc_layer *enc;
    dec_layer *dec;
    float *positions; /* [n_positions, d] sinusoids: s2s_position() reads them */
    int n_positions;  /* the rows cached: min(positions used, S2S_POSITIONS_CACHED) */
    spm_model *src_spm, *tgt_spm;
    struct bpe_model *bpe; /* family->audio: the byte-level BPE tokenizer (tokenizer/bpe.h) */
    vocab *src_vocab, *tgt_vocab;
    /* c.align_head_width > 0: the head's projections, f32, [width, d] and [width] */
    const float *align_q_w, *align_q_b, *align_k_w, *align_k_b;
} s2s_model;

/* Position pos (as the family numbers them, pos_kind) of the encoder (dec 0) or decoder
 * (dec 1) as d floats. Sinusoids: a row of the table for the first S2S_POSITIONS_CACHED
 * positions, else computed into buf (d floats), identically. Learned (POS_LEARNED): the
 * side's stored row pos + 2 copied into buf; callers keep pos < max_pos (a position
 * beyond the table reads as zeros, never outside it). */
#ifndef S2S_POSITIONS_CACHED
#define S2S_POSITIONS_CACHED 1024 /* tests build with fewer to run the computed path */
#endif
const float *s2s_position(const s2s_model *m, int dec, int pos, float *buf);
/* The position number of token `id` at index i of its sequence, after pads_before <pad>
 * tokens: Marian and learned i (HF mBART counts every token, <pad> too); fairseq
 * i - pads_before + pad_id + 1, and pad_id for <pad> itself (HF M2M-100's cumulative count
 * of non-pad tokens; decoder steps pass 0: with a cache, HF counts every earlier step). */
int s2s_position_of(const s2s_config *c, int id, int i, int pads_before);

/* Load and check a checkpoint: every key, tensor name, dtype and shape against the config.
 * Returns NULL with a one-line message in err. */
s2s_model *s2s_load(const char *path, char *err, size_t errlen);
/* The same from a buffer the caller keeps until s2s_free (used by the fuzzer). */
s2s_model *s2s_load_buffer(const void *buf, size_t len, char *err, size_t errlen);
/* s2s_load, then s2s_verify: what every command that uses a model's values loads
 * with (nothing in a model file is trusted). */
s2s_model *s2s_load_verified(const char *path, char *err, size_t errlen);
/* s2s_load_verified, then s2s_pack: what translating loads with. */
s2s_model *s2s_load_for_inference(const char *path, char *err, size_t errlen);
/* Repack every matrix a linear layer reads into the packed layout (at_matrix_pack), which
 * batch-1 decoding reads much faster, and let the file's copies leave memory. The
 * embeddings are packed only where they are the output projection's matrix too. Call after
 * s2s_verify (the checks read the file's bytes). Returns 0, or -1 if out of memory
 * (the model stays usable, row-major). */
int s2s_pack(s2s_model *m, char *err, size_t errlen);
void s2s_free(s2s_model *m);

/* The prefix task `name` writes before each source, or NULL when the model has no such
 * task (model/tasks.c). */
const char *s2s_task_prefix(const s2s_model *m, const char *name);

/* Check the metadata's CRC-32 (when present), every tensor's CRC-32 and that every weight
 * is finite. Returns 0, or -1 naming the first bad tensor (and row and column of a
 * matrix's non-finite element). */
int s2s_verify(const s2s_model *m, char *err, size_t errlen);

#endif
