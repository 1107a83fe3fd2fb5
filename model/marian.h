/* marian: the MarianMT transformer (weights, tokenizer, forward passes, greedy decoding).
 * Internal to libattend; the public API is attend.h. */
#ifndef ATTEND_MARIAN_H
#define ATTEND_MARIAN_H

#include <stddef.h>

#include "../engine/kernels.h"
#include "../tokenizer/spm.h"
#include "../tokenizer/vocab.h"
#include "../weights/gguf.h"

/* Version 2 adds int8 matrices (I8 + per-row F32 scales); f32/f16 files stay version 1. */
#define MARIAN_FORMAT_VERSION 2

/* The generation defaults a checkpoint records (the generation.* keys of FORMAT.md). */
typedef struct {
    int recorded; /* 0: an older file without them: decode greedily */
    int num_beams, early_stopping, min_length, no_repeat_ngram, renormalize;
    float length_penalty, repetition_penalty;
} marian_generation;

typedef struct {
    int vocab_size, decoder_vocab_size, d_model;
    int enc_layers, dec_layers, enc_heads, dec_heads, enc_ffn, dec_ffn, max_pos;
    at_activation act;
    int scale_embedding, shared_embeddings, tied_output, forced_eos;
    float eps;
    int pad_id, eos_id, unk_id, start_id, max_length;
    int model_max_length; /* source tokens kept: tokenizer.model_max_length, at most max_pos */
    marian_generation gen;
} marian_config;

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
    linear fc1, fc2;
    norm ffn_norm;
} enc_layer;

typedef struct {
    attn_weights self_attn;
    norm self_attn_norm;
    attn_weights cross_attn;
    norm cross_attn_norm;
    linear fc1, fc2;
    norm ffn_norm;
} dec_layer;

typedef struct marian_model {
    marian_config c;
    gguf_file *file;
    int dtype; /* of the matrices: AT_F32, AT_F16 or AT_I8 (mixed files report the smallest) */
    int32_t **i8_sums; /* owned row sums of the int8 matrices (at_matrix.wsum) */
    int n_i8_sums;
    void *packed;      /* owned: the packed copies of the matrices, one block (marian_pack) */
    at_matrix enc_embed, dec_embed, out_proj;
    const float *final_logits_bias;
    enc_layer *enc;
    dec_layer *dec;
    float *positions; /* [n_positions, d] sinusoids: marian_position() reads them */
    int n_positions;  /* min(max_pos, MARIAN_POSITIONS_CACHED) */
    spm_model *src_spm, *tgt_spm;
    vocab *src_vocab, *tgt_vocab;
} marian_model;

/* Sinusoidal position pos (0 <= pos < max_pos) as d floats: a row of the table for the
 * first MARIAN_POSITIONS_CACHED positions, else computed into buf (d floats), identically. */
#ifndef MARIAN_POSITIONS_CACHED
#define MARIAN_POSITIONS_CACHED 1024 /* tests build with fewer to run the computed path */
#endif
const float *marian_position(const marian_model *m, int pos, float *buf);

/* Load and check a checkpoint: every key, tensor name, dtype and shape against the config.
 * Returns NULL with a one-line message in err. */
marian_model *marian_load(const char *path, char *err, size_t errlen);
/* The same from a buffer the caller keeps until marian_free (used by the fuzzer). */
marian_model *marian_load_buffer(const void *buf, size_t len, char *err, size_t errlen);
/* marian_load, then marian_verify: what every command that uses a model's values loads
 * with (nothing in a model file is trusted). */
marian_model *marian_load_verified(const char *path, char *err, size_t errlen);
/* marian_load_verified, then marian_pack: what translating loads with. */
marian_model *marian_load_for_inference(const char *path, char *err, size_t errlen);
/* Repack every matrix a linear layer reads into the packed layout (at_matrix_pack), which
 * batch-1 decoding reads much faster, and let the file's copies leave memory. The
 * embeddings are packed only where they are the output projection's matrix too. Call after
 * marian_verify (the checks read the file's bytes). Returns 0, or -1 if out of memory
 * (the model stays usable, row-major). */
int marian_pack(marian_model *m, char *err, size_t errlen);
void marian_free(marian_model *m);

/* Check the metadata's CRC-32 (when present), every tensor's CRC-32 and that every weight
 * is finite. Returns 0, or -1 naming the first bad tensor (and row and column of a
 * matrix's non-finite element). */
int marian_verify(const marian_model *m, char *err, size_t errlen);

#endif
