/* text/markup_render.c: one segment's translation with its inline tags put back (markup.h).
 *
 * Each element gets a span of target words: those aligned to the source words it covered,
 * from the first to the last. Spans are then made to nest as the source's elements did (a
 * child inside its parent, siblings apart), so tags written outer first at a span's start
 * and inner first at its end are balanced by construction. An element with no aligned word,
 * an empty one and a void one (<img>, a comment) are zero-width: written open-and-closed
 * before the target word aligned to the source word that followed them. */
#include <stdlib.h>
#include <string.h>

#include "markup.h"

typedef struct {
    size_t *begin, *end; /* word i: bytes [begin[i], end[i]) */
    int n;
} words;

/* The whitespace-separated words of s[0..n) (markup_space_at's whitespace). 0 or -1. */
static int split_words(const char *s, size_t n, words *w) {
    w->n = 0;
    w->begin = malloc(sizeof(size_t) * (n / 2 + 2));
    w->end = malloc(sizeof(size_t) * (n / 2 + 2));
    if (!w->begin || !w->end) return -1;
    for (size_t i = 0, k; i < n;) {
        if ((k = markup_space_at(s + i, n - i))) {
            i += k;
            continue;
        }
        w->begin[w->n] = i;
        while (i < n && !markup_space_at(s + i, n - i)) i++;
        w->end[w->n++] = i;
    }
    return 0;
}

typedef struct {
    int zw;   /* zero-width: written at position pos, before target word pos */
    int s, e; /* else target words s..e */
    int pos;
    int depth;
} span;

/* Where a zero-width element standing before source word a goes among T target words:
 * before the first target word aligned to a or a later source word, else after the last
 * one aligned to an earlier word, else at the same share of the translation. */
static int zero_width_pos(const int *mn, const int *mx, int S, int T, int a) {
    for (int i = a; i < S; i++)
        if (mn[i] >= 0) return mn[i];
    for (int i = (a < S ? a : S) - 1; i >= 0; i--)
        if (mx[i] >= 0) return mx[i] + 1;
    return S > 0 ? (int)((long long)a * T / S) : T;
}

/* Element t's span from the links (mn/mx: each source word's first and last target word). */
static span first_span(const markup_inline *t, const words *sw, const int *mn, const int *mx, int T) {
    int first = -1, last = -1, anchor = sw->n;
    for (int i = 0; i < sw->n; i++) {
        if (anchor == sw->n && sw->begin[i] >= t->begin) anchor = i;
        if (sw->end[i] > t->begin && sw->begin[i] < t->end) first = first < 0 ? i : first, last = i;
    }
    span sp = {1, 0, -1, 0, 0};
    for (int i = first; t->close && first >= 0 && i <= last; i++)
        if (mn[i] >= 0) {
            sp.s = sp.zw ? mn[i] : (mn[i] < sp.s ? mn[i] : sp.s);
            sp.e = sp.zw ? mx[i] : (mx[i] > sp.e ? mx[i] : sp.e);
            sp.zw = 0;
        }
    if (sp.zw) sp.pos = zero_width_pos(mn, mx, sw->n, T, first >= 0 ? first : anchor);
    return sp;
}

/* Make span k nest: inside its parent, apart from its earlier siblings. */
static void nest(span *sp, const markup_inline *tags, int k, int T) {
    const int p = tags[k].parent;
    span *x = &sp[k];
    const int lo = p < 0 ? 0 : sp[p].zw ? sp[p].pos : sp[p].s, hi = p < 0 ? T : sp[p].zw ? sp[p].pos : sp[p].e;
    x->depth = p < 0 ? 0 : sp[p].depth + 1;
    if (p >= 0 && sp[p].zw) {
        x->zw = 1, x->pos = sp[p].pos;
        return;
    }
    if (x->zw) {
        x->pos = x->pos < lo ? lo : x->pos > hi ? hi : x->pos;
        return;
    }
    x->s = x->s < lo ? lo : x->s, x->e = x->e > hi ? hi : x->e;
    for (int q = p + 1; q < k && x->s <= x->e; q++) {
        if (tags[q].parent != p || sp[q].zw || sp[q].e < x->s || sp[q].s > x->e) continue;
        if (x->s >= sp[q].s) x->s = sp[q].e + 1;      /* starts inside q */
        else x->e = sp[q].s - 1;                       /* ends inside q, or holds it: the part before */
    }
    if (x->s > x->e) x->zw = 1, x->pos = x->s < lo ? lo : x->s > hi ? hi : x->s;
}

/* An element to write at a position: sorted by position, then by order (outer first for
 * openings, inner first for closings, document order for zero-width ones). */
typedef struct {
    int pos, order, k;
} event;

static int by_event(const void *a, const void *b) {
    const event *x = a, *y = b;
    if (x->pos != y->pos) return x->pos < y->pos ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Zero-width element k and its descendants (all zero-width, tags[k + 1 .. end) in document
 * order), nested as in the source; no recursion, however deep. */
static void write_zero_width(markup_buf *out, const markup_inline *tags, int k, int end, int *stack) {
    int n = 0;
    for (int j = k; j < end; j++) {
        while (n > 0 && stack[n - 1] != tags[j].parent) {
            n--;
            markup_buf_add(out, tags[stack[n]].close, strlen(tags[stack[n]].close));
        }
        markup_buf_add(out, tags[j].open, strlen(tags[j].open));
        if (tags[j].close) stack[n++] = j;
    }
    while (n > 0) {
        n--;
        markup_buf_add(out, tags[stack[n]].close, strlen(tags[stack[n]].close));
    }
}

typedef struct {
    event *open, *close, *zw;
    int n_open, n_close, n_zw;
    int *sub_end; /* [k]: one past the last of k's descendants in document order */
    int *stack;
} events;

/* The spans as three sorted event lists. 0 or -1 (out of memory). */
static int make_events(events *ev, const span *sp, const markup_inline *tags, int n) {
    ev->open = malloc(sizeof(event) * (size_t)(n + 1));
    ev->close = malloc(sizeof(event) * (size_t)(n + 1));
    ev->zw = malloc(sizeof(event) * (size_t)(n + 1));
    ev->sub_end = malloc(sizeof(int) * (size_t)(n + 1));
    ev->stack = malloc(sizeof(int) * (size_t)(n + 1));
    if (!ev->open || !ev->close || !ev->zw || !ev->sub_end || !ev->stack) return -1;
    ev->n_open = ev->n_close = ev->n_zw = 0;
    for (int k = 0; k < n; k++) ev->sub_end[k] = k + 1;
    for (int k = n - 1; k >= 0; k--)
        if (tags[k].parent >= 0 && ev->sub_end[k] > ev->sub_end[tags[k].parent])
            ev->sub_end[tags[k].parent] = ev->sub_end[k];
    for (int k = 0; k < n; k++) {
        const int p = tags[k].parent;
        if (sp[k].zw) {
            if (p < 0 || !sp[p].zw) ev->zw[ev->n_zw++] = (event){sp[k].pos, k, k};
            continue;
        }
        ev->open[ev->n_open++] = (event){sp[k].s, sp[k].depth * (n + 1) + k, k};
        ev->close[ev->n_close++] = (event){sp[k].e, -(sp[k].depth * (n + 1) + k), k};
    }
    qsort(ev->open, (size_t)ev->n_open, sizeof(event), by_event);
    qsort(ev->close, (size_t)ev->n_close, sizeof(event), by_event);
    qsort(ev->zw, (size_t)ev->n_zw, sizeof(event), by_event);
    return 0;
}

static void events_free(events *ev) {
    free(ev->open), free(ev->close), free(ev->zw), free(ev->sub_end), free(ev->stack);
}

/* The bytes of sentence punctuation (. , ; : ! ? …) ending the word w[0..n), never all
 * of it: a tag closing on the word closes before them ("<b>dog</b>."). */
static size_t trailing_punct(const char *w, size_t n) {
    size_t k = n;
    for (;;) {
        if (k > 1 && strchr(".,;:!?", w[k - 1])) k--;
        else if (k > 3 && !memcmp(w + k - 3, "\xe2\x80\xa6", 3)) k -= 3;
        else break;
    }
    return n - k;
}

/* The zero-width elements (and their descendants) at position w of T words, with the
 * source's space after them (before them at the end, where no word follows). */
static void write_zero_widths(markup_buf *out, const events *ev, int *iz, int w, int T, const markup_inline *tags) {
    for (; *iz < ev->n_zw && ev->zw[*iz].pos <= w; (*iz)++) {
        const markup_inline *t = &tags[ev->zw[*iz].k];
        const int at_end = w == T && T > 0;
        if (at_end && t->space_before && out->len && out->data[out->len - 1] != ' ') markup_buf_add(out, " ", 1);
        write_zero_width(out, tags, ev->zw[*iz].k, ev->sub_end[ev->zw[*iz].k], ev->stack);
        if (!at_end && w < T && t->space_after) markup_buf_add(out, " ", 1);
    }
}

/* The translation t (its words tw) with the events written in. */
static void write_events(markup_buf *out, const char *t, const words *tw, const events *ev,
                         const markup_inline *tags) {
    int io = 0, ic = 0, iz = 0;
    size_t at = 0;
    for (int w = 0; w <= tw->n; w++) {
        const size_t gap_end = w < tw->n ? tw->begin[w] : strlen(t);
        markup_buf_add(out, t + at, gap_end - at); /* the translation's own spacing */
        for (; io < ev->n_open && ev->open[io].pos <= w; io++)
            markup_buf_add(out, tags[ev->open[io].k].open, strlen(tags[ev->open[io].k].open));
        write_zero_widths(out, ev, &iz, w, tw->n, tags);
        if (w == tw->n) break;
        const size_t n = tw->end[w] - tw->begin[w], punct = trailing_punct(t + tw->begin[w], n);
        markup_buf_text(out, t + tw->begin[w], n - punct);
        for (; ic < ev->n_close && ev->close[ic].pos <= w; ic++)
            markup_buf_add(out, tags[ev->close[ic].k].close, strlen(tags[ev->close[ic].k].close));
        markup_buf_text(out, t + tw->end[w] - punct, punct);
        at = tw->end[w];
    }
    for (; ic < ev->n_close; ic++) /* spans past the last word (none when they nest) */
        markup_buf_add(out, tags[ev->close[ic].k].close, strlen(tags[ev->close[ic].k].close));
}

/* Each source word's first and last aligned target word (-1: none) into mn, mx. */
static void link_range(const int *links, int n_links, int S, int T, int *mn, int *mx) {
    for (int i = 0; i < S; i++) mn[i] = mx[i] = -1;
    for (int k = 0; links && k < n_links; k++) {
        const int i = links[2 * k], j = links[2 * k + 1];
        if (i < 0 || i >= S || j < 0 || j >= T) continue;
        mn[i] = mn[i] < 0 || j < mn[i] ? j : mn[i];
        mx[i] = j > mx[i] ? j : mx[i];
    }
}

int markup_place(markup_buf *out, const markup_segment *s, const char *translation, const int *links,
                 int n_links) {
    const char *t = translation ? translation : "";
    if (s->n_tags == 0) {
        markup_buf_text(out, t, strlen(t));
        return out->oom ? -1 : 0;
    }
    words sw = {0}, tw = {0};
    events ev = {0};
    int rc = split_words(s->text, s->len, &sw) | split_words(t, strlen(t), &tw);
    int *mn = malloc(sizeof(int) * (size_t)(sw.n + 1)), *mx = malloc(sizeof(int) * (size_t)(sw.n + 1));
    span *sp = malloc(sizeof *sp * (size_t)s->n_tags);
    if (rc || !mn || !mx || !sp) rc = -1;
    if (!rc) {
        link_range(links, n_links, sw.n, tw.n, mn, mx);
        for (int k = 0; k < s->n_tags; k++) sp[k] = first_span(&s->tags[k], &sw, mn, mx, tw.n);
        for (int k = 0; k < s->n_tags; k++) nest(sp, s->tags, k, tw.n);
        rc = make_events(&ev, sp, s->tags, s->n_tags);
    }
    if (!rc) write_events(out, t, &tw, &ev, s->tags);
    events_free(&ev);
    free(sw.begin), free(sw.end), free(tw.begin), free(tw.end), free(mn), free(mx), free(sp);
    return rc || out->oom ? -1 : 0;
}
