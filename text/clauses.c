/* text/clauses.c: an over-long sentence into pieces the model can take. A piece that does
 * not fit is cut at its strongest clause boundary (after ';', then ':', then ',' or a dash,
 * then before a conjunction), the one nearest its middle among equals, so that both halves
 * keep whole clauses and shrink about evenly; whitespace is the last resort. The halves are
 * cut again until they fit, left before right, through a stack of pending pieces rather than
 * recursion, so no text is deep enough to overflow the C stack. */
#include <stdio.h>

#include "text.h"

/* Boundary strengths, weakest first. */
enum { B_SPACE, B_CONJUNCTION, B_COMMA, B_COLON, B_SEMICOLON, B_KINDS };

/* A cut: the left piece ends at end1, the right one starts at begin2. */
typedef struct {
    size_t end1, begin2, dist;
    int found;
} cut;

typedef struct {
    const char *t;
    const split_rules *sets[SPLIT_MAX_SETS];
    int nsets;
    cut best[B_KINDS];
    size_t b, e, mid; /* the piece being cut */
} cutter;

/* Keep the cut if it leaves text on both sides and is nearer the middle than the last. */
static void offer(cutter *c, int kind, size_t end1, size_t begin2) {
    if (end1 <= c->b || begin2 >= c->e) return;
    size_t d = begin2 > c->mid ? begin2 - c->mid : c->mid - begin2;
    cut *k = &c->best[kind];
    if (!k->found || d < k->dist) *k = (cut){end1, begin2, d, 1};
}

/* Punctuation after which a clause may end: its strength, or -1. spaced: ASCII ones only
 * when whitespace follows ("1,5", "10:30" and "a;b" stay whole). */
static int punct_kind(long cp, int *spaced) {
    *spaced = 1;
    switch (cp) {
    case ';': return B_SEMICOLON;
    case ':': return B_COLON;
    case ',': return B_COMMA;
    }
    *spaced = 0;
    switch (cp) {
    case 0xFF1B: /* ； */
    case 0x061B: /* Arabic semicolon */
        return B_SEMICOLON;
    case 0xFF1A: /* ： */
        return B_COLON;
    case 0xFF0C: /* ， */
    case 0x3001: /* 、 */
    case 0x060C: /* Arabic comma */
    case 0x2013: /* – */
    case 0x2014: /* — */
        return B_COMMA;
    default:
        return -1;
    }
}

/* The word at w (up to n bytes): its length, stopping at whitespace or ASCII punctuation. */
static size_t word_at(const char *w, size_t n) {
    size_t i = 0;
    while (i < n && i <= 16) {
        unsigned char c = (unsigned char)w[i];
        if (c <= ' ' || (c < 0x80 && !((c | 0x20) >= 'a' && (c | 0x20) <= 'z') && !(c >= '0' && c <= '9')))
            break;
        i++;
    }
    return i;
}

/* After whitespace [ws, i): a whitespace cut, a conjunction cut, and " - " as a dash. */
static void offer_space(cutter *c, size_t ws, size_t i) {
    offer(c, B_SPACE, ws, i);
    size_t n = word_at(c->t + i, c->e - i);
    if (split_rules_has(c->sets, c->nsets, 2, c->t + i, n)) offer(c, B_CONJUNCTION, ws, i);
    if (c->t[i] == '-' && i + 1 < c->e && tx_class_at(c->t + i + 1, c->e - i - 1) == TX_SPACE)
        offer(c, B_COMMA, i + 1, i + 1 + tx_skip_space(c->t + i + 1, c->e - i - 1));
}

/* One pass over [b, e): the best cut of each strength. */
static void find_cuts(cutter *c, size_t b, size_t e) {
    c->b = b, c->e = e, c->mid = b + (e - b) / 2;
    for (int k = 0; k < B_KINDS; k++) c->best[k].found = 0;
    size_t i = b, ws = 0;
    int in_space = 0;
    while (i < e) {
        long cp;
        int n = tx_decode(c->t + i, e - i, &cp);
        if (tx_classify(cp) == TX_SPACE) {
            if (!in_space) ws = i, in_space = 1;
            i += (size_t)n;
            continue;
        }
        if (in_space) offer_space(c, ws, i), in_space = 0;
        int spaced, kind = punct_kind(cp, &spaced);
        size_t after = i + (size_t)n, skip = tx_skip_space(c->t + after, e - after);
        if (kind >= 0 && (!spaced || skip > 0)) offer(c, kind, after, after + skip);
        i = after;
    }
}

/* Pieces of [b, e) (trimmed, not empty) into out: those that fit, or cannot be cut. */
static void cut_piece(cutter *c, size_t b, size_t e, int (*fits)(void *, const char *, size_t), void *user,
                      span_list *out) {
    span_list todo = {0}; /* pending pieces, the next one last */
    span_push(&todo, b, e);
    while (todo.n > 0 && !todo.oom && !out->oom) {
        attend_span p = todo.v[--todo.n];
        if (fits(user, c->t + p.begin, p.end - p.begin)) {
            span_push(out, p.begin, p.end);
            continue;
        }
        find_cuts(c, p.begin, p.end);
        int k = B_KINDS - 1;
        while (k >= 0 && !c->best[k].found) k--;
        if (k < 0) {
            span_push(out, p.begin, p.end);
            continue;
        }
        cut x = c->best[k];
        span_push(&todo, x.begin2, p.end);
        span_push(&todo, p.begin, x.end1);
    }
    if (todo.oom) out->oom = 1;
    free(todo.v);
}

int attend_split_clauses(const char *text, size_t len, const char *lang,
                         int (*fits)(void *user, const char *s, size_t n), void *user, attend_span **spans,
                         char *err, size_t errlen) {
    cutter c = {.t = text};
    c.nsets = split_rules_for(lang, c.sets);
    span_list out = {0};
    if (!text) len = 0;
    /* trim: the first non-space byte, and the end of the last one */
    size_t b = tx_skip_space(text, len), e = b;
    for (size_t i = b; i < len;) {
        long cp;
        int n = tx_decode(text + i, len - i, &cp);
        i += (size_t)n;
        if (tx_classify(cp) != TX_SPACE) e = i;
    }
    if (e > b) cut_piece(&c, b, e, fits, user, &out);
    if (out.oom) {
        free(out.v);
        *spans = NULL;
        if (err && errlen) snprintf(err, errlen, "out of memory splitting %zu bytes into clauses", len);
        return -1;
    }
    *spans = out.v;
    return out.n;
}
