/* bpe: the byte-level BPE tokenizer of GPT-2 and Whisper, equal to Hugging Face's slow
 * GPT2Tokenizer / WhisperTokenizer (tokenization_gpt2.py, tokenization_whisper.py).
 *
 *   char err[256];
 *   bpe_model *m = bpe_new(tokens, n_tokens, merges, n_merges, special, err, sizeof err);
 *   int *ids, n;
 *   if (bpe_encode(m, "Hello world<|endoftext|>", 24, &ids, &n) == 0) {   // 15496 995 50256
 *       size_t len;
 *       char *text = bpe_decode(m, ids, n, 1, &len);                    // "Hello world"
 *       free(text); free(ids);
 *   }
 *   bpe_free(m);
 *
 * A model is read-only once made: encode and decode may run on it from several threads.
 *
 * Encoding, as HF's tokenize() + convert_tokens_to_ids():
 *  1. Added tokens (special[i] != 0) typed in the text are found whole: at each place the
 *     longest added token that starts there, scanning left to right (HF's trie gives the same
 *     for every set in which no added token holds the start of another inside it: Whisper's,
 *     GPT-2's). No whitespace is stripped around them (lstrip/rstrip false, as Whisper's files
 *     set them).
 *  2. The text between them is cut by GPT-2's pattern
 *       's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *     with \p{L}, \p{N} and \s exactly as the Python regex module has them (tables generated
 *     by tools/gen_unicode_classes.py into bpe_unicode.c).
 *  3. Each piece's bytes become characters of GPT-2's bytes-to-unicode alphabet and are merged
 *     by rank as HF's bpe() does: the lowest-ranked adjacent pair, all its occurrences left to
 *     right, again, until no pair has a rank (a heap: O(n log n), so a 1 MB word is fast).
 *  Invalid UTF-8 (HF takes str, this takes bytes): a byte that is not part of a valid UTF-8
 *  sequence (strict: no overlong forms, no surrogates, nothing past U+10FFFF) is a character of
 *  its own that is neither letter, number nor space, so it joins a ` ?[^\s\p{L}\p{N}]+` run, and
 *  it is encoded as its own byte: nothing is dropped or replaced, the ids hold the input's
 *  bytes exactly (Python gives the same with text decoded by errors="surrogateescape").
 *  NUL is an ordinary character. A piece whose merged symbol has no id becomes the unknown id
 *  (bpe_set_unk; by default the id of "<|endoftext|>", HF's unk_token for both tokenizers).
 *
 * Decoding, as HF's _decode(): ids in order; an added token gives its own text, a run of other
 * tokens gives their bytes (the alphabet mapped back) decoded as UTF-8 with U+FFFD for each
 * maximal invalid subsequence (Python's errors="replace"); a run is decoded on its own, so
 * bytes on either side of an added token do not join. With skip_special, tokens flagged
 * BPE_SPECIAL are dropped before the runs are formed (bytes around them do join). An id out of
 * range or without a token gives nothing (WhisperTokenizer's "" for unknown ids). No clean-up
 * of tokenization spaces: WhisperTokenizer._decode never applies it (GPT2Tokenizer does when
 * clean_up_tokenization_spaces is set; that is not provided here).
 *
 * Whisper (WhisperTokenizer.decode with its defaults: no offsets, no decode_with_timestamps, no
 * normalizers) is bpe_whisper_decode: with skip_special it first drops a prompt (ids starting
 * with <|startofprev|> keep only what follows from <|startoftranscript|> on, nothing if it is
 * absent), then decodes, then removes every "<|N.N|>" from the text (timestamp tokens, and
 * the same characters typed as text; N is one or more Unicode decimal digits), with or
 * without skip_special. In HF's Whisper files the timestamp tokens are added but not special:
 * flag them BPE_ADDED, the others of 50256/50257 on BPE_SPECIAL. */
#ifndef ATTEND_BPE_H
#define ATTEND_BPE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bpe_model bpe_model;

/* special[i]: what id i is. Any non-zero value makes it an added token (found whole by
 * bpe_encode, decoded as its own text); BPE_SPECIAL ones are also skipped by bpe_decode
 * when skip_special (HF's all_special_ids), BPE_ADDED ones are not (Whisper's timestamps). */
enum { BPE_NORMAL = 0, BPE_SPECIAL = 1, BPE_ADDED = 2 };

/* A model from its tokens and merges; the strings are copied. tokens[i]: id i's string in the
 * byte-level alphabet (as in vocab.json) or, for an added token, its text (as in
 * added_tokens.json); NULL or "" for an id without a token. merges[r]: "left right" of rank r
 * (merges.txt's lines after "#version", in order); a pair listed twice takes its last rank, as
 * HF's dict does. special: n_tokens flags (NULL: none). Refused, NULL with a one-line message
 * in err: n_tokens < 1, a token string twice, an added token that is not valid UTF-8, a merge
 * that is not two non-empty parts joined by one space, out of memory. */
bpe_model *bpe_new(const char *const *tokens, int n_tokens, const char *const *merges, int n_merges,
                   const unsigned char *special, char *err, size_t errlen);
void bpe_free(bpe_model *m);

/* The id that pieces without a token get (-1: none, then bpe_encode fails with -2 on such a
 * piece). Returns 0, or -1 for an id out of range (the unknown id is then unchanged). */
int bpe_set_unk(bpe_model *m, int id);

/* Encode len bytes of text (NUL is a character like any other). *ids: malloc'd (the caller
 * frees it; NULL when *n_ids is 0). Returns 0; -1 out of memory or text of 2 GiB or more;
 * -2 a piece has no id and there is no unknown id. On failure *ids is NULL and *n_ids 0. */
int bpe_encode(const bpe_model *m, const char *text, size_t len, int **ids, int *n_ids);

/* Decode n ids to UTF-8 text (see above). Returns a malloc'd, NUL-terminated string, its
 * length in *len when len is not NULL; NULL when out of memory. */
char *bpe_decode(const bpe_model *m, const int *ids, int n, int skip_special, size_t *len);

/* WhisperTokenizer.decode(ids, skip_special_tokens): the prompt dropped (skip_special), the
 * ids decoded, the "<|N.N|>" timestamps removed. startofprev, startoftranscript: their ids
 * (-1 when the model has none). Returns as bpe_decode. */
char *bpe_whisper_decode(const bpe_model *m, const int *ids, int n, int skip_special, int startofprev,
                         int startoftranscript, size_t *len);

/* Remove every match of <\|\d+\.\d+\|> (\d: Unicode decimal digits) from text[0..len) in
 * place, as WhisperTokenizer._filter_timestamp_ids; returns the new length (text[new] = 0 when
 * room is there, i.e. new < len). */
size_t bpe_strip_timestamps(char *text, size_t len);

/* The id of a token string (byte-level form, or an added token's text); -1 if none. */
int bpe_token_id(const bpe_model *m, const char *token);
/* Id's token string; NULL for an id out of range or without a token. */
const char *bpe_token(const bpe_model *m, int id);
/* Id's flag (BPE_NORMAL, BPE_SPECIAL, BPE_ADDED); -1 for an id out of range or without a token. */
int bpe_token_kind(const bpe_model *m, int id);
/* The number of ids (n_tokens given to bpe_new). */
int bpe_size(const bpe_model *m);

#ifdef __cplusplus
}
#endif
#endif
