/* What test_markup.c and fuzz_markup.c ask of markup's output: that it is balanced HTML, and
 * the identity render (each segment translated as itself, word i linked to word i) they both
 * run. A small tokenizer of our own rather than gumbo: gumbo repairs whatever it reads, so it
 * could not tell a balanced output from one a browser merely tolerates.
 *
 * markup_balance_error(s, n): NULL when every start tag of a non-void element is closed by a
 * matching end tag, innermost first, and nothing else is closed; else what went wrong, where.
 * Comments, <!...> and <?...> are skipped, as is the content of raw-text elements (<script>,
 * <style>, <textarea>, ...) up to their end tag. markup_render_identity(d): the render. */
#ifndef ATTEND_TESTS_MARKUP_CHECK_H
#define ATTEND_TESTS_MARKUP_CHECK_H

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../text/markup.h"

/* HTML's void elements, and the names the parser reads as one (<image> is <img>). */
static const char *const mc_void[] = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link",
                                      "meta", "param", "source", "track", "wbr", "keygen", "image",
                                      "basefont", "bgsound", "frame", NULL};
/* Elements whose content is text up to their end tag, whatever it holds. */
static const char *const mc_raw[] = {"script", "style", "textarea", "title", "xmp", "iframe", "noembed",
                                     "noframes", "noscript", "plaintext", NULL};

static int mc_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r';
}

static int mc_in(const char *name, size_t n, const char *const *set) {
    for (int i = 0; set[i]; i++)
        if (strlen(set[i]) == n && !strncasecmp(set[i], name, n)) return 1;
    return 0;
}

/* The first case-insensitive occurrence of needle in s[from..n), or n. */
static size_t mc_find(const char *s, size_t n, size_t from, const char *needle) {
    const size_t k = strlen(needle);
    for (size_t i = from; i + k <= n; i++)
        if (!strncasecmp(s + i, needle, k)) return i;
    return n;
}

/* A tag's name from s[i] (a letter) on: its length. */
static size_t mc_name(const char *s, size_t n, size_t i) {
    size_t j = i;
    while (j < n && !mc_space(s[j]) && s[j] != '/' && s[j] != '>') j++;
    return j - i;
}

/* The end of a tag whose attributes start at s[j] (the tokenizer's attribute states,
 * quoted values included): one past its '>', or 0 when the bytes end first. */
static size_t mc_tag_end(const char *s, size_t n, size_t j) {
    for (;;) {
        while (j < n && (mc_space(s[j]) || s[j] == '/')) j++;
        if (j >= n) return 0;
        if (s[j] == '>') return j + 1;
        j++; /* an attribute name's first byte may be anything, '=' included */
        while (j < n && !mc_space(s[j]) && s[j] != '/' && s[j] != '>' && s[j] != '=') j++;
        while (j < n && mc_space(s[j])) j++;
        if (j >= n || s[j] != '=') continue;
        j++;
        while (j < n && mc_space(s[j])) j++;
        if (j < n && (s[j] == '"' || s[j] == '\'')) {
            const char *q = memchr(s + j + 1, s[j], n - j - 1);
            if (!q) return 0;
            j = (size_t)(q - s) + 1;
        } else {
            while (j < n && !mc_space(s[j]) && s[j] != '>') j++;
        }
    }
}

/* One past a comment starting at s[i] ("<!--"): "-->", "--!>", or the abrupt "<!-->" and
 * "<!--->"; the bytes' end when it never closes. */
static size_t mc_comment_end(const char *s, size_t n, size_t i) {
    if (i + 4 < n && s[i + 4] == '>') return i + 5;
    if (i + 5 < n && s[i + 4] == '-' && s[i + 5] == '>') return i + 6;
    for (size_t j = i + 4; j + 2 < n; j++) {
        if (!memcmp(s + j, "-->", 3)) return j + 3;
        if (j + 3 < n && !memcmp(s + j, "--!>", 4)) return j + 4;
    }
    return n;
}

typedef struct {
    size_t *at, *len; /* open elements' names: s[at[k]..at[k] + len[k]) */
    int n, cap;
} mc_stack;

static const char *mc_fail(char *msg, size_t i, const char *what, const char *name, size_t len) {
    snprintf(msg, 200, "byte %zu: %s <%.*s>", i, what, (int)(len > 40 ? 40 : len), name);
    return msg;
}

/* The next markup at s[i] == '<': how it changes the stack; *next: where reading goes on.
 * NULL or what is wrong. */
static const char *mc_step(const char *s, size_t n, size_t i, mc_stack *st, size_t *next, char *msg) {
    if (i + 3 < n && !memcmp(s + i, "<!--", 4)) return *next = mc_comment_end(s, n, i), NULL;
    if (i + 1 < n && (s[i + 1] == '!' || s[i + 1] == '?')) {
        const char *gt = memchr(s + i, '>', n - i);
        return *next = gt ? (size_t)(gt - s) + 1 : n, NULL;
    }
    const int end = i + 1 < n && s[i + 1] == '/';
    const size_t at = i + 1 + (size_t)end;
    if (at >= n || !isalpha((unsigned char)s[at])) {
        *next = i + 1; /* a '<' of text (written escaped, but "</>" and the like are harmless) */
        return end && at < n && s[at] != '>' ? mc_fail(msg, i, "bogus end tag", s + i, 3) : NULL;
    }
    const size_t len = mc_name(s, n, at), stop = mc_tag_end(s, n, at + len);
    if (!stop) return mc_fail(msg, i, "unterminated tag", s + at, len);
    *next = stop;
    if (end) {
        if (!st->n) return mc_fail(msg, i, "end tag with nothing open:", s + at, len);
        const int top = st->n - 1;
        if (st->len[top] != len || strncasecmp(s + st->at[top], s + at, len))
            return mc_fail(msg, i, "end tag does not close the innermost open element:", s + at, len);
        st->n--;
        return NULL;
    }
    if (mc_in(s + at, len, mc_void)) return NULL;
    if (st->n == st->cap) {
        st->cap = st->cap ? 2 * st->cap : 64;
        st->at = realloc(st->at, sizeof(size_t) * (size_t)st->cap);
        st->len = realloc(st->len, sizeof(size_t) * (size_t)st->cap);
        if (!st->at || !st->len) abort();
    }
    st->at[st->n] = at, st->len[st->n++] = len;
    if (mc_in(s + at, len, mc_raw)) { /* its text runs to "</name" */
        char close[64];
        snprintf(close, sizeof close, "</%.*s", (int)(len > 60 ? 60 : len), s + at);
        size_t j = stop;
        while ((j = mc_find(s, n, j, close)) < n && j + 2 + len < n && !mc_space(s[j + 2 + len]) &&
               s[j + 2 + len] != '/' && s[j + 2 + len] != '>')
            j++;
        *next = j;
    }
    return NULL;
}

static const char *markup_balance_error(const char *s, size_t n) {
    static char msg[200];
    mc_stack st = {0};
    const char *err = NULL;
    for (size_t i = 0; i < n && !err;) {
        if (s[i] != '<') {
            i++;
            continue;
        }
        err = mc_step(s, n, i, &st, &i, msg);
    }
    if (!err && st.n) err = mc_fail(msg, st.at[st.n - 1], "never closed:", s + st.at[st.n - 1], st.len[st.n - 1]);
    free(st.at), free(st.len);
    return err;
}

/* The number of whitespace-separated words of s[0..n) (the renderer's whitespace). */
static int markup_word_count(const char *s, size_t n) {
    int words = 0, in_word = 0;
    for (size_t i = 0, k; i < n;) {
        if ((k = markup_space_at(s + i, n - i))) {
            in_word = 0, i += k;
            continue;
        }
        words += !in_word, in_word = 1, i++;
    }
    return words;
}

/* d rendered with each segment as its own translation, word i linked to word i (to word
 * n - 1 - i of n when reverse: every tag moves): malloc'd, NULL when out of memory. */
static char *markup_render_linked(const markup_doc *d, int reverse) {
    const int n = markup_segments(d);
    const char **tr = calloc((size_t)n + 1, sizeof *tr);
    int **links = calloc((size_t)n + 1, sizeof *links), *n_links = calloc((size_t)n + 1, sizeof *n_links);
    char err[128], *out = NULL;
    int ok = tr && links && n_links;
    for (int i = 0; i < n && ok; i++) {
        const markup_segment *s = markup_segment_at(d, i);
        tr[i] = s->text;
        n_links[i] = markup_word_count(s->text, s->len);
        links[i] = malloc(sizeof(int) * (2 * (size_t)n_links[i] + 1));
        ok = links[i] != NULL;
        for (int w = 0; ok && w < n_links[i]; w++)
            links[i][2 * w] = w, links[i][2 * w + 1] = reverse ? n_links[i] - 1 - w : w;
    }
    if (ok) out = markup_render(d, tr, (const int *const *)links, n_links, err, sizeof err);
    for (int i = 0; links && i < n; i++) free(links[i]);
    free(tr), free(links), free(n_links);
    return out;
}

/* The non-space bytes of every segment's text, in order: malloc'd (aborts when out of memory). */
static inline char *markup_nonspace(const markup_doc *d) {
    markup_buf b = {0};
    for (int i = 0; i < markup_segments(d); i++) {
        const markup_segment *s = markup_segment_at(d, i);
        for (size_t j = 0, k; j < s->len; j += k ? k : 1)
            if (!(k = markup_space_at(s->text + j, s->len - j))) markup_buf_add(&b, s->text + j, 1);
    }
    if (b.oom) abort();
    return b.data ? b.data : calloc(1, 1);
}

static inline char *markup_render_identity(const markup_doc *d) { return markup_render_linked(d, 0); }

#endif
