/* text: text <-> ids as transformers' tokenizers do it for each family (MarianTokenizer,
 * M2M100Tokenizer, NllbTokenizer, MBart50Tokenizer), on a loaded model's vocabularies,
 * SentencePiece models, language tokens and added tokens.
 *
 *   int *ids, n, truncated;
 *   s2s_encode_text(m, "Hallo Welt", 10, &ids, &n, NULL, &truncated, err, sizeof err);
 *   char *back = s2s_decode_text(m, out_ids, out_n);   // free(back)
 *
 * The rules: tokenizer/encode.c (source and target text -> ids), tokenizer/decode.c
 * (ids -> text), tokenizer/setup.c (the tokenizer.* keys read at load). All read-only on the
 * model: any number of threads may call them at once. */
#ifndef ATTEND_TEXT_H
#define ATTEND_TEXT_H

#include <stddef.h>

#include "../model/seq2seq.h"

/* The tokenizer reads at most this many bytes of a text per position of the model (cut
 * back to a UTF-8 character boundary), so a huge line costs no more than a long one; real
 * text averages under 10 bytes a token, so this cut comes after the positions' cut. */
#define S2S_BYTES_PER_POSITION 32

/* Text side. With a language token lang (>= 0; -1: none) the ids start with it, as
 * M2M100Tokenizer's src_lang / tgt_lang prefix. A multilingual family first splits the
 * text at the added tokens typed in it, each its own id (HF's added-token split).
 * Source text -> ids (pieces mapped through the vocabulary, unknown -> <unk>,
 * </s> appended, a leading >>xx<< code kept whole), cut to model_max_length tokens with
 * *truncated set (also set when only the first max_position_embeddings *
 * S2S_BYTES_PER_POSITION bytes were read). pieces (optional) receives the source
 * pieces, "</s>" last. */
int s2s_encode_text(const s2s_model *m, const char *text, size_t len, int **ids, int *n,
                       char ***pieces, int *truncated, char *err, size_t errlen);
int s2s_encode_text_lang(const s2s_model *m, int lang, const char *text, size_t len, int **ids,
                            int *n, char ***pieces, int *truncated, char *err, size_t errlen);
/* A given translation -> target ids (target model and vocabulary, </s> appended), for
 * forced decoding. */
int s2s_encode_target(const s2s_model *m, const char *text, size_t len, int **ids, int *n,
                         char ***pieces, int *truncated, char *err, size_t errlen);
int s2s_encode_target_lang(const s2s_model *m, int lang, const char *text, size_t len, int **ids,
                              int *n, char ***pieces, int *truncated, char *err, size_t errlen);
/* Target ids -> text, as HF's decode(skip_special_tokens=True) with its default clean-up
 * (language tokens and <s> are special tokens too). */
char *s2s_decode_text(const s2s_model *m, const int *ids, int n);

/* Is id one of T5's <extra_id_N> tokens (family->sentinels)? */
int s2s_is_sentinel(const s2s_model *m, int id);

/* The id of language code `code` (len bytes), or -1. */
int s2s_language_id(const s2s_model *m, const char *code, size_t len);
/* The model's codes as one line, "de, en, fr" (malloc'd), or NULL (none / out of memory). */
char *s2s_language_list(const s2s_model *m);

/* Load's tokenizer step, after the config and the tensors: both vocabularies and
 * SentencePiece models, the language tokens (multilingual families), tokenizer.class and
 * the added tokens the source text is split at. Returns 0, or -1 naming the bad key (what
 * it set is freed by s2s_free). */
int s2s_tokenizer_load(s2s_model *m, char *err, size_t errlen);

#endif
