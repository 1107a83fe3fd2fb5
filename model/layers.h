/* layers: the transformer's computation (every family, s2s_family's switches), with no
 * decoding policy in it: encoder.c and decoder.c.
 *
 *   encode          source ids of a packed batch -> final encoder states   [total, d]
 *   cross_kv        encoder states -> each decoder layer's cross-attention keys/values,
 *                   once per sentence and shared by all its hypotheses
 *   decoder_step    one target position for a set of rows (hypotheses): each row reads
 *                   and extends its own self-attention cache, and gets a row of logits
 *
 * Sentences are packed one after another without padding, and every row is computed
 * exactly as if it were alone, so results never depend on batch composition.
 * Internal to libattend. */
#ifndef ATTEND_LAYERS_H
#define ATTEND_LAYERS_H

#include "seq2seq.h"

/* The encoder side of a batch: sentence i holds rows off[i] .. off[i] + len[i] - 1. */
typedef struct {
    int n;              /* sentences */
    int total;          /* source rows, the sum of len */
    const int *off, *len;
    /* [dec_layers] -> [total, dec_inner]; sentence i's rows (at off[i] * dec_inner) head by
     * head: [dec_heads][len[i]][dec_hd], so a thread's heads are one run of memory each
     * (side by side in each row, two threads each read half of every row: slower than one) */
    float **cross_k;
    float **cross_v;
    float *cross_block; /* where cross_k and cross_v point: one block (at_block_alloc) */
    size_t cross_bytes;
    float *align_k; /* [total, align_head_width]: the alignment head's keys (align_head_keys), or NULL */
} enc_memory;

/* Embed and encode n packed sources (ids[i] of len[i] ids, rows from off[i]) into
 * X [total, d]. enc_self[i] (optional, per sentence) receives
 * [enc_layers, enc_heads, len[i], len[i]] attention probabilities. stop (optional) is read
 * before each layer. 0, -1 if out of memory, -2 when *stop was set. */
int encode(const s2s_model *m, const int *const *ids, const int *off, const int *len, int n,
           int total, float *X, float *const *enc_self, const volatile int *stop);
/* The same for a speech model (family->audio): mels[i] is sentence i's log-mel features
 * [n_mels, 2 * speech.n_frames] (len[i] = speech.n_frames rows). */
int encode_audio(const s2s_model *m, const float *const *mels, const int *off, const int *len, int n,
                 int total, float *X, float *const *enc_self, const volatile int *stop);
/* One input's rows of X [speech.n_frames, d]: convolutions, GELU, positions
 * (model/audio_encoder.c). 0 or -1 (OOM). */
int encode_audio_input(const s2s_model *m, const float *mel, float *X);

/* Fill mem->cross_k / cross_v (allocating them) from the encoder states X. 0 or -1 (OOM). */
int cross_kv(const s2s_model *m, const float *X, enc_memory *mem);
void enc_memory_free(const s2s_model *m, enc_memory *mem);

/* One row of a decoder step. */
typedef struct {
    int sent;  /* its sentence: encoder rows and cross keys/values */
    int slot;  /* its self-attention cache */
    int token; /* its input id at this position */
} dec_row;

/* The decoder's workspace: self-attention caches for n_slots hypotheses, each holding
 * `cap` positions of every layer, and the buffers of one step of up to max_rows rows.
 * Allocated once before the step loop; dec_reserve grows the caches (rarely). */
typedef struct {
    const s2s_model *m;
    const enc_memory *mem;
    int n_slots, cap, max_rows, max_src;
    float **self_k, **self_v;  /* [slot * dec_layers + l] -> [cap, dec_inner] */
    float *cache;              /* where self_k and self_v point: one block (at_block_alloc) */
    size_t cache_bytes, logits_bytes;
    float *x, *q, *k, *v, *ctx, *tmp;  /* [max_rows, max(d, dec_inner)] */
    float *h;                  /* [max_rows, d] a sublayer's normalized input (pre-norm) */
    float *ff, *gate;          /* [max_rows, dec_ffn] (gate: c.gated_ffn) */
    float *relbias;            /* POS_RELATIVE: [heads, cap] one step's self-attention biases */
    float *logits;             /* [max_rows, decoder_vocab_size]: written by decoder_step (at_block_alloc) */
    float *scratch;            /* [max_rows, heads * max(cap, max_src)] attention scores */
    int (*copies)[3];          /* [n_slots] slot copies queued (dst, src, len) for dec_run_copies */
    int n_copies;
} dec_state;

int dec_init(dec_state *s, const s2s_model *m, const enc_memory *mem, int n_slots, int max_rows,
             int cap);
/* Make every slot hold at least `positions` positions. 0 or -1 (OOM; the state stays valid). */
int dec_reserve(dec_state *s, int positions);
/* Queue a copy of positions 0 .. len-1 of every layer of slot src into slot dst (a beam that
 * branched); dec_run_copies does the queued ones, which must not read what another writes. */
void dec_copy_slot(dec_state *s, int dst, int src, int len);
/* The queued copies, spread over the threads, before the next step reads the caches. */
void dec_run_copies(dec_state *s);
void dec_free(dec_state *s);

/* Run position t for rows[0..n): embeds each row's token, appends its keys/values at
 * position t of its slot, and writes n rows of raw logits to s->logits. att_self[b] /
 * att_cross[b] (optional) receive row b's attention probabilities, laid out
 * [dec_layers][dec_heads][t + 1] and [dec_layers][dec_heads][len of its sentence]. */
void decoder_step(dec_state *s, const dec_row *rows, int n, int t, float *const *att_self,
                  float *const *att_cross);

/* POS_RELATIVE (model/relative.c): the bucket of distance rel (key - query position), and
 * the biases of distances rel_lo .. rel_lo + n - 1 of the encoder's (dec 0) or decoder's
 * stack: out[h * stride_h + k] for distance rel_lo + k, head h. */
int s2s_relative_bucket(int rel, int bidirectional, int buckets, int max_distance);
void s2s_relative_bias(const s2s_model *m, int dec, int rel_lo, int n, float *out, ptrdiff_t stride_h);

#endif
