/* Attention views, word merging and hard alignments (see align.h for the presets' sources); a
 * result's view and words (align_side.h). */
#include "align.h"
#include "align_side.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------
 * Views */

attend_view attend_view_single(int layer, int head) {
    attend_view v;
    memset(&v, 0, sizeof v);
    v.n = 1;
    v.layer[0] = layer;
    v.head[0] = head;
    return v;
}

/* Parse an integer from [s, e); 0 on success. */
static int parse_index(const char *s, const char *e, int *out) {
    if (s == e || e - s > 6) return -1;
    int neg = 0, v = 0;
    if (*s == '-') {
        neg = 1;
        if (++s == e) return -1;
    }
    for (; s < e; s++) {
        if (!isdigit((unsigned char)*s)) return -1;
        v = v * 10 + (*s - '0');
    }
    *out = neg ? -v : v;
    return 0;
}

static int word_is(const char *s, const char *e, const char *w) {
    return (size_t)(e - s) == strlen(w) && !memcmp(s, w, (size_t)(e - s));
}

int attend_view_parse(const char *spec, attend_view *v, char *err, size_t errlen) {
    memset(v, 0, sizeof *v);
    if (!spec || !*spec) {
        snprintf(err, errlen, "empty attention view");
        return -1;
    }
    const char *s = spec;
    for (;;) {
        const char *e = s;
        while (*e && *e != ',') e++;
        while (s < e && *s == ' ') s++;
        const char *end = e;
        while (end > s && end[-1] == ' ') end--;
        if (word_is(s, end, "shift")) {
            v->shift = 1;
        } else if (word_is(s, end, "align")) {
            v->align = 1;
        } else if (word_is(s, end, "words")) {
            v->words = 1;
        } else if (word_is(s, end, "mutual") || word_is(s, end, "grow")) {
            if (v->links) {
                snprintf(err, errlen, "attention view '%s': 'mutual' and 'grow' are two ways to read links; "
                         "give one", spec);
                return -1;
            }
            v->links = word_is(s, end, "grow") ? ATTEND_LINKS_GROW : ATTEND_LINKS_MUTUAL;
        } else {
            const char *colon = memchr(s, ':', (size_t)(end - s));
            int layer, head;
            if (!colon) goto bad;
            if (word_is(s, colon, "last")) layer = ATTEND_LAYER_LAST;
            else if (word_is(s, colon, "penultimate")) layer = ATTEND_LAYER_PENULTIMATE;
            else if (word_is(s, colon, "all")) layer = ATTEND_LAYER_ALL;
            else if (parse_index(s, colon, &layer) == 0) {
                /* negative indices count from the end: -1 last, -2 penultimate, ... */
                if (layer < 0) layer = layer == -1 ? ATTEND_LAYER_LAST
                                     : layer == -2 ? ATTEND_LAYER_PENULTIMATE : -1000 + layer;
            } else goto bad;
            if (word_is(colon + 1, end, "avg")) head = ATTEND_HEAD_AVG;
            else if (parse_index(colon + 1, end, &head) || head < 0) goto bad;
            if (v->n == ATTEND_VIEW_MAX) {
                snprintf(err, errlen, "attention view '%s': more than %d items", spec, ATTEND_VIEW_MAX);
                return -1;
            }
            v->layer[v->n] = layer;
            v->head[v->n++] = head;
        }
        if (!*e) break;
        s = e + 1;
    }
    if (v->n == 0 && !v->align) {
        snprintf(err, errlen, "attention view '%s' names no layer:head (e.g. last:0) and not the alignment head "
                 "(align)", spec);
        return -1;
    }
    return 0;
bad:
    snprintf(err, errlen,
             "attention view '%s': expected items LAYER:HEAD (LAYER a 0-based number, last, "
             "penultimate or all; HEAD a number or avg) or 'align' (a file's trained alignment head), and "
             "optionally 'shift', 'words' and 'mutual' or 'grow', e.g. last:0, penultimate:avg, 4:avg,shift, "
             "1:2,shift,words,grow, 1:2,align,shift,words,grow",
             spec);
    return -1;
}

/* One layer:head item as text ("last:0", "3:avg"). */
static void item_name(int layer, int head, char *buf, size_t n) {
    char ls[16], hs[16];
    if (layer == ATTEND_LAYER_LAST) snprintf(ls, sizeof ls, "last");
    else if (layer == ATTEND_LAYER_PENULTIMATE) snprintf(ls, sizeof ls, "penultimate");
    else if (layer == ATTEND_LAYER_ALL) snprintf(ls, sizeof ls, "all");
    else if (layer <= -1000) snprintf(ls, sizeof ls, "%d", layer + 1000);
    else snprintf(ls, sizeof ls, "%d", layer);
    if (head == ATTEND_HEAD_AVG) snprintf(hs, sizeof hs, "avg");
    else snprintf(hs, sizeof hs, "%d", head);
    snprintf(buf, n, "%s:%s", ls, hs);
}

void attend_view_name(const attend_view *v, char *buf, size_t n) {
    static const char *const link_names[] = {"", "mutual", "grow"};
    const char *flags[4] = {v->align ? "align" : "", v->shift ? "shift" : "", v->words ? "words" : "",
                            v->links > 0 && v->links <= ATTEND_LINKS_GROW ? link_names[v->links] : ""};
    size_t k = 0;
    if (n == 0) return;
    buf[0] = 0;
    for (int i = 0; i < v->n + 4 && k < n; i++) {
        char item[48];
        if (i < v->n) item_name(v->layer[i], v->head[i], item, sizeof item);
        else if (*flags[i - v->n]) snprintf(item, sizeof item, "%s", flags[i - v->n]);
        else continue;
        k += (size_t)snprintf(buf + k, n - k, "%s%s", k ? "," : "", item);
    }
}

void attend_default_view(int L, char *buf, size_t n) {
    (void)L; /* the same for every depth: see align.h */
    if (n) snprintf(buf, n, "all:avg,grow");
}

int attend_resolve_layer(int l, int L) {
    if (l == ATTEND_LAYER_LAST) return L - 1;
    if (l == ATTEND_LAYER_PENULTIMATE) return L >= 2 ? L - 2 : -1;
    if (l <= -1000) l = L + (l + 1000);
    return l >= 0 && l < L ? l : -1;
}

int attend_view_check(const attend_view *v, int L, int H, char *err, size_t errlen) {
    if (v->links < ATTEND_LINKS_ARGMAX || v->links > ATTEND_LINKS_GROW) {
        snprintf(err, errlen, "attention view: link rule %d is none of argmax (0), mutual (1), grow (2)", v->links);
        return -1;
    }
    for (int i = 0; i < v->n; i++) {
        if (v->layer[i] != ATTEND_LAYER_ALL && attend_resolve_layer(v->layer[i], L) < 0) {
            char name[32];
            attend_view one = attend_view_single(v->layer[i], v->head[i]);
            attend_view_name(&one, name, sizeof name);
            snprintf(err, errlen, "attention view %s: the model has %d decoder layers (0..%d)%s", name,
                     L, L - 1, v->layer[i] == ATTEND_LAYER_PENULTIMATE ? ", no penultimate one" : "");
            return -1;
        }
        if (v->head[i] >= H) {
            snprintf(err, errlen, "attention view: head %d does not exist; the model has %d heads (0..%d)",
                     v->head[i], H, H - 1);
            return -1;
        }
    }
    return 0;
}

int attend_view_reduce(const attend_view *v, const float *cross, int L, int H, int T, int S,
                       float *out, char *err, size_t errlen) {
    return attend_view_reduce_head(v, cross, NULL, L, H, T, S, out, err, errlen);
}

int attend_view_reduce_head(const attend_view *v, const float *cross, const float *head, int L, int H, int T,
                            int S, float *out, char *err, size_t errlen) {
    if (attend_view_check(v, L, H, err, errlen)) return -1;
    if (v->align && !head) {
        snprintf(err, errlen, "attention view: 'align' names the trained alignment head, and there is none "
                 "(the model file has no %s.* keys, or attention was not captured)", ATTEND_ALIGN_HEAD_KEY);
        return -1;
    }
    unsigned char *sel = calloc((size_t)L * H + 1, 1);
    if (!sel) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < v->n; i++) {
        int l0 = 0, l1 = L - 1;
        if (v->layer[i] != ATTEND_LAYER_ALL) l0 = l1 = attend_resolve_layer(v->layer[i], L);
        for (int l = l0; l <= l1; l++)
            for (int h = 0; h < H; h++)
                if (v->head[i] == ATTEND_HEAD_AVG || v->head[i] == h) sel[l * H + h] = 1;
    }
    int count = 0;
    memset(out, 0, sizeof(float) * (size_t)T * S);
    if (v->align) { /* the head counts as one more item */
        count++;
        for (int t = 0; t + v->shift < T; t++)
            for (int j = 0; j < S; j++) out[(size_t)t * S + j] += head[(size_t)(t + v->shift) * S + j];
    }
    /* out[t] = mean over selected heads of cross[l][h][t + shift] */
    for (int lh = 0; lh < L * H; lh++) {
        if (!sel[lh]) continue;
        count++;
        const float *m = cross + (size_t)lh * T * S;
        for (int t = 0; t + v->shift < T; t++)
            for (int j = 0; j < S; j++) out[(size_t)t * S + j] += m[(size_t)(t + v->shift) * S + j];
    }
    for (size_t i = 0; i < (size_t)T * S; i++) out[i] /= (float)count;
    free(sel);
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Words */

#define WORD_START "\xe2\x96\x81" /* U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's space */

static int lower(char c) { return c >= 'a' && c <= 'z'; }
static int upper(char c) { return c >= 'A' && c <= 'Z'; }

/* A language token of a multilingual family: mBART-50's `xx_XX` (two lowercase letters, '_',
 * two capitals), NLLB-200's `xxx_Xxxx` (`deu_Latn`) or M2M-100's `__xx__`. SentencePiece
 * pieces of text never have these shapes without a leading ▁ in practice, and the
 * multilingual tokenizers turn a typed code into its token. */
static int is_language_token(const char *p) {
    const size_t n = strlen(p);
    if (n == 5 && lower(p[0]) && lower(p[1]) && p[2] == '_' && upper(p[3]) && upper(p[4])) return 1;
    if (n == 8 && lower(p[0]) && lower(p[1]) && lower(p[2]) && p[3] == '_' && upper(p[4]) && lower(p[5]) &&
        lower(p[6]) && lower(p[7]))
        return 1;
    if (n < 5 || strncmp(p, "__", 2) || strcmp(p + n - 2, "__")) return 0;
    for (size_t i = 2; i < n - 2; i++)
        if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= 'A' && p[i] <= 'Z') || p[i] == '_')) return 0;
    return 1;
}

static int is_special(const char *p) {
    return !strcmp(p, "</s>") || !strcmp(p, "<pad>") || !strcmp(p, "<s>") || !strcmp(p, "<mask>") ||
           is_language_token(p);
}

int attend_words_from_pieces(const char *const *pieces, int n, attend_words *w) {
    memset(w, 0, sizeof *w);
    w->n_pieces = n;
    w->word_of = malloc(sizeof(int) * (size_t)(n + 1));
    w->words = calloc((size_t)n + 1, sizeof(char *));
    size_t total = 1;
    for (int i = 0; i < n; i++) total += strlen(pieces[i]);
    char *buf = malloc(total); /* the word being built */
    if (!w->word_of || !w->words || !buf) goto oom;
    int cur = -1;
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        const char *p = pieces[i];
        if (is_special(p)) {
            w->word_of[i] = -1;
            continue;
        }
        int starts = !strncmp(p, WORD_START, 3);
        if (starts || cur < 0) {
            if (cur >= 0 && !(w->words[cur] = strndup(buf, len))) goto oom;
            cur = w->n_words++;
            len = 0;
        }
        /* the word's text: pieces without their ▁ markers */
        for (const char *q = p; *q;) {
            if (!strncmp(q, WORD_START, 3)) {
                q += 3;
                continue;
            }
            buf[len++] = *q++;
        }
        w->word_of[i] = cur;
    }
    if (cur >= 0 && !(w->words[cur] = strndup(buf, len))) goto oom;
    free(buf);
    return 0;
oom:
    free(buf);
    attend_words_free(w);
    return -1;
}

void attend_words_free(attend_words *w) {
    for (int i = 0; w->words && i < w->n_words; i++) free(w->words[i]);
    free(w->words);
    free(w->word_of);
    memset(w, 0, sizeof *w);
}

void attend_words_matrix(const float *A, int T, int S, const attend_words *src,
                         const attend_words *tgt, float *out) {
    const int TW = tgt->n_words, SW = src->n_words;
    memset(out, 0, sizeof(float) * (size_t)TW * SW);
    int *cnt = calloc((size_t)TW + 1, sizeof(int));
    for (int t = 0; t < T; t++) {
        int tw = tgt->word_of[t];
        if (tw < 0) continue;
        if (cnt) cnt[tw]++;
        for (int j = 0; j < S; j++)
            if (src->word_of[j] >= 0) out[(size_t)tw * SW + src->word_of[j]] += A[(size_t)t * S + j];
    }
    for (int tw = 0; cnt && tw < TW; tw++)
        for (int j = 0; cnt[tw] > 1 && j < SW; j++) out[(size_t)tw * SW + j] /= (float)cnt[tw];
    free(cnt);
}

char *attend_pharaoh(const int *links, int k) {
    char *s = malloc((size_t)k * 24 + 1);
    if (!s) return NULL;
    size_t n = 0;
    s[0] = 0;
    for (int i = 0; i < k; i++)
        n += (size_t)sprintf(s + n, "%s%d-%d", i ? " " : "", links[2 * i], links[2 * i + 1]);
    return s;
}

/* ---------------------------------------------------------------------------------------
 * One result's alignment */

void align_side_free(align_side *x) {
    if (x->have_src) attend_words_free(&x->src);
    if (x->have_tgt) attend_words_free(&x->tgt);
    free(x->A);
    memset(x, 0, sizeof *x);
}

int align_side_build(const attend_result *r, const attend_config *c, const attend_view *v, align_side *x,
                     char *err, size_t errlen) {
    memset(x, 0, sizeof *x);
    x->T = r->n_tgt, x->S = r->n_src;
    if (v) x->view = *v;
    else if (attend_view_parse(c->alignment_view, &x->view, err, errlen)) /* the model's own (checked at load) */
        return -1;
    v = &x->view;
    if (!r->cross) {
        snprintf(err, errlen, "no attention captured: translate with want_attention");
        return -1;
    }
    if (!(x->A = malloc(sizeof(float) * ((size_t)x->T * x->S + 1)))) goto oom;
    if (attend_view_reduce_head(v, r->cross, r->align_head, c->decoder_layers, c->decoder_heads, x->T, x->S,
                                x->A, err, errlen))
        return -1;
    if (attend_words_from_pieces((const char *const *)r->src_pieces, x->S, &x->src)) goto oom;
    x->have_src = 1;
    if (attend_words_from_pieces((const char *const *)r->tgt_pieces, x->T, &x->tgt)) goto oom;
    x->have_tgt = 1;
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    return -1;
}

char *attend_alignment(const attend_result *r, const attend_config *c, const attend_view *v,
                       char *err, size_t errlen) {
    align_side x;
    int *links = NULL;
    char *out = NULL;
    if (align_side_build(r, c, v, &x, err, errlen) == 0) { /* links by the rules of the view read */
        const int k = attend_view_links(&x.view, x.A, x.T, x.S, &x.src, &x.tgt, &links);
        if (k < 0 || !(out = attend_pharaoh(links, k))) snprintf(err, errlen, "out of memory");
    }
    align_side_free(&x);
    free(links);
    return out;
}
