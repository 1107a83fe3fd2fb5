/* attend: translate with MarianMT / OPUS-MT, M2M-100, NLLB-200 and mBART-50 checkpoints and see where the model looked.
 *
 *   #include <attend.h>
 *   char err[256];
 *   attend_model *m = attend_load("opus-mt-de-en.gguf", err, sizeof err);
 *   if (!m) { fprintf(stderr, "%s\n", err); return 1; }
 *   attend_params p = attend_default_params();   (the model's own search: beams for OPUS-MT)
 *   p.num_beams = 5, p.n_best = 3;               (or override it)
 *   const char *lines[] = {"Wo ist der Bahnhof?"};
 *   attend_result r[1];
 *   if (attend_translate(m, lines, NULL, 1, NULL, &p, r, err, sizeof err) == 0) {
 *       for (int k = 0; k < r[0].n_best; k++)
 *           printf("%s ||| %.4f\n", r[0].nbest[k].text, r[0].nbest[k].normalized_score);
 *       attend_result_free(&r[0]);
 *   }
 *   attend_free(m);
 *
 * Thread safety: a loaded model is read-only; attend_translate may run from several threads
 * on one model at once, each call with its own attend_params.threads (the library keeps no
 * global thread count: it sets the calling thread's thread count for the call and puts
 * the caller's back after). Each calling thread gets its own pool of worker threads on its
 * first call with threads > 1; they sleep between calls and end when that thread exits.
 * tests/test_api_threads.c checks this, also under
 * ThreadSanitizer (make tsan). Library functions never print and never exit: failures
 * return a status and a one-line message in err. */
#ifndef ATTEND_H
#define ATTEND_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What the shared library exports: these functions only (built with -fvisibility=hidden and
 * a version script, model/attend.map). */
#if defined(__GNUC__)
#define ATTEND_API __attribute__((visibility("default")))
#else
#define ATTEND_API
#endif

/* The library's version: major.minor.patch (attend_version() gives the one linked in). */
#define ATTEND_VERSION "0.4.0"
ATTEND_API const char *attend_version(void);
/* The layout of the public structs: raised whenever a field is added, moved or changed, so a
 * program (or the Python package) can refuse a libattend.so built from another header. */
#define ATTEND_ABI 15
ATTEND_API int attend_abi(void);
/* Free what the library malloc'd for the caller (attend_alignment's, attend_pharaoh's and
 * attend_detokenize's strings, attend_tokenize's ids), from any language. */
ATTEND_API void attend_mem_free(void *p);

typedef struct attend_model attend_model;

typedef struct {
    int vocab_size, decoder_vocab_size, d_model;
    int encoder_layers, decoder_layers, encoder_heads, decoder_heads;
    int encoder_ffn_dim, decoder_ffn_dim, max_position_embeddings, max_length;
    const char *activation; /* "swish", "relu", "gelu" or "gelu_tanh"; "gated-" before it for
                             * a gated FFN (T5 v1.1, flan-t5, mT5: "gated-gelu_tanh") */
    int scale_embedding, shared_embeddings, tied_output, forced_eos;
    int pad_id, eos_id, unk_id, decoder_start_id;
    const char *dtype; /* "f32", "f16" or "int8" (matrices) */
    long long tensor_count, file_bytes;
    int metadata_checksum; /* the file records a CRC-32 of its metadata (attend_load checks it) */
    int model_max_length;  /* source tokens kept (the tokenizer's limit, <= max positions) */
    /* Generation defaults the file records (HF generation_config). generation_recorded 0: an
     * older file without them, decoded greedily; the fields then hold HF's class defaults. */
    int generation_recorded, num_beams, early_stopping, min_length, no_repeat_ngram_size;
    int renormalize_logits;
    float length_penalty, repetition_penalty;
    long long max_line_bytes; /* bytes of a line the tokenizer reads (the rest is cut) */
    const char *architecture; /* the model family: "marian", "m2m_100" or "mbart" */
    /* Multilingual families (m2m_100, mbart): the language codes attend_params.src_lang / tgt_lang
     * take, e.g. "de", in the file's order, and the id of each code's token (__de__).
     * Both arrays belong to the model: read-only, valid until attend_free. */
    int n_languages;
    char **languages;
    int *language_ids;
    /* The attention view word alignments use when none is given (align.h): the one the file
     * records (key attend.alignment.view; alignment_view_recorded 1), else the default for
     * the model's decoder depth (attend_default_view). Read-only, valid until attend_free. */
    const char *alignment_view;
    int alignment_view_recorded;
    /* Task prefixes (T5's task_specific_params): attend_params.task takes a name, e.g.
     * "translation_en_to_de", and writes its prefix ("translate English to German: ")
     * before each source. Both arrays belong to the model, as the languages. */
    int n_tasks;
    char **tasks;
    char **task_prefixes;
    /* A head's width (d_model / heads, or T5's d_kv: heads * d_kv may differ from d_model),
     * and T5's relative position buckets and their largest distance (0 for other families). */
    int encoder_head_dim, decoder_head_dim, relative_buckets, relative_max_distance;
    /* A speech model (Whisper: audio in, text out): its log-mel bins and the frames of one
     * window of features (3000: 30 s of 10 ms frames); 0 for text models. */
    int audio, n_mels, audio_frames;
    /* Whisper's alignment heads (generation_config's alignment_heads: the cross-attention
     * heads word timestamps read): n_alignment_heads (layer, head) pairs, alignment_heads[2k]
     * the layer and alignment_heads[2k + 1] the head, in the file's order. 0 and NULL for text
     * models. Read-only, valid until attend_free. */
    int n_alignment_heads;
    const int *alignment_heads;
    /* A trained alignment head in the file (attend.align_head.*, issue 38): the decoder layer
     * whose cross-attention input its query reads, and its width; -1 and 0 without one. A
     * view names it as the item `align` (align.h); attend_result.align_head holds its rows. */
    int align_head_layer, align_head_width;
} attend_config;

/* attend_params.early_stopping (HF's early_stopping False, True, "never") */
enum { ATTEND_EARLY_MODEL = 0, ATTEND_EARLY_FALSE, ATTEND_EARLY_TRUE, ATTEND_EARLY_NEVER };

typedef struct {
    int threads;        /* 0 = attend_default_threads() */
    int max_length;     /* generation limit counting the start token; 0 = the model's */
    int want_scores;    /* fill attend_result.logprob */
    int want_logits;    /* fill attend_result.logits */
    int want_attention; /* fill the attention matrices */
    /* Search. Zero everywhere = the model's generation defaults, as HF's generate() uses
     * them (greedy for files that record none). */
    int num_beams;      /* 0: the model's; 1: greedy; N: beam search with N beams */
    int n_best;         /* 0 or 1: the best hypothesis only; K: the K best (K <= beams), or
                         * K samples with `sample` */
    int early_stopping; /* ATTEND_EARLY_MODEL or _FALSE / _TRUE / _NEVER */
    int set_length_penalty; /* use length_penalty instead of the model's */
    float length_penalty;   /* normalized_score = score / length ^ length_penalty (beams rank by it) */
    int set_min_length;     /* use min_length instead of the model's */
    int min_length;         /* </s> banned below this length (start token counted, as HF) */
    int set_no_repeat_ngram_size;
    int no_repeat_ngram_size;
    float repetition_penalty; /* 0: the model's; 1: off */
    int sample;         /* draw tokens at random (num_beams must be 0 or 1) */
    int top_k;          /* sampling: only the k most likely tokens (0: all) */
    float top_p;        /* sampling: only the smallest set holding this probability (0: 1) */
    float temperature;  /* sampling: logits / temperature (0: 1) */
    unsigned long long seed; /* sampling: a sentence's draws depend on the seed and its ids only */
    /* Batching. With both limits 0 the n lines of a call are one batch, in their order.
     * Otherwise the lines are sorted by source tokens and cut into batches of at most
     * batch_size sentences and batch_tokens source tokens (the sum over the batch; a longer
     * sentence goes alone). Results never depend on the batch a sentence lands in. */
    int batch_size;
    int batch_tokens;
    /* Called after each batch (when set): out[index[0..n)] are complete and from then on the
     * caller's (it may read, write and attend_result_free them at once). A non-zero return
     * stops the call, which then returns -1. On failure the entries not yet handed over
     * are freed; those handed over stay the caller's. */
    int (*on_batch)(void *user, const int *index, int n);
    void *user;
    /* Multilingual models (attend_config.n_languages > 0): the source language (required
     * by attend_translate: its token starts the source) and the target language (required:
     * its token is forced as the first output token, HF's forced_bos_token_id), as codes of
     * attend_config.languages. NULL for other models; a code given to a model without
     * languages is an error, except tgt_lang for a Marian model whose source pieces hold
     * >>xx<< codes (opus-mt-en-mul, ...): attend_translate then writes ">>tgt_lang<< " before
     * each non-blank source, as a user would type it (attend_translate_ids refuses it: put
     * the code's id first), and refuses a code the model lacks, naming those it has. */
    const char *src_lang;
    const char *tgt_lang;
    /* If not NULL: where this call's time went, summed over its batches (attend bench). */
    struct attend_stats *stats;
    /* Prefix-constrained decoding (not with forced targets): sentence i's translation
     * starts with its prefix, then the search (greedy, beams or sampling) continues from it,
     * exactly as HF's generate(decoder_input_ids=[start, *prefix]). A multilingual model's
     * target-language token still comes first: [start, language, *prefix]. The prefix's
     * tokens are in tgt_ids and logprob, but not in the scores nor their length (HF's
     * sequences_scores leave the prompt out). A NULL array, a NULL entry, an empty (or all-space) text and a zero
     * length are no prefix: the same output, bit for bit, as without one. A prefix that
     * leaves no room for one more token within max_length fails its line
     * (attend_result.status ATTEND_E_INPUT). */
    const char *const *target_prefix;    /* attend_translate: n texts, tokenized as targets
                                          * are (without the </s> a target ends with) */
    const int *const *target_prefix_ids; /* attend_translate_ids: n arrays of target ids */
    const int *target_prefix_lens;       /*   and their lengths */
    /* A task of attend_config.tasks (NULL: none): attend_translate writes its prefix before
     * each non-blank source (attend_translate_ids refuses it). T5 models from several
     * target languages (MADLAD-400) take tgt_lang as their <2xx> code, written first as a
     * user would type it ("<2de> "), as a Marian model's >>xx<<. */
    const char *task;
    /* Sentence splitting (attend_translate only). ATTEND_SPLIT_SENTENCES, the default: each
     * line is split into sentences (text/sentences.h: abbreviations, numbers, dates, quotes,
     * URLs...), a sentence longer than the model's positions again at clause boundaries, and
     * every sentence of every line is translated as its own sequence, batched with all the
     * others; out[i] joins line i's translations with the source's separators (see
     * attend_result.sentences). A line of one sentence is translated whole, as with
     * ATTEND_SPLIT_NONE (each line one sequence, cut when too long). Lines with a forced
     * target are never split. */
    int split;
    const char *split_lang; /* the rules' language ("de", "en", ...; NULL: src_lang, else
                             * the rules of every language together) */
    /* If not NULL: read before each decoder step, encoder layer and batch; once non-zero the call
     * stops within a step and returns -1 ("stopped by the caller"), the entries not yet
     * handed over freed (as on_batch's stop). Set it from another thread or a signal
     * handler: Ctrl-C in a long batch (the Python package does). */
    const volatile int *stop;
    /* Token sequences never generated (HF's bad_words_ids, CTranslate2's suppress_sequences):
     * n_suppress arrays of target ids; where a sequence's ids but its last end the output so
     * far, its last id is banned (a one-id sequence: banned everywhere). */
    const int *const *suppress_ids;
    const int *suppress_lens;
    int n_suppress;
    int disable_unk; /* <unk> never generated (CTranslate2's disable_unk) */
    /* Streaming: if not NULL, called with each token greedy search or sampling chooses, as
     * it is chosen (beam search's tokens are known only at its end, so not there): sentence
     * is its index in the batch being decoded (one line with split ATTEND_SPLIT_NONE and no
     * batching: 0), row the sample (n_best samples), logprob the token's log-probability
     * when scores are kept. Called on the calling thread between decoder steps. */
    void (*on_token)(void *user, int sentence, int row, int id, float logprob);
    void *token_user;
    /* Some cross-attention heads only, along the output's path, in attend_result.head_cross:
     * n_cross_heads (layer, head) pairs, cross_heads[2k] the layer and cross_heads[2k + 1]
     * the head (attend_config.alignment_heads' layout). A fraction of want_attention's
     * memory and time: Whisper's word timestamps read the alignment heads so. Not kept for
     * a line split into sentences (head_cross NULL there). */
    const int *cross_heads;
    int n_cross_heads;
} attend_params;

/* attend_params.split */
enum { ATTEND_SPLIT_SENTENCES = 0, ATTEND_SPLIT_NONE = 1 };

/* One sentence of a line translated as several (attend_result.sentences). */
typedef struct {
    size_t src_begin, src_end;   /* its bytes in the line */
    size_t text_begin, text_end; /* its translation's bytes in attend_result.text */
    int src_token, n_src;        /* its source ids: src_ids[src_token .. src_token + n_src) */
    int tgt_token, n_tgt;        /* its target ids: tgt_ids[tgt_token .. tgt_token + n_tgt) */
    int truncated;               /* this sentence was cut */
    float score, normalized_score; /* its own (see attend_hypothesis) */
} attend_sentence;

/* attend_params.stats: wall-clock seconds of one call by phase. */
typedef struct attend_stats {
    double encode_seconds; /* embeddings, encoder, cross-attention keys and values */
    double decode_seconds; /* the decoder step loop */
    long long steps;       /* decoder steps run (a batch's steps count once) */
    long long encoder_passes; /* inputs run through the encoder (a speech window decoded again
                                 at a fallback temperature reuses its first pass: not counted) */
} attend_stats;

/* One hypothesis of an n-best list. Its two scores, each with one meaning whatever the
 * search (a target prefix's tokens left out of both, as HF leaves the prompt out):
 *   score             the sum of its tokens' log-probabilities. Beam search sums them as it
 *                     ranks them, after the logits processors (HF's beam_scores): the same
 *                     as the sum of logprob unless repetition_penalty or renormalization
 *                     changes them (and within float32 rounding: Marian's beam log-softmax
 *                     leaves <pad> out).
 *   normalized_score  score / length ^ length_penalty, length the tokens generated (a forced
 *                     first token and </s> counted, as HF's generated_len): with beams,
 *                     HF's sequences_scores, what beam search ranks by and `attend
 *                     translate --n-best` prints.
 * Greedy search, sampling and forced targets have both only with want_scores or n_best
 * (else NaN: their log-probabilities cost a log-softmax over the vocabulary per token);
 * beam search always. */
typedef struct {
    char *text;
    int *ids, n;        /* target ids */
    float score;        /* sum of log-probabilities (above) */
    float normalized_score; /* score / length ^ length_penalty (above) */
    /* Along this hypothesis's own path, as attend_result's fields are for the best one (the
     * same arrays: nbest[0]'s pointers are the result's own; attend_result_free frees each
     * once). NULL unless asked for. */
    float *logprob;     /* [n] log-probability of each token (want_scores or n_best) */
    float *dec_self;    /* [decoder_layers, decoder_heads, n, n] (want_attention) */
    float *cross;       /* [decoder_layers, decoder_heads, n, n_src] (want_attention) */
    char **pieces;      /* n target pieces (its own copy, also for nbest[0]) */
    float *align_head;  /* [n, n_src] the trained alignment head's rows (attend_result.align_head) */
} attend_hypothesis;

typedef struct {
    char *text;         /* the translation (UTF-8) */
    int n_src, n_tgt;   /* source ids (ending in </s>), target ids (ending in </s> unless cut) */
    int *src_ids, *tgt_ids;
    char **src_pieces;  /* n_src pieces */
    char **tgt_pieces;  /* n_tgt pieces */
    int truncated;      /* the source was cut: to model_max_length tokens, or (a line of
                         * few tokens in many bytes) to the bytes the tokenizer reads */
    float *logprob;     /* [n_tgt] log-probability of each target token (want_scores) */
    float *logits;      /* [n_tgt, decoder_vocab_size] raw logits (want_logits) */
    float *enc_self;    /* [encoder_layers, encoder_heads, n_src, n_src] (want_attention) */
    float *dec_self;    /* [decoder_layers, decoder_heads, n_tgt, n_tgt] */
    float *cross;       /* [decoder_layers, decoder_heads, n_tgt, n_src] */
    float score;        /* the translation's scores (see attend_hypothesis) */
    float normalized_score;
    int n_best;         /* entries of nbest: the K best (best first; nbest[0] is this
                         * translation), or K samples in the order drawn */
    attend_hypothesis *nbest;
    /* 0, or why this one line failed while the call as a whole succeeded (ATTEND_E_INPUT:
     * its ids are invalid; ATTEND_E_MEMORY: no memory to tokenize it). A failed line's
     * text is "", its other fields are empty, and message (malloc'd) says what happened. */
    int status;
    char *message;
    /* A line translated as several sentences (attend_params.split): n_sentences > 1 and
     * where each is in the line, the text and the ids. The line's result is then the
     * sentences' results end to end: ids, pieces, logprob and logits concatenated (each
     * sentence's source and target keep their own </s>), the attention matrices
     * block-diagonal (a sentence's target tokens attend to its own source tokens only, zero
     * elsewhere), so word alignments over the line index the whole line's words; score and
     * normalized_score are the sums of the sentences' own, truncated is set when any
     * sentence was cut, and the k-th n-best hypothesis joins every sentence's k-th.
     * n_sentences 0: one sequence. */
    int n_sentences;
    attend_sentence *sentences;
    float *head_cross;  /* [n_cross_heads, n_tgt, n_src] (attend_params.cross_heads) */
    /* [n_tgt, n_src] the trained alignment head's rows, laid out as one cross-attention
     * head's (want_attention, a model file with attend.align_head.*; else NULL); each
     * n-best hypothesis has its own. Never used by translation itself. */
    float *align_head;
} attend_result;

ATTEND_API attend_params attend_default_params(void);

/* Load a .gguf checkpoint, checking every key, tensor, dtype and shape, the CRC-32s and
 * that every weight is finite (as attend_verify) before returning. NULL on failure. */
ATTEND_API attend_model *attend_load(const char *path, char *err, size_t errlen);

/* attend_load with options. */
typedef struct {
    int inspect_only; /* for attend_get_config, attend_verify and attend_count_tokens only:
                       * the matrices stay in the file's layout instead of being copied into
                       * the kernels' (the copy costs the model's size in memory and time);
                       * attend_translate then refuses the model */
    /* NULL, "auto", "f32": the file's matrices, f32 arithmetic (exact). "bf16" ("bfloat16"):
     * f32 / f16 matrices converted to bf16 at load, products on AVX-512 BF16 summed in f32;
     * approximate, like int8. Refused, with what is missing, on CPUs without avx512_bf16
     * and for int8 files. */
    const char *compute_type;
} attend_load_params;
ATTEND_API attend_load_params attend_default_load_params(void);
ATTEND_API attend_model *attend_load_with(const char *path, const attend_load_params *lp, char *err,
                                          size_t errlen);
ATTEND_API void attend_free(attend_model *m);
ATTEND_API const attend_config *attend_get_config(const attend_model *m);

/* Check the metadata's CRC-32 (when the file has one), every tensor's CRC-32, and that all
 * weights are finite, again: attend_load did it once; this re-reads the mapped file, for a
 * model kept loaded while its file may have changed. 0 or -1 with err. */
ATTEND_API int attend_verify(const attend_model *m, char *err, size_t errlen);

/* Translate n lines (lens[i] bytes each, or NUL-terminated when lens is NULL) as one batch.
 * With targets (n strings or NULL entries), those sentences are force-decoded: their
 * scores and attention are those of the given translation. out[i] is filled for each line;
 * free each with attend_result_free. A line that cannot be tokenized does not fail the call:
 * its out[i].status and message say why. Returns 0, or -1 with err set (nothing to free). */
ATTEND_API int attend_translate(attend_model *m, const char *const *lines, const size_t *lens, int n,
                     const char *const *targets, const attend_params *p, attend_result *out,
                     char *err, size_t errlen);
ATTEND_API void attend_result_free(attend_result *r);

/* attend_translate from ids instead of text: ids[i] (lens[i] of them, 1..max positions,
 * each in 0..vocab_size-1; as attend_tokenize gives them, </s> last) and, for forced
 * decoding, target_ids[i] (target_lens[i]; NULL entries or a NULL array translate). The
 * result's pieces come from the vocabulary. A sentence whose ids break these rules gets
 * out[i].status ATTEND_E_INPUT and a message; the others are translated. Returns 0, or -1
 * with err (nothing to free). */
ATTEND_API int attend_translate_ids(attend_model *m, const int *const *ids, const int *lens, int n,
                                    const int *const *target_ids, const int *target_lens,
                                    const attend_params *p, attend_result *out, char *err, size_t errlen);
/* Source text -> the ids attend_translate would use (pieces, </s> last, cut to
 * model_max_length): *ids malloc'd (free it), *n ids. 0, or -1 with err. Multilingual
 * models: without the source-language token attend_translate puts first (prepend the id of
 * attend_config.language_ids for attend_translate_ids). */
ATTEND_API int attend_tokenize(const attend_model *m, const char *text, size_t len, int **ids, int *n,
                               char *err, size_t errlen);
/* Target ids -> text, as attend_result.text is made (special tokens skipped). malloc'd;
 * NULL when an id is outside the target vocabulary or out of memory. */
ATTEND_API char *attend_detokenize(const attend_model *m, const int *ids, int n);

/* The number of source ids line would translate with (its pieces and </s>, and the
 * language token of a multilingual model, after truncation to model_max_length), for
 * batching by tokens. -1 with err on failure. */
ATTEND_API int attend_count_tokens(const attend_model *m, const char *line, size_t len, char *err, size_t errlen);

/* The vocabularies (side ATTEND_SOURCE or ATTEND_TARGET; one shared vocabulary answers the
 * same on both): its size, an id's piece (NUL-terminated, the model's own; NULL for an id
 * out of range or a bad side) and a piece's id (-1 when it has none). */
enum { ATTEND_SOURCE = 0, ATTEND_TARGET = 1 };
ATTEND_API int attend_vocab_size(const attend_model *m, int side);
ATTEND_API const char *attend_id_to_piece(const attend_model *m, int side, int id);
ATTEND_API int attend_piece_to_id(const attend_model *m, int side, const char *piece, size_t len);

/* Translate n HTML fragments (document 0: a line of a page, a LibreTranslate "q" with
 * "format": "html") or whole documents (document 1: the doctype kept). The text between
 * block boundaries (<p>, <li>, <td>, <br>, headings...) is translated as attend_translate
 * translates a line (split into sentences as p->split says), a sentence running across
 * inline tags (<b>, <a>, <span>...) being one sentence to the model; each inline tag is put
 * back around the target words aligned, under the model's own view, to the source words it
 * wrapped, nested and closed as in the source, its start tag byte for byte. <script>,
 * <style>, <pre>, <code>, <textarea> and translate="no" are copied untouched, comments kept;
 * text is escaped again (& < >). Malformed HTML is repaired as browsers parse it (gumbo).
 * out[i]: malloc'd HTML (attend_mem_free); truncated[i] (NULL: not wanted): a sentence was
 * cut. p's search settings apply; n-best, prefixes and attention outputs do not. 0, or -1
 * with err (also when any text could not be translated: nothing is silently dropped; out is
 * then all NULL). docs/markup.md has the rules. */
ATTEND_API int attend_translate_html(attend_model *m, const char *const *docs, const size_t *lens, int n,
                                     int document, const attend_params *p, char **out, int *truncated, char *err,
                                     size_t errlen);

/* Sentence splitting (text/sentences.c; docs/splitting.md), as attend_translate uses it and
 * `attend split` prints it. */
/* Bytes [begin, end) of the text. */
typedef struct {
    size_t begin, end;
} attend_span;

/* Split text (len bytes, any bytes) into sentences. lang: a language code ("de", "en",
 * "de_DE", "deu_Latn", "fr"...: its leading 2-3 letters count); unknown codes use the generic
 * rules; NULL = language unknown: every language's data together with the generic rules.
 * *spans: malloc'd (free with free or attend_mem_free), NULL when there are none; each span
 * is one sentence without the whitespace around it, so the bytes between spans are whitespace
 * (NUL bytes count as whitespace). Blank text gives 0 spans.
 * Returns the number of spans, or -1 with a message in err (out of memory only). */
ATTEND_API int attend_split_sentences(const char *text, size_t len, const char *lang, attend_span **spans,
                                      char *err, size_t errlen);

/* Split one sentence into pieces that each fit: fits(user, s, n) says whether bytes s[0..n)
 * fit the model. Breaks at clause boundaries, the strongest kind first (after ';', then after
 * ':', then after ',' or a dash, then before a conjunction of the language), among equals the
 * one nearest the middle, recursively until every piece fits; then at whitespace; a piece
 * with no break point left stays as it is (longer than fits allows). Pieces are trimmed of
 * whitespace, in order, and together hold every non-whitespace byte of the text. Text that
 * fits whole is one piece; blank text none.
 * Returns the number of pieces in *spans (malloc'd, as above), or -1 with err (out of memory). */
ATTEND_API int attend_split_clauses(const char *text, size_t len, const char *lang,
                                    int (*fits)(void *user, const char *s, size_t n), void *user,
                                    attend_span **spans, char *err, size_t errlen);

/* Status codes (0 = success): attend_quantize's, and attend_result.status. */
enum { ATTEND_E_MODEL = -1, ATTEND_E_USAGE = -2, ATTEND_E_MEMORY = -3, ATTEND_E_IO = -4, ATTEND_E_INPUT = -5 };
/* Rewrite an f32/f16 checkpoint with every matrix in int8 and one f32 scale per row (the
 * bytes `export_marian.py --dtype int8` writes for the same weights). The input is checked
 * as attend_load checks it. 0, or a status above with err: ATTEND_E_MODEL (input not a
 * valid model), ATTEND_E_USAGE (already int8), ATTEND_E_MEMORY, ATTEND_E_IO (writing). */
ATTEND_API int attend_quantize(const char *in_path, const char *out_path, char *err, size_t errlen);

/* Choose the kernel set from CPUID, or from $ATTEND_ISA if set (attend_load does this too).
 * 0, or -1 with err if $ATTEND_ISA names a set this CPU cannot run. */
ATTEND_API int attend_select_isa(char *err, size_t errlen);
/* Which kernel set runs ("generic", "avx2", "avx512"), and all this CPU supports. */
ATTEND_API const char *attend_isa(void);
ATTEND_API const char *attend_isa_available(void);
/* What int8 linear layers run on under that set: "amx" (Intel AMX tiles, from 8 rows at once
 * on; $ATTEND_AMX=0 turns them off), "avx512vnni", "avx2" or "generic". All give
 * bit-identical int8 results. */
ATTEND_API const char *attend_isa_int8(void);
/* What bf16 compute (attend_load_params.compute_type "bf16") runs on under that set:
 * "avx512bf16" (vdpbf16ps: products of bf16 pairs summed in f32), or NULL where it cannot
 * run, with *why (when why is not NULL) saying what is missing, as loading would. */
ATTEND_API const char *attend_isa_bf16(const char **why);
/* Threads used when attend_params.threads is 0: $OMP_NUM_THREADS if set, else one per
 * physical core among the CPUs this process may run on. */
ATTEND_API int attend_default_threads(void);

/* ---------------------------------------------------------------------------------------
 * Speech (Whisper checkpoints: attend_config.audio) */

/* ATTEND_TASK_MODEL: no task given (HF's task=None, attend_default_speech_params'): the
 * task token of the checkpoint's forced_decoder_ids when the language is detected (none
 * when it forces none), <|transcribe|> when a language is given, as HF's generate() does. */
enum { ATTEND_TASK_TRANSCRIBE = 0, ATTEND_TASK_TRANSLATE = 1, ATTEND_TASK_MODEL = 2 };

typedef struct {
    /* A code of attend_config.languages ("de"), or NULL / "auto": not given, so detected from
     * the window (HF's detect_language), unless the checkpoint's forced_decoder_ids fix a
     * language and no task is given (HF's language=None then writes that one). English-only
     * models (*.en) take no language. */
    const char *language;
    int task;       /* ATTEND_TASK_TRANSCRIBE, _TRANSLATE (into English) or _MODEL (above) */
    int timestamps; /* timestamp tokens (HF's return_timestamps): segments with times */
    /* -- temperature fallback (HF's generate_with_fallback; docs/whisper.md) -- */
    /* The temperatures tried in turn on each window (HF's default list: 0.0, 0.2, 0.4, 0.6,
     * 0.8, 1.0): 0 decodes with attend_params' search, above 0 samples at that temperature
     * (top_k 50 unless attend_params.top_k says otherwise). A window moves on to the next
     * while a threshold below says so; the last one's decode is kept. NULL or 0: one decode
     * with attend_params' search as given. */
    const float *temperatures;
    int n_temperatures;
    /* Which thresholds apply (HF's "not None"), and their values (OpenAI's defaults 2.4,
     * -1.0, 0.6): fall back when the zlib compression ratio of the window's ids is above
     * compression_ratio_threshold or their average log-probability (HF's: under the
     * processed scores, <|endoftext|> counted) below logprob_threshold; skip the window as
     * silence when that average is below logprob_threshold and the no-speech probability
     * above no_speech_threshold (needs use_logprob too). */
    int use_compression_ratio, use_logprob, use_no_speech;
    float compression_ratio_threshold, logprob_threshold, no_speech_threshold;
    /* attend_transcribe*: attend_transcript.words, each word's time read from the
     * cross-attention of the model's alignment heads (HF's return_token_timestamps and its
     * pipeline's words; docs/whisper.md). Needs attend_config.n_alignment_heads > 0. */
    int word_timestamps;
    /* Word timestamps of audio up to one window long: the mel frames that hold sound (HF's
     * num_frames: samples / 160); only their encoder frames are read. 0: the whole window
     * (features given without their length; longer audio, as HF). attend_transcribe sets it.
     * Also the transcript's duration, with or without word timestamps. */
    int audio_frames;
} attend_speech_params;
ATTEND_API attend_speech_params attend_default_speech_params(void);

/* Decode n windows of log-mel features as HF's generate() does one 30-second window: mels[i]
 * holds attend_config.n_mels rows of attend_config.audio_frames values (HF's
 * input_features). The decoder prompt is <|startoftranscript|>, the language and the task
 * (multilingual models), <|notimestamps|> unless sp->timestamps; the model's suppress and
 * begin-suppress lists apply, and the timestamp rules with timestamps. p's search (greedy,
 * beams, sampling), limits and outputs work as for attend_translate_ids; out[i].tgt_ids
 * start with the prompt's tokens after <|startoftranscript|>, out[i].text is the decoded
 * text without special tokens. languages (optional, n entries) receives each window's
 * language code (detected or given; the model's strings). 0, or -1 with err. */
ATTEND_API int attend_decode_features(attend_model *m, const float *const *mels, int n,
                                      const attend_speech_params *sp, const attend_params *p,
                                      attend_result *out, const char **languages, char *err, size_t errlen);
/* The language of one window of features: the most likely language token at the first step
 * after <|startoftranscript|> (HF's detect_language), its code in *code (the model's
 * string). probs (optional): attend_config.n_languages probabilities (softmax over the
 * language tokens only). 0, or -1 with err (English-only models have no languages). */
ATTEND_API int attend_detect_language(attend_model *m, const float *mel, const attend_params *p, const char **code,
                                      float *probs, char *err, size_t errlen);

/* The model's mel filter bank into out (attend_config.n_mels rows of 201 floats): the one its
 * file stores, else Whisper's recipe (Slaney mel scale and norm, 0-8 kHz). 0, or -1 with err. */
ATTEND_API int attend_mel_filters(const attend_model *m, float *out, char *err, size_t errlen);
/* Whisper's log-mel features of n samples (16 kHz mono floats in [-1, 1]), as HF's
 * WhisperFeatureExtractor computes them: up to 30 s, one window padded with zeros
 * (attend_config.audio_frames frames); longer, the whole audio with one normalisation
 * (its truncation=False). *mel (malloc'd, free with attend_mem_free) holds n_mels rows of
 * *n_frames values (HF's layout). 0, or -1 with err (NaN or infinite samples, no samples). */
ATTEND_API int attend_features(const attend_model *m, const float *samples, size_t n, float **mel, int *n_frames,
                               char *err, size_t errlen);

/* One stretch of speech and its text (attend_transcript). */
typedef struct {
    double start, end;  /* seconds from the start of the audio */
    char *text;         /* its text, special tokens left out (starts with the space of its first word) */
    int *ids, n_ids;    /* its tokens, timestamp tokens included */
    float avg_logprob;  /* its window's mean log-probability (see below) */
    int first_word, n_words; /* its words: attend_transcript.words[first_word ..) */
    /* Its window's (as OpenAI's verbose_json gives them): avg_logprob above is the window's
     * average too (HF's _retrieve_avg_logprobs); the no-speech probability, the temperature
     * its decode was sampled at (0: the search as given) and its compression ratio. */
    float no_speech_prob, temperature, compression_ratio;
} attend_segment;

/* One word with the time it was heard (attend_transcript.words; word timestamps). */
typedef struct {
    double start, end;
    char *word;         /* with its leading space, as the text has it */
    float probability;  /* the mean probability of its tokens (as avg_logprob reads them) */
} attend_word;

typedef struct {
    char *text;             /* every segment's text, joined */
    const char *language;   /* the model's code (detected or given); "en" for English-only models */
    double duration;        /* seconds of audio: attend_speech_params.audio_frames when set, else the features' frames */
    int n_segments;
    attend_segment *segments;
    int n_words;
    attend_word *words;
} attend_transcript;

/* Transcribe features of any length: mel holds attend_config.n_mels rows of n_frames values
 * (10 ms a frame; HF's input_features of the whole audio, one normalisation). Up to
 * attend_config.audio_frames frames are one window (zero-padded); longer audio is decoded
 * window after window as HF's long-form generate() does: timestamps on, each window cut at
 * its last complete segment and the next window starting there (the "seek" rule).
 * The language, when not given, is detected on the first window and kept. 0, or -1 with
 * err; out is freed with attend_transcript_free. */
ATTEND_API int attend_transcribe_features(attend_model *m, const float *mel, int n_frames,
                                          const attend_speech_params *sp, const attend_params *p,
                                          attend_transcript *out, char *err, size_t errlen);
ATTEND_API void attend_transcript_free(attend_transcript *t);
/* attend_features, then attend_transcribe_features: n samples of 16 kHz mono audio. */
ATTEND_API int attend_transcribe(attend_model *m, const float *samples, size_t n, const attend_speech_params *sp,
                                 const attend_params *p, attend_transcript *out, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
