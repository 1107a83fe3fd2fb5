/* translate: decoding a batch of sentences on top of layers.h: greedy, beam search (as
 * Hugging Face's generate), sampling, and forced decoding.
 *
 * Sentences of a batch are packed one after another (no padding), the weights are read once
 * per step for all their hypotheses, and finished sentences leave the batch. Each
 * hypothesis is computed exactly as if it were alone, so results never depend on batch
 * composition. */
#ifndef ATTEND_TRANSLATE_H
#define ATTEND_TRANSLATE_H

#include "../tokenizer/text.h"
#include "seq2seq.h"

/* A source's encoder output kept across calls on the same source (s2s_source.encoded):
 * Whisper's temperature fallback decodes one window again at each temperature. */
typedef struct s2s_encoded {
    float *x;  /* [n, d_model] the caller's buffer: the encoder's final states */
    int ready; /* x holds them: the encoder is skipped (set by the call that fills x) */
} s2s_encoded;

typedef struct {
    const int *ids; /* source ids, ending in </s>; at most max_position_embeddings */
    int n;
    /* a speech model's input instead (family->audio): log-mel features
     * [n_mels, 2 * speech.n_frames], with ids NULL and n = speech.n_frames */
    const float *mel;
    const int *forced; /* if not NULL: decode exactly these target ids (teacher forcing) */
    int n_forced;
    /* if not NULL (and no forced): these target ids first, each fed as forced decoding feeds
     * its tokens, then the search continues from them (HF's generate with
     * decoder_input_ids = [start, *prefix]); 1..max_length - 2 of them */
    const int *prefix;
    int n_prefix;
    /* if not NULL: receives the raw logits of the first step (decoder_vocab_size floats:
     * the logits after the start token; Whisper's no-speech probability reads them) */
    float *first_logits;
    /* if not NULL (with a prefix): the prefix's first token is chosen at the first step, the
     * one of these n_first_choices ids with the highest raw logit (the first of equals), and
     * written into prefix[0] (writable then): Whisper's language detection (HF's
     * detect_language) inside the decode, on the same encoder output */
    const int *first_choices;
    int n_first_choices;
    /* if not NULL: this source's encoder output, filled by a call that finds it not ready and
     * read instead of encoding by the next (when every source of the batch has one ready and
     * no want_attention asks for the encoder's attention, which is not kept) */
    s2s_encoded *encoded;
} s2s_source;

/* How to search, fully resolved (s2s_search_defaults gives the model's). */
typedef struct {
    int beams;                /* 1: greedy (or sampling); >= 2: beam search */
    int n_best;               /* hypotheses kept per sentence: <= beams, or samples drawn */
    float length_penalty;     /* beam score = sum of log-probs / length ^ length_penalty */
    int early_stopping;       /* S2S_EARLY_FALSE, _TRUE or _NEVER (HF's False, True, "never") */
    int min_length;           /* </s> banned while fewer tokens (start token counted) */
    int no_repeat_ngram;      /* no n-gram of this size twice (0: off) */
    float repetition_penalty; /* HF's CTRL-style penalty on tokens already present (1: off) */
    int renormalize;          /* log-softmax again after the logits processors */
    int sample;               /* draw tokens instead of choosing (beams must be 1) */
    int top_k;                /* sampling: only the k most likely (0: all) */
    float top_p;              /* sampling: only the smallest set holding this mass (1: all) */
    float temperature;        /* sampling: logits / temperature */
    unsigned long long seed;  /* sampling: with the sentence's ids, seeds its stream */
    int forced_bos;           /* the first generated token (a target language), or -1 */
    /* token sequences never generated (HF's bad_words_ids, CT2's suppress_sequences): a
     * sequence's last id is banned where the ids before it end the prefix; one-id sequences
     * are banned everywhere. Sequence k: suppress[k][0 .. suppress_len[k]) (the caller's). */
    const int *const *suppress;
    const int *suppress_len;
    int n_suppress;
    int disable_unk;          /* <unk> never generated (CT2's disable_unk) */
    /* Speech models: Whisper's processors, after the others as HF's generate orders them
     * (SuppressTokensAtBegin, SuppressTokens, WhisperTimeStampLogitsProcessor) */
    const int *suppress_tokens;   /* banned at every step (the caller's) */
    int n_suppress_tokens;
    const int *begin_suppress;    /* banned where the input holds begin_index ids */
    int n_begin_suppress;
    int begin_index;              /* the decoder prompt's length, start token included */
    int timestamps;               /* the timestamp rules (c->speech's ids) */
    /* greedy and sampling: a token's log-probability (want_scores) under the processed
     * scores HF records (log_softmax of the processed logits; sampling: over its top-k),
     * not the model's own: HF's avg_logprob for Whisper's temperature fallback */
    int processed_logprob;
} s2s_search;

enum { S2S_EARLY_FALSE = 0, S2S_EARLY_TRUE = 1, S2S_EARLY_NEVER = 2 };

/* The model's recorded generation defaults (greedy for files that record none). */
s2s_search s2s_search_defaults(const s2s_model *m);
/* Check a search's values; 0, or -1 with a message naming the bad one. */
int s2s_search_check(const s2s_search *s, char *err, size_t errlen);

typedef struct {
    const s2s_search *search; /* NULL: the model's defaults */
    int max_length;     /* generation limit counting the start token; 0 = the model's */
    int want_logits;    /* keep raw logits of every step */
    int want_scores;    /* keep log-probability of every chosen token */
    int want_attention; /* keep every attention probability matrix */
    int ignore_eos;     /* never choose </s> before the limit: exactly max_length-1 tokens
                           (benchmarks; default off) */
    struct s2s_timing *timing; /* if not NULL: receives where the time went */
    const volatile int *stop;  /* if not NULL: checked before each decoder step; non-zero
                                  ends the call (-1, "stopped by the caller") */
    /* if not NULL: each token greedy search or sampling chooses, as it is chosen (sentence:
     * its index in this call, row: the sample) */
    void (*on_token)(void *user, int sentence, int row, int id, float logprob);
    void *token_user;
    /* if n_cross_heads > 0: keep only these cross-attention heads, (layer, head) pairs
     * cross_heads[2k], cross_heads[2k + 1], along the output's path (s2s_output.head_cross;
     * Whisper's alignment heads), a fraction of want_attention's every matrix */
    const int *cross_heads;
    int n_cross_heads;
} s2s_opts;

/* Wall-clock seconds of one s2s_translate_ids call, by phase. */
typedef struct s2s_timing {
    double encode; /* embeddings, encoder, cross-attention keys/values */
    double decode; /* the step loop */
    int steps;     /* decoder steps run */
    int encoded;   /* sources run through the encoder (0 when all were s2s_source.encoded) */
} s2s_timing;

/* A hypothesis's two scores (a target prefix's tokens left out of both). score: the sum of
 * its tokens' log-probabilities (beams: the running beam score, the log-probabilities after
 * the logits processors as HF sums them); normalized_score: score / length ^ length_penalty
 * (normalize_score; beams: HF's sequence score). Greedy, sampling and forced: NaN without
 * want_scores (their log-probabilities cost a log-softmax per token). */
typedef struct {
    float score, normalized_score;
} s2s_score;

/* One hypothesis of an n-best list. */
typedef struct {
    int *ids, n;
    float score, normalized_score; /* see s2s_score */
    /* along its own path, as s2s_output's (nbest[0]'s are the output's own arrays) */
    float *logprob;  /* [n] (want_scores) */
    float *dec_self; /* [dec_layers, dec_heads, n, n] (want_attention) */
    float *cross;    /* [dec_layers, dec_heads, n, S] */
    float *align_head; /* [n, S] (want_attention, a model with a trained alignment head) */
} s2s_hyp;

typedef struct {
    int *ids; /* generated ids, ending in </s> unless cut by max_length without forced EOS */
    int n;
    float score, normalized_score; /* the output hypothesis's (see s2s_score) */
    s2s_hyp *nbest; /* [n_best] best first; nbest[0] is the output itself */
    int n_best;
    float *logits;   /* [n, decoder_vocab_size] raw logits (want_logits) */
    float *logprob;  /* [n] log-softmax of each token under the model (want_scores); with
                        beams, of the output hypothesis's own path */
    float *enc_self; /* [enc_layers, enc_heads, S, S] (want_attention) */
    float *dec_self; /* [dec_layers, dec_heads, n, n], zero above the diagonal */
    float *cross;    /* [dec_layers, dec_heads, n, S] */
    float *head_cross; /* [n_cross_heads, n, S] (s2s_opts.cross_heads) */
    float *align_head; /* [n, S] the trained alignment head's rows (want_attention, a model with one) */
} s2s_output;

/* Translate n sources. out[i] receives sentence i's results (free with s2s_output_free).
 * Returns 0, or -1 with err set (only for out-of-memory or invalid arguments). */
int s2s_translate_ids(const s2s_model *m, const s2s_source *src, int n,
                         const s2s_opts *opts, s2s_output *out, char *err, size_t errlen);
void s2s_output_free(s2s_output *o);

/* The effective generation limit for opts (counts the start token). */
int s2s_max_length(const s2s_model *m, const s2s_opts *opts);

/* Text <-> ids (s2s_encode_text*, s2s_decode_text) are tokenizer/text.h's, included above for
 * the callers that translate text. */

#endif
