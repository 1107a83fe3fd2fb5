/* Text <-> ids, as transformers' MarianTokenizer, M2M100Tokenizer, NllbTokenizer and MBart50Tokenizer do it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "translate.h"

/* ---------------------------------------------------------------------------------------
 * Source side */

/* HF removes every match of the regex >>.+<< (greedy: from the first ">>" to the last "<<"
 * at least one character later) and keeps the match as a piece when it starts the text. */
static void find_language_code(const char *text, size_t len, size_t *start, size_t *end) {
    *start = *end = 0;
    size_t i = 0, j = 0;
    int have_i = 0, have_j = 0;
    for (size_t k = 0; k + 1 < len; k++) {
        if (!have_i && text[k] == '>' && text[k + 1] == '>') { i = k; have_i = 1; }
        if (text[k] == '<' && text[k + 1] == '<') { j = k; have_j = 1; }
    }
    if (!have_i || !have_j || j < i + 3) return;
    for (size_t k = i; k < j + 2; k++) /* '.' does not match a newline */
        if (text[k] == '\n') return;
    *start = i;
    *end = j + 2;
}

/* How many of text's len bytes the tokenizer reads: all, or at most max bytes ending
 * before a UTF-8 character that would be split (within 3 bytes: invalid UTF-8 is cut
 * anywhere). */
static size_t readable_bytes(const char *text, size_t len, size_t max) {
    if (len <= max) return len;
    size_t k = max; /* text[k] is the first byte left out */
    while (k > 0 && max - k < 3 && ((unsigned char)text[k] & 0xc0) == 0x80) k--;
    return k;
}

/* Length of the Python-whitespace character at s (0 if none): str.strip() removes these. */
static size_t space_len(const unsigned char *s, size_t n);

/* Bytes of text[0..n) left after Python's str.rstrip(). */
static size_t rstripped(const char *text, size_t n) {
    for (;;) { /* trailing: test each possible character start */
        size_t found = 0;
        for (size_t w = 1; w <= 3 && w <= n; w++)
            if (space_len((const unsigned char *)text + n - w, w) == w) { found = w; break; }
        if (!found) return n;
        n -= found;
    }
}

/* The longest added token that text[0..n) starts with: its id, and its length in *tl; -1
 * when none does. */
static int added_at(const s2s_model *m, const char *text, size_t n, size_t *tl) {
    const unsigned char b = (unsigned char)text[0];
    int best = -1;
    *tl = 0;
    for (int k = m->added_start[b]; k < m->added_start[b + 1]; k++) {
        const char *p = vocab_piece(m->src_vocab, m->added_id[k]);
        const size_t pl = strlen(p);
        if (pl > *tl && pl <= n && !memcmp(p, text, pl)) {
            best = m->added_id[k];
            *tl = pl;
        }
    }
    return best;
}

/* One part of a tokenized text: an id and the piece it came from (not NUL-terminated). */
typedef struct {
    int id;
    const char *p;
    size_t len;
} part;

typedef struct {
    part *v;
    int n, cap;
    spm_pieces *owned; /* the SentencePiece results the parts point into */
    int n_owned, cap_owned;
} parts;

static int parts_add(parts *ps, int id, const char *p, size_t len) {
    if (ps->n == ps->cap) {
        int cap = ps->cap ? 2 * ps->cap : 64;
        part *v = realloc(ps->v, sizeof(part) * (size_t)cap);
        if (!v) return -1;
        ps->v = v;
        ps->cap = cap;
    }
    ps->v[ps->n++] = (part){id, p, len};
    return 0;
}

static void parts_free(parts *ps) {
    for (int i = 0; i < ps->n_owned; i++) spm_pieces_free(&ps->owned[i]);
    free(ps->owned);
    free(ps->v);
}

/* SentencePiece's pieces of text[0..len) as parts (ids from the vocabulary, unk_id for a
 * piece it lacks). 0, 1 out of memory, -1 SentencePiece failed (err set). */
static int add_pieces(const s2s_model *m, int target, const char *text, size_t len, parts *ps, char *err,
                      size_t errlen) {
    const spm_model *spm = target ? m->tgt_spm : m->src_spm;
    const vocab *voc = target ? m->tgt_vocab : m->src_vocab;
    if (ps->n_owned == ps->cap_owned) {
        int cap = ps->cap_owned ? 2 * ps->cap_owned : 4;
        spm_pieces *o = realloc(ps->owned, sizeof(spm_pieces) * (size_t)cap);
        if (!o) return 1;
        ps->owned = o;
        ps->cap_owned = cap;
    }
    spm_pieces *sp = &ps->owned[ps->n_owned];
    if (spm_encode(spm, text, len, sp, err, errlen)) return -1;
    ps->n_owned++;
    for (int k = 0; k < sp->n; k++) {
        size_t plen = strlen(sp->piece[k]);
        int id = vocab_id(voc, sp->piece[k], plen);
        if (parts_add(ps, id >= 0 ? id : m->c.unk_id, sp->piece[k], plen)) return 1;
    }
    return 0;
}

/* The parts of text[0..len) (NULs already read as spaces). Marian: a >>xx<< code at the start
 * is one piece (MarianTokenizer). Multilingual families: HF's added tokens are cut out first
 * (the longest one at the leftmost place, as its trie does), each stretch of text between
 * them goes to SentencePiece on its own, and NllbTokenizer's <mask> takes the whitespace on
 * its left with it (lstrip). */
static int split_text(const s2s_model *m, int target, const char *text, size_t len, parts *ps, char *err,
                      size_t errlen) {
    const vocab *voc = target ? m->tgt_vocab : m->src_vocab;
    int rc;
    if (!target && m->c.family->text_codes) {
        size_t cs, ce;
        find_language_code(text, len, &cs, &ce);
        if (ce > cs && cs == 0) { /* a leading code stays one piece; any later one is removed */
            int id = vocab_id(voc, text, ce);
            if (parts_add(ps, id >= 0 ? id : m->c.unk_id, text, ce)) return 1;
        }
        if (ce == cs) return add_pieces(m, target, text, len, ps, err, errlen);
        char *rest = malloc(len + 1);
        if (!rest) return 1;
        memcpy(rest, text, cs);
        memcpy(rest + cs, text + ce, len - ce);
        rc = add_pieces(m, target, rest, len - (ce - cs), ps, err, errlen);
        free(rest);
        return rc;
    }
    size_t seg = 0, i = 0, tl;
    while (i < len) {
        int id = m->n_added ? added_at(m, text + i, len - i, &tl) : -1;
        if (id < 0) {
            i++;
            continue;
        }
        size_t end = id == m->c.mask_id ? seg + rstripped(text + seg, i - seg) : i;
        if (end > seg && (rc = add_pieces(m, target, text + seg, end - seg, ps, err, errlen))) return rc;
        if (parts_add(ps, id, text + i, tl)) return 1;
        i += tl;
        seg = i;
    }
    if (len > seg) return add_pieces(m, target, text + seg, len - seg, ps, err, errlen);
    return 0;
}

static int encode_side(const s2s_model *m, int target, int lang, const char *text, size_t len,
                       int **ids_out, int *n_out, char ***pieces_out, int *truncated, char *err,
                       size_t errlen) {
    const vocab *voc = target ? m->tgt_vocab : m->src_vocab;
    const size_t full = len;
    len = readable_bytes(text, len, (size_t)m->c.max_pos * S2S_BYTES_PER_POSITION);
    char *buf = malloc(len + 1);
    if (!buf) goto oom0;
    memcpy(buf, text, len);
    buf[len] = 0;
    /* NUL bytes are read as spaces: SentencePiece's pieces travel as C strings */
    for (size_t k = 0; k < len; k++)
        if (buf[k] == 0) buf[k] = ' ';
    parts ps = {0};
    int rc = split_text(m, target, buf, len, &ps, err, errlen);
    if (rc) {
        parts_free(&ps);
        free(buf);
        if (rc > 0) goto oom0;
        return -1;
    }
    const int has_lang = lang >= 0;
    int n = ps.n + has_lang + 1;
    *truncated = len < full;
    /* sources stop at the tokenizer's model_max_length (as HF truncates), targets at the
     * positions the decoder has */
    const int limit = target ? m->c.max_pos : m->c.model_max_length;
    if (n > limit) { /* keep the first pieces and the closing </s> */
        n = limit;
        *truncated = 1;
    }
    int *ids = malloc(sizeof(int) * (size_t)n);
    char **pieces = pieces_out ? calloc((size_t)n + 1, sizeof(char *)) : NULL;
    if (!ids || (pieces_out && !pieces)) {
        free(ids);
        free(pieces);
        parts_free(&ps);
        free(buf);
        goto oom0;
    }
    if (has_lang) { /* the language token first: [__xx__] pieces </s> */
        ids[0] = lang;
        const char *lp = vocab_piece(voc, lang);
        if (pieces) pieces[0] = strdup(lp ? lp : "");
    }
    for (int k = has_lang; k < n - 1; k++) {
        const part *pt = &ps.v[k - has_lang];
        ids[k] = pt->id;
        if (pieces) pieces[k] = strndup(pt->p, pt->len);
    }
    ids[n - 1] = m->c.eos_id;
    if (pieces) pieces[n - 1] = strdup(vocab_piece(voc, m->c.eos_id));
    parts_free(&ps);
    free(buf);
    if (pieces)
        for (int k = 0; k < n; k++)
            if (!pieces[k]) {
                for (int j = 0; j < n; j++) free(pieces[j]);
                free(pieces);
                free(ids);
                goto oom0;
            }
    *ids_out = ids;
    *n_out = n;
    if (pieces_out) *pieces_out = pieces;
    return 0;
oom0:
    snprintf(err, errlen, "out of memory tokenizing a %zu-byte line", len);
    return -1;
}

int s2s_encode_text(const s2s_model *m, const char *text, size_t len, int **ids, int *n,
                       char ***pieces, int *truncated, char *err, size_t errlen) {
    return encode_side(m, 0, -1, text, len, ids, n, pieces, truncated, err, errlen);
}

int s2s_encode_text_lang(const s2s_model *m, int lang, const char *text, size_t len, int **ids,
                            int *n, char ***pieces, int *truncated, char *err, size_t errlen) {
    return encode_side(m, 0, lang, text, len, ids, n, pieces, truncated, err, errlen);
}

int s2s_encode_target(const s2s_model *m, const char *text, size_t len, int **ids, int *n,
                         char ***pieces, int *truncated, char *err, size_t errlen) {
    return encode_side(m, 1, -1, text, len, ids, n, pieces, truncated, err, errlen);
}

int s2s_encode_target_lang(const s2s_model *m, int lang, const char *text, size_t len, int **ids,
                              int *n, char ***pieces, int *truncated, char *err, size_t errlen) {
    return encode_side(m, 1, lang, text, len, ids, n, pieces, truncated, err, errlen);
}

/* ---------------------------------------------------------------------------------------
 * Target side */

typedef struct {
    char *s;
    size_t n, cap;
} strbuf;

static int sb_add(strbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) return -1;
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
    return 0;
}

/* Decode the collected pieces with the target model and append. */
static int flush_pieces(const s2s_model *m, strbuf *out, const char **cur, int *n_cur) {
    if (!*n_cur) return 0;
    if (m->nllb) { /* NllbTokenizer joins the pieces as they are ("▁" becomes a space below) */
        for (int k = 0; k < *n_cur; k++)
            if (sb_add(out, cur[k], strlen(cur[k]))) return -1;
        *n_cur = 0;
        return 0;
    }
    char *t = spm_decode(m->tgt_spm, cur, *n_cur);
    *n_cur = 0;
    if (!t) return -1;
    int rc = sb_add(out, t, strlen(t));
    free(t);
    return rc;
}

static size_t space_len(const unsigned char *s, size_t n) {
    if (n >= 1 && ((s[0] >= 9 && s[0] <= 13) || s[0] == ' ' || (s[0] >= 0x1c && s[0] <= 0x1f))) return 1;
    if (n >= 2 && s[0] == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0)) return 2;
    if (n >= 3 && s[0] == 0xe1 && s[1] == 0x9a && s[2] == 0x80) return 3;
    if (n >= 3 && s[0] == 0xe2 && s[1] == 0x80 && (s[2] <= 0x8a || s[2] == 0xa8 || s[2] == 0xa9 || s[2] == 0xaf)) return 3;
    if (n >= 3 && s[0] == 0xe2 && s[1] == 0x81 && s[2] == 0x9f) return 3;
    if (n >= 3 && s[0] == 0xe3 && s[1] == 0x80 && s[2] == 0x80) return 3;
    return 0;
}

/* Replace every occurrence of `from` by `to` (to no longer than from), in place. */
static void replace_all(char *s, const char *from, const char *to) {
    size_t fl = strlen(from), tl = strlen(to);
    char *r = s, *w = s;
    while (*r) {
        if (strncmp(r, from, fl) == 0) {
            memcpy(w, to, tl);
            w += tl;
            r += fl;
        } else {
            *w++ = *r++;
        }
    }
    *w = 0;
}

/* Is id a special token decoding skips: </s>, <pad>, <unk>, <s>, a language token, <mask>?
 * NllbTokenizer also skips an id without a piece (its fast tokenizer does; the slow one
 * fails on it). */
static int skipped(const s2s_model *m, int id) {
    const s2s_config *c = &m->c;
    if (id == c->eos_id || id == c->pad_id || id == c->unk_id || id == c->bos_id || id == m->c.mask_id) return 1;
    if (m->nllb) {
        const char *p = vocab_piece(m->tgt_vocab, id);
        if (!p || !*p) return 1;
    }
    for (int i = 0; i < m->n_langs; i++)
        if (id == m->lang_id[i]) return 1;
    return 0;
}

char *s2s_decode_text(const s2s_model *m, const int *ids, int n) {
    const s2s_config *c = &m->c;
    /* an id without a piece reads as <unk>, a special token: MarianTokenizer adds a space */
    const char *unk = c->family->unk_space ? "<unk> " : "<unk>";
    strbuf out = {0};
    const char **cur = malloc(sizeof(char *) * (size_t)(n + 1));
    int n_cur = 0;
    if (!cur || sb_add(&out, "", 0)) goto oom;
    for (int i = 0; i < n; i++) {
        int id = ids[i];
        if (skipped(m, id)) continue;
        const char *p = vocab_piece(m->tgt_vocab, id);
        if (!p || !*p) {
            if (flush_pieces(m, &out, cur, &n_cur) || sb_add(&out, unk, strlen(unk))) goto oom;
            continue;
        }
        cur[n_cur++] = p;
    }
    if (flush_pieces(m, &out, cur, &n_cur)) goto oom;
    free(cur);
    cur = NULL;
    replace_all(out.s, "\xe2\x96\x81", " "); /* any ▁ the decoder left (NllbTokenizer: every one) */
    out.n = strlen(out.s);
    /* strip */
    size_t a = 0, b = out.n, k;
    while (a < b && (k = space_len((unsigned char *)out.s + a, b - a))) a += k;
    for (;;) { /* trailing: test each possible character start */
        size_t found = 0;
        for (size_t w = 1; w <= 3 && w <= b - a; w++)
            if (space_len((unsigned char *)out.s + b - w, w) == w) { found = w; break; }
        if (!found) break;
        b -= found;
    }
    memmove(out.s, out.s + a, b - a);
    out.s[b - a] = 0;
    /* HF's clean_up_tokenization */
    static const char *const pairs[][2] = {
        {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
        {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) replace_all(out.s, pairs[i][0], pairs[i][1]);
    return out.s;
oom:
    free(cur);
    free(out.s);
    return NULL;
}
