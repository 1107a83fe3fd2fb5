/* The byte-level BPE tokenizer's insides, shared by bpe_model.c (building), bpe_encode.c,
 * bpe_pretok.c (GPT-2's pre-tokenizer), bpe_decode.c and the generated bpe_unicode.c. */
#ifndef ATTEND_BPE_INTERNAL_H
#define ATTEND_BPE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "bpe.h"

/* ---- hash tables -------------------------------------------------------------------- */

/* uint64 key -> int value, open addressing; value -1 marks an empty slot. */
typedef struct {
    uint64_t *key;
    int *val;
    size_t mask; /* capacity - 1, capacity a power of two */
} bpe_map64;

int bpe_map64_init(bpe_map64 *t, size_t n_max); /* room for n_max keys; 0 or -1 (OOM) */
void bpe_map64_free(bpe_map64 *t);
int bpe_map64_get(const bpe_map64 *t, uint64_t key);    /* value, -1 if absent */
void bpe_map64_put(bpe_map64 *t, uint64_t key, int val); /* insert or replace */

/* Interned strings: each distinct byte string once, numbered 0, 1, ... in arrival order. */
typedef struct {
    char *arena; /* the strings, each NUL-terminated */
    size_t arena_len, arena_cap;
    size_t *off; /* string i starts at arena + off[i] */
    uint32_t *len;
    int n, cap;
    int *slot; /* hash slots: string index or -1 */
    size_t mask;
} bpe_strings;

int bpe_strings_init(bpe_strings *s, int n_max); /* room for n_max strings; 0 or -1 */
void bpe_strings_free(bpe_strings *s);
int bpe_strings_find(const bpe_strings *s, const char *p, size_t n); /* index or -1 */
int bpe_strings_add(bpe_strings *s, const char *p, size_t n);        /* index; -1 OOM */

/* ---- the model ---------------------------------------------------------------------- */

/* Symbols are interned strings of the byte-level alphabet: every token's, the 256 single
 * byte characters, every merge's two parts and their concatenation. */
struct bpe_model {
    int n_tokens;
    int unk;                 /* id for a symbol without a token, or -1 */
    int *token_sym;          /* id -> symbol of its string, -1 for no token */
    unsigned char *kind;     /* id -> BPE_NORMAL / BPE_SPECIAL / BPE_ADDED */
    uint32_t *bytes_off;     /* id -> its decoded bytes: bytes + bytes_off[id], bytes_len[id] */
    uint32_t *bytes_len;
    unsigned char *bytes;
    bpe_strings syms;
    int *sym_token;          /* symbol -> id, -1 when no token has that string */
    int byte_sym[256];       /* byte -> symbol of its alphabet character */
    bpe_map64 pair;          /* (left symbol << 32 | right symbol) -> merge index */
    int *merge_rank;         /* merge index -> rank (its last line in merges) */
    int *merge_sym;          /* merge index -> symbol of the concatenation */
    bpe_map64 trie;          /* added tokens: (node << 8 | byte) -> child node; root 0 */
    int *trie_id;            /* node -> id of the added token ending there, or -1 */
    int n_nodes;
};

/* GPT-2's bytes-to-unicode map: the code point that stands for byte b. */
uint32_t bpe_byte_char(int b);

/* Decode one UTF-8 character at s (n >= 1 bytes): its code point and length in *cp, *len;
 * returns 0, or -1 when s does not start a valid (strict) sequence, *len then 1. */
int bpe_utf8_next(const unsigned char *s, size_t n, uint32_t *cp, size_t *len);
/* Append code point cp as UTF-8 to out; returns the bytes written (1..4). */
size_t bpe_utf8_put(uint32_t cp, unsigned char *out);

/* Character classes of the pre-tokenizer (the generated tables). */
enum { BPE_OTHER = 0, BPE_LETTER, BPE_NUMBER, BPE_SPACE };
int bpe_char_class(uint32_t cp);
int bpe_is_digit(uint32_t cp); /* \d: Unicode decimal digit */

extern const uint32_t bpe_letter_ranges[][2], bpe_number_ranges[][2], bpe_space_ranges[][2],
    bpe_digit_ranges[][2];
extern const int bpe_letter_count, bpe_number_count, bpe_space_count, bpe_digit_count;

/* The end of the pre-tokenizer piece that starts at text[pos] (pos < len): GPT-2's pattern's
 * leftmost match there. Invalid UTF-8 bytes are single characters of class BPE_OTHER. */
size_t bpe_piece_end(const unsigned char *text, size_t len, size_t pos);

/* The id of the longest added token at text[pos..len), its length in *n; -1 if none. */
int bpe_added_at(const bpe_model *m, const unsigned char *text, size_t len, size_t pos, size_t *n);

#endif
