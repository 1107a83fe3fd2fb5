/* token_words: Whisper's text tokens merged into timed words as Hugging Face's pipeline
 * merges them (tokenization_whisper.py: _split_tokens_on_unicode, _split_tokens_on_spaces,
 * _merge_punctuations); see token_times.h. Texts are handled as Python handles them: the
 * bytes decoded to code points with U+FFFD for invalid bytes, str.strip()'s whitespace,
 * and `a in b` as a substring test. */
#include "token_times.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPLACEMENT 0xfffdu

/* A stretch of text (code points) and the tokens it came from: [first, first + ntok). */
typedef struct {
    uint32_t *cp;
    int n, first, ntok;
} piece;

static const uint32_t ASCII_PUNCTUATION[] = {'!', '"', '#', '$', '%', '&', '\'', '(', ')', '*', '+', ',',
                                             '-', '.', '/', ':', ';', '<', '=', '>', '?', '@', '[', '\\',
                                             ']', '^', '_', '`', '{', '|', '}', '~'};
/* OpenAI's prepend_punctuations and append_punctuations, which HF's pipeline uses */
static const uint32_t PREPENDED[] = {'"', '\'', 0x201c, 0xa1, 0xbf, '(', '[', '{', '-'};
static const uint32_t APPENDED[] = {'"', '\'', '.', 0x3002, ',', 0xff0c, '!', 0xff01, '?',
                                    0xff1f, ':', 0xff1a, 0x201d, ')', ']', '}', 0x3001};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---------------------------------------------------------------------------------------
 * Text as Python sees it */

/* The second byte's range after lead byte b, and how many bytes follow; 0 for a byte that
 * starts nothing (Unicode's table of well-formed UTF-8, which CPython follows). */
static int lead_byte(unsigned b, unsigned *lo, unsigned *hi) {
    *lo = 0x80, *hi = 0xbf;
    if (b >= 0xc2 && b <= 0xdf) return 1;
    if (b == 0xe0) return *lo = 0xa0, 2;
    if (b == 0xed) return *hi = 0x9f, 2;
    if (b >= 0xe1 && b <= 0xef) return 2;
    if (b == 0xf0) return *lo = 0x90, 3;
    if (b == 0xf4) return *hi = 0x8f, 3;
    if (b >= 0xf1 && b <= 0xf3) return 3;
    return 0;
}

/* bytes.decode("utf-8", "replace"): one U+FFFD for each maximal invalid stretch (a byte
 * that starts nothing, a valid start cut by a wrong byte, a start cut by the end). out has
 * room for n values. Returns the number of code points. */
static int decode_utf8(const unsigned char *s, size_t n, uint32_t *out) {
    int k = 0;
    for (size_t i = 0; i < n;) {
        unsigned lo, hi;
        const int need = s[i] < 0x80 ? 0 : lead_byte(s[i], &lo, &hi);
        if (s[i] < 0x80) {
            out[k++] = s[i++];
            continue;
        }
        if (!need) {
            out[k++] = REPLACEMENT, i++;
            continue;
        }
        uint32_t cp = s[i] & (0x3fu >> need);
        int got = 1;
        for (; got <= need && i + got < n; got++) {
            const unsigned c = s[i + got];
            if (c < (got == 1 ? lo : 0x80) || c > (got == 1 ? hi : 0xbf)) break;
            cp = cp << 6 | (c & 0x3f);
        }
        out[k++] = got > need ? cp : REPLACEMENT;
        i += got > need ? (size_t)need + 1 : (size_t)got;
    }
    return k;
}

/* str.isspace() for the code points str.strip() removes. */
static int is_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

/* Python's `needle in hay`: a substring (the empty one is in everything). */
static int contains(const uint32_t *hay, int nh, const uint32_t *needle, int nn) {
    for (int i = 0; i + nn <= nh; i++)
        if (!memcmp(hay + i, needle, sizeof(uint32_t) * (size_t)nn)) return 1;
    return 0;
}

/* `w.strip() in set` */
static int stripped_in(const piece *w, const uint32_t *set, int ns) {
    int lo = 0, hi = w->n;
    while (lo < hi && is_space(w->cp[lo])) lo++;
    while (hi > lo && is_space(w->cp[hi - 1])) hi--;
    return contains(set, ns, w->cp + lo, hi - lo);
}

/* dst += src (text and tokens); src emptied. 0 or -1 (out of memory). */
static int join(piece *dst, piece *src, int src_first) {
    uint32_t *cp = realloc(dst->cp, sizeof(uint32_t) * ((size_t)dst->n + src->n + 1));
    if (!cp) return -1;
    if (src_first) { /* src's text goes before dst's */
        memmove(cp + src->n, cp, sizeof(uint32_t) * (size_t)dst->n);
        memcpy(cp, src->cp, sizeof(uint32_t) * (size_t)src->n);
    } else {
        memcpy(cp + dst->n, src->cp, sizeof(uint32_t) * (size_t)src->n);
    }
    dst->cp = cp, dst->n += src->n;
    if (src->ntok && (!dst->ntok || src->first < dst->first)) dst->first = src->first;
    dst->ntok += src->ntok;
    src->n = src->ntok = 0;
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Groups of whole characters, words */

typedef struct {
    piece *p;
    int n, cap;
} pieces;

static void pieces_free(pieces *ps) {
    for (int i = 0; i < ps->n; i++) free(ps->p[i].cp);
    free(ps->p);
    memset(ps, 0, sizeof *ps);
}

/* Append a copy of cp[0..n) from tokens [first, first + ntok). 0 or -1 (out of memory). */
static int pieces_add(pieces *ps, const uint32_t *cp, int n, int first, int ntok) {
    if (ps->n == ps->cap) {
        const int cap = ps->cap ? 2 * ps->cap : 16;
        piece *p = realloc(ps->p, sizeof *p * (size_t)cap);
        if (!p) return -1;
        ps->p = p, ps->cap = cap;
    }
    piece *w = &ps->p[ps->n];
    w->cp = malloc(sizeof(uint32_t) * ((size_t)n + 1));
    if (!w->cp) return -1;
    memcpy(w->cp, cp, sizeof(uint32_t) * (size_t)n);
    w->n = n, w->first = first, w->ntok = ntok;
    ps->n++;
    return 0;
}

/* HF's _split_tokens_on_unicode: tokens gathered until their bytes decode without U+FFFD,
 * or with their first U+FFFD where the whole text has one too. bytes: every token's bytes
 * end to end, off[k]: where token k starts (off[n]: the end). full: bytes decoded (nfull).
 * tmp: room for off[n] code points. 0 or -1 (out of memory). */
static int unicode_groups(const unsigned char *bytes, const size_t *off, int n, const uint32_t *full, int nfull,
                          uint32_t *tmp, pieces *out) {
    int start = 0, offset = 0;
    for (int k = 0; k < n; k++) {
        const int m = decode_utf8(bytes + off[start], off[k + 1] - off[start], tmp);
        int bad = 0;
        while (bad < m && tmp[bad] != REPLACEMENT) bad++;
        if (bad == m || offset + bad >= nfull || full[offset + bad] == REPLACEMENT) {
            if (pieces_add(out, tmp, m, start, k + 1 - start)) return -1;
            offset += m;
            start = k + 1;
        }
    }
    return 0; /* tokens [start, n) never made whole characters: dropped, as HF drops them */
}

/* HF's _split_tokens_on_spaces over the groups: a group starting with a space, or ASCII
 * punctuation once stripped, opens a word; others join the word before. */
static int space_words(pieces *groups, pieces *out) {
    for (int i = 0; i < groups->n; i++) {
        piece *g = &groups->p[i];
        const int opens = out->n == 0 || (g->n > 0 && g->cp[0] == ' ') ||
                          stripped_in(g, ASCII_PUNCTUATION, COUNT(ASCII_PUNCTUATION));
        if (opens ? pieces_add(out, g->cp, g->n, g->first, g->ntok) : join(&out->p[out->n - 1], g, 0)) return -1;
    }
    return 0;
}

/* HF's _merge_punctuations: from the end, a word that starts with a space and strips to
 * (a piece of) PREPENDED joins the word after it; from the start, a word that is (a piece
 * of) APPENDED joins the word before it unless that one ends with a space. Emptied words
 * stay (empty) in place, as in HF, and take part in the later tests. */
static int merge_punctuation(pieces *w) {
    for (int i = w->n - 2, j = w->n - 1; i >= 0; i--) {
        piece *a = &w->p[i];
        if (a->n > 0 && a->cp[0] == ' ' && stripped_in(a, PREPENDED, COUNT(PREPENDED))) {
            if (join(&w->p[j], a, 1)) return -1;
        } else {
            j = i;
        }
    }
    for (int i = 0, j = 1; j < w->n; j++) {
        piece *a = &w->p[i], *b = &w->p[j];
        if (!(a->n > 0 && a->cp[a->n - 1] == ' ') && contains(APPENDED, COUNT(APPENDED), b->cp, b->n)) {
            if (join(a, b, 0)) return -1;
        } else {
            i = j;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Timed words */

/* Code points as UTF-8, NUL-terminated (malloc'd), or NULL. */
static char *encode_utf8(const uint32_t *cp, int n) {
    char *s = malloc(4 * (size_t)n + 1), *o = s;
    for (int i = 0; s && i < n; i++) {
        const uint32_t c = cp[i];
        if (c < 0x80) {
            *o++ = (char)c;
        } else if (c < 0x800) {
            *o++ = (char)(0xc0 | c >> 6), *o++ = (char)(0x80 | (c & 0x3f));
        } else if (c < 0x10000) {
            *o++ = (char)(0xe0 | c >> 12), *o++ = (char)(0x80 | (c >> 6 & 0x3f)), *o++ = (char)(0x80 | (c & 0x3f));
        } else {
            *o++ = (char)(0xf0 | c >> 18), *o++ = (char)(0x80 | (c >> 12 & 0x3f));
            *o++ = (char)(0x80 | (c >> 6 & 0x3f)), *o++ = (char)(0x80 | (c & 0x3f));
        }
    }
    if (s) *o = 0;
    return s;
}

/* The words with tokens, timed, into *out. Returns their number or -1 (out of memory). */
static int timed(const pieces *w, const double *start, const double *end, const float *prob, timed_word **out) {
    int n = 0;
    timed_word *t = malloc(sizeof *t * (size_t)(w->n ? w->n : 1));
    for (int i = 0; t && i < w->n; i++) {
        const piece *p = &w->p[i];
        if (!p->ntok) continue; /* emptied by a merge */
        timed_word *x = &t[n];
        x->text = encode_utf8(p->cp, p->n);
        if (!x->text) {
            timed_words_free(t, n);
            return -1;
        }
        x->first = p->first, x->n = p->ntok;
        x->start = start[p->first], x->end = end[p->first + p->ntok - 1];
        double sum = 0;
        for (int k = 0; prob && k < p->ntok; k++) sum += prob[p->first + k];
        x->probability = prob ? (float)(sum / p->ntok) : 0.0f;
        n++;
    }
    *out = t;
    return t ? n : -1;
}

int token_words(const char *const *token, const int *len, int n, const double *start, const double *end,
                const float *prob, int unicode_split, timed_word **words, char *err, size_t errlen) {
    *words = NULL;
    size_t *off = malloc(sizeof(size_t) * ((size_t)n + 1));
    for (int k = 0; off && k <= n; k++) {
        if (k < n && len[k] < 0) {
            snprintf(err, errlen, "token words: token %d has a negative length", k);
            free(off);
            return -1;
        }
        off[k] = k ? off[k - 1] + (size_t)len[k - 1] : 0;
    }
    unsigned char *bytes = off ? calloc(off[n] + 1, 1) : NULL;
    uint32_t *full = bytes ? malloc(sizeof(uint32_t) * (off[n] + 1)) : NULL;
    uint32_t *tmp = full ? malloc(sizeof(uint32_t) * (off[n] + 1)) : NULL;
    pieces groups = {0}, split = {0};
    int rc = tmp ? 0 : -1;
    for (int k = 0; !rc && k < n; k++) memcpy(bytes + off[k], token[k], (size_t)len[k]);
    if (!rc) rc = unicode_groups(bytes, off, n, full, decode_utf8(bytes, off[n], full), tmp, &groups);
    if (!rc && !unicode_split) rc = space_words(&groups, &split);
    pieces *w = unicode_split ? &groups : &split;
    if (!rc) rc = merge_punctuation(w);
    if (!rc) rc = timed(w, start, end, prob, words);
    if (rc < 0) snprintf(err, errlen, "token words: out of memory");
    pieces_free(&groups);
    pieces_free(&split);
    free(off);
    free(bytes);
    free(full);
    free(tmp);
    return rc;
}

void timed_words_free(timed_word *words, int n) {
    for (int i = 0; words && i < n; i++) free(words[i].text);
    free(words);
}

int token_words_unicode_language(const char *code) {
    static const char *const joined[] = {"zh", "ja", "th", "lo", "my", "yue"};
    for (int i = 0; code && i < COUNT(joined); i++)
        if (!strcmp(code, joined[i])) return 1;
    return 0;
}
