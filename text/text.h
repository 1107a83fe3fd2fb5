/* text internals: what the sentence and clause splitters share — reading UTF-8 one code
 * point at a time with its character class (text/chars.c), the per-language rule tables
 * (text/split_rules.c) and a growing list of spans. Not part of the public API. */
#ifndef ATTEND_TEXT_TEXT_H
#define ATTEND_TEXT_TEXT_H

#include <stdlib.h>

#include "sentences.h"

/* ---------------------------------------------------------------------------------------
 * characters (text/chars.c) */

/* What a code point is to the splitters. Invalid UTF-8 is TX_OTHER, one byte at a time. */
typedef enum {
    TX_SPACE,  /* separates sentences: ASCII blanks, NUL, NBSP and the Unicode spaces */
    TX_UPPER,  /* a cased letter in upper (or title) case */
    TX_LOWER,  /* a cased letter in lower case */
    TX_LETTER, /* a letter of a script without case (CJK, Arabic, Devanagari...), or unknown */
    TX_DIGIT,
    TX_OTHER   /* punctuation, symbols, invalid bytes */
} tx_class;

/* The code point at s[0..n) (n >= 1): *cp and the bytes it takes (1..4); an invalid or cut
 * sequence is one byte with *cp = -1. */
int tx_decode(const char *s, size_t n, long *cp);
/* The class of a code point (-1: an invalid byte). */
tx_class tx_classify(long cp);
/* Is cp a sentence stop? 1: '.', 2: '!' '?' and the like (need a space after them),
 * 3: a stop of a script written without spaces (。！？), which ends a sentence by itself. */
int tx_stop_kind(long cp);
/* Quotes and brackets: may close a sentence (after its stop) / open one (before its start). */
int tx_is_closer(long cp);
int tx_is_opener(long cp);
/* The class of the code point at s[0..n), n >= 1 (the first code point only). */
tx_class tx_class_at(const char *s, size_t n);
/* Bytes of whitespace (TX_SPACE code points) at the start of s[0..n). */
size_t tx_skip_space(const char *s, size_t n);

/* ---------------------------------------------------------------------------------------
 * per-language rules (text/split_rules.c) */

/* One language's data. Word lists end with NULL; words are compared byte for byte, without
 * their final '.'. */
typedef struct {
    const char *const *codes;         /* "de", "deu", "ger" */
    const char *const *abbreviations; /* never end a sentence: "Dr", "bzw", "z.B" */
    const char *const *before_number; /* not an end when a number follows: "Nr", "No", "Jan" */
    const char *const *number_endings; /* the same for words ending so: "str" of "Goethestr. 5" */
    const char *const *conjunctions;  /* a clause may start here: "und", "because" */
    int ordinals;                     /* "3. Oktober": a short number + '.' + word is an ordinal */
} split_rules;

/* The rule sets for lang: the language's own (if any) and the generic set; lang NULL: all.
 * Fills sets (room for SPLIT_MAX_SETS) and returns how many. */
enum { SPLIT_MAX_SETS = 8 };
int split_rules_for(const char *lang, const split_rules **sets);
/* Is word[0..n) in the list of any of the sets? which: 0 abbreviations, 1 before_number,
 * 2 conjunctions, 3 number_endings (there: does the word end with one, after a letter). */
int split_rules_has(const split_rules *const *sets, int nsets, int which, const char *word, size_t n);
/* Does any of the sets read a short number + '.' + word as an ordinal? */
int split_rules_ordinals(const split_rules *const *sets, int nsets);

/* ---------------------------------------------------------------------------------------
 * a growing list of spans */

typedef struct {
    attend_span *v;
    int n, cap;
    int oom; /* a push failed: the list is incomplete */
} span_list;

/* Append [begin, end); on out of memory set l->oom and keep what is there. */
static inline void span_push(span_list *l, size_t begin, size_t end) {
    if (l->oom) return;
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 16;
        attend_span *v = (cap > 0 && cap < (1 << 29)) ? realloc(l->v, sizeof *v * (size_t)cap) : NULL;
        if (!v) {
            l->oom = 1;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n].begin = begin;
    l->v[l->n].end = end;
    l->n++;
}

#endif
