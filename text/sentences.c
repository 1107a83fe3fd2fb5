/* text/sentences.c: a line of text into sentences. One pass over the bytes: a run of stops
 * ('.', '!', '?', '…', '。'...) with the quotes and brackets right after it is a candidate end;
 * it is an end when whitespace and a sentence start follow (a capital, a digit, a letter of
 * a script without case, maybe behind an opening quote) and, for a single '.', the word
 * before it is no abbreviation, initial, ordinal or list number. A stop of a script written
 * without spaces ends a sentence by itself. Every look back or ahead covers bytes that belong
 * to this candidate alone, so the whole is linear in the text. */
#include <stdio.h>
#include <string.h>

#include "text.h"

typedef struct {
    const char *t;
    size_t len;
    const split_rules *sets[SPLIT_MAX_SETS];
    int nsets, ordinals;
} splitter;

/* A run of stops found at the candidate: which kinds it holds. */
typedef struct {
    size_t begin, end;  /* the stops, and the closing quotes and brackets after them */
    int dots;           /* '.' count */
    int ellipsis;       /* '…' seen */
    int strong;         /* '!', '?' and the like */
    int no_space;       /* 。！？: ends a sentence with no space after it */
} stop_run;

/* ---------------------------------------------------------------------------------------
 * the word before the stop */

/* Letters only, in groups of one or two between dots: "e.g", "U.S", "z.B", "Ph.D", "i.d.R". */
static int dotted_letters(const char *w, size_t n) {
    size_t group = 0, groups = 0;
    for (size_t i = 0; i < n;) {
        long cp;
        int k = tx_decode(w + i, n - i, &cp);
        tx_class c = tx_classify(cp);
        if (cp == '.') {
            if (group == 0) return 0;
            group = 0;
            groups++;
        } else if (c == TX_UPPER || c == TX_LOWER) {
            if (++group > 2) return 0;
        } else {
            return 0;
        }
        i += (size_t)k;
    }
    return groups >= 1 && group > 0;
}

/* Is w[0..n) one letter ("J" of "J. R. R. Tolkien", "z" of "z. B.")? */
static int single_letter(const char *w, size_t n) {
    long cp;
    int k = tx_decode(w, n, &cp);
    tx_class c = tx_classify(cp);
    return (size_t)k == n && (c == TX_UPPER || c == TX_LOWER || c == TX_LETTER);
}

/* Digits only: how many, else 0 ("1.000" and "3.10" are not plain numbers: 0). */
static size_t plain_number(const char *w, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (w[i] < '0' || w[i] > '9') return 0;
    return n;
}

/* Does the single '.' after word w[0..n) leave the sentence open? first: the word is the
 * sentence's first; next: where the next sentence would start. */
static int keeps_open(const splitter *sp, const char *w, size_t n, int first, size_t next) {
    if (n == 0) return 0;
    if (split_rules_has(sp->sets, sp->nsets, 0, w, n)) return 1;
    if (first && n < 16 && w[0] >= 'A' && w[0] <= 'Z') {
        /* "Vgl. Kapitel 3", "Bzw. das": a lower-case abbreviation capitalised at the start */
        char low[16];
        memcpy(low, w, n);
        low[0] = (char)(w[0] | 0x20);
        if (split_rules_has(sp->sets, sp->nsets, 0, low, n)) return 1;
    }
    if (tx_class_at(sp->t + next, sp->len - next) == TX_DIGIT &&
        (split_rules_has(sp->sets, sp->nsets, 1, w, n) || split_rules_has(sp->sets, sp->nsets, 3, w, n)))
        return 1;
    if (single_letter(w, n) || dotted_letters(w, n)) return 1;
    size_t digits = plain_number(w, n);
    /* "1. Punkt", "2. Next item": a list's number opens its sentence */
    if (first && digits >= 1 && digits <= 2) return 1;
    /* German ordinals: "am 3. Oktober", "im 19. Jahrhundert"; years ("1999.") still end */
    if (sp->ordinals && digits >= 1 && digits <= 3) return 1;
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * the candidate */

/* Is the word at pos a name written with a small first letter and a capital inside ("eBay",
 * "iPhone", "iOS"), which starts a sentence as it is? Looks at most 16 characters ahead. */
static int mixed_case(const splitter *sp, size_t pos) {
    for (int i = 0; i < 16 && pos < sp->len; i++) {
        long cp;
        int k = tx_decode(sp->t + pos, sp->len - pos, &cp);
        tx_class c = tx_classify(cp);
        if (c == TX_UPPER) return i > 0;
        if (c != TX_LOWER) return 0;
        pos += (size_t)k;
    }
    return 0;
}

/* Does a sentence start at pos: a capital, a digit or an uncased letter, maybe behind
 * opening quotes and brackets ("„Komm", "(Siehe", "¿Qué")? */
static int starts_sentence(const splitter *sp, size_t pos) {
    for (int openers = 0; pos < sp->len && openers < 32; openers++) {
        long cp;
        int k = tx_decode(sp->t + pos, sp->len - pos, &cp);
        if (!tx_is_opener(cp)) {
            tx_class c = tx_classify(cp);
            return c == TX_UPPER || c == TX_DIGIT || c == TX_LETTER || (c == TX_LOWER && mixed_case(sp, pos));
        }
        pos += (size_t)k;
    }
    return 0;
}

/* The stops from r->begin on and the closers after them: fills r. */
static void read_stops(const splitter *sp, stop_run *r) {
    size_t i = r->begin;
    while (i < sp->len) {
        long cp;
        int k = tx_decode(sp->t + i, sp->len - i, &cp);
        int kind = tx_stop_kind(cp);
        if (!kind) break;
        r->dots += cp == '.';
        r->ellipsis |= cp == 0x2026;
        r->strong |= kind == 2;
        r->no_space |= kind == 3;
        i += (size_t)k;
    }
    while (i < sp->len) {
        long cp;
        int k = tx_decode(sp->t + i, sp->len - i, &cp);
        if (!tx_is_closer(cp)) break;
        i += (size_t)k;
    }
    r->end = i;
}

/* Does the sentence end with the stop run r? tok: where the word before it starts;
 * first: that word opens the sentence. */
static int ends_sentence(const splitter *sp, const stop_run *r, size_t tok, int first) {
    if (r->end >= sp->len) return 0; /* the text's end ends it anyway */
    if (r->no_space) return 1;
    size_t next = r->end + tx_skip_space(sp->t + r->end, sp->len - r->end);
    if (next == r->end || next == sp->len) return 0; /* "3.5", "www.a.de", "report.pdf" */
    if (!starts_sentence(sp, next)) return 0;        /* "z. B. ein", "Er sagte ... nichts" */
    if (r->strong || r->ellipsis || r->dots > 1) return 1;
    /* one '.': the word before it decides, without its opening quotes and brackets */
    while (tok < r->begin) {
        long cp;
        int k = tx_decode(sp->t + tok, r->begin - tok, &cp);
        if (!tx_is_opener(cp)) break;
        tok += (size_t)k;
    }
    return !keeps_open(sp, sp->t + tok, r->begin - tok, first, next);
}

/* ---------------------------------------------------------------------------------------
 * the pass */

static void split(const splitter *sp, span_list *out) {
    size_t i = 0, tok = 0;             /* the current word starts at tok */
    size_t first = (size_t)-1, last = 0; /* the sentence's first byte, its last byte's end */
    while (i < sp->len) {
        long cp;
        int k = tx_decode(sp->t + i, sp->len - i, &cp);
        if (tx_classify(cp) == TX_SPACE) {
            i += (size_t)k;
            tok = i;
            continue;
        }
        if (first == (size_t)-1) first = i;
        if (!tx_stop_kind(cp)) {
            i += (size_t)k;
            last = i;
            continue;
        }
        stop_run r = {.begin = i};
        read_stops(sp, &r);
        i = last = r.end;
        if (ends_sentence(sp, &r, tok, tok == first)) {
            span_push(out, first, r.end);
            first = (size_t)-1;
            tok = i;
        }
    }
    if (first != (size_t)-1) span_push(out, first, last);
}

int attend_split_sentences(const char *text, size_t len, const char *lang, attend_span **spans, char *err,
                           size_t errlen) {
    splitter sp = {.t = text, .len = text ? len : 0};
    sp.nsets = split_rules_for(lang, sp.sets);
    sp.ordinals = split_rules_ordinals(sp.sets, sp.nsets);
    span_list out = {0};
    split(&sp, &out);
    if (out.oom) {
        free(out.v);
        *spans = NULL;
        if (err && errlen) snprintf(err, errlen, "out of memory splitting %zu bytes into sentences", len);
        return -1;
    }
    *spans = out.v;
    return out.n;
}
