/* Text -> ids, for sources and forced targets: the text is cut into parts (Marian: a
 * leading >>xx<< code kept whole; multilingual families: the added tokens typed in it),
 * SentencePiece splits the stretches between them into pieces, the vocabulary maps pieces
 * to ids, and the language token, </s> and the length limits frame the result, as
 * transformers' MarianTokenizer, M2M100Tokenizer, NllbTokenizer and MBart50Tokenizer do. */
#include "text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pystrip.h"

/* ---------------------------------------------------------------------------------------
 * Parts: the ids of a text and the pieces they came from */

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

/* ---------------------------------------------------------------------------------------
 * Marian: >>xx<< codes (MarianTokenizer) */

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

/* A leading code stays one piece; any later one is removed; the rest goes to SentencePiece. */
static int split_codes(const s2s_model *m, const char *text, size_t len, parts *ps, char *err, size_t errlen) {
    size_t cs, ce;
    find_language_code(text, len, &cs, &ce);
    if (ce > cs && cs == 0) {
        int id = vocab_id(m->src_vocab, text, ce);
        if (parts_add(ps, id >= 0 ? id : m->c.unk_id, text, ce)) return 1;
    }
    if (ce == cs) return add_pieces(m, 0, text, len, ps, err, errlen);
    char *rest = malloc(len + 1);
    if (!rest) return 1;
    memcpy(rest, text, cs);
    memcpy(rest + cs, text + ce, len - ce);
    int rc = add_pieces(m, 0, rest, len - (ce - cs), ps, err, errlen);
    free(rest);
    return rc;
}

/* ---------------------------------------------------------------------------------------
 * Multilingual families: added tokens typed in the text */

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

/* HF's added tokens are cut out first (the longest one at the leftmost place, as its trie
 * does), each stretch of text between them goes to SentencePiece on its own, and
 * NllbTokenizer's <mask> takes the whitespace on its left with it (lstrip). */
static int split_added(const s2s_model *m, int target, const char *text, size_t len, parts *ps, char *err,
                       size_t errlen) {
    size_t seg = 0, i = 0, tl;
    int rc;
    while (i < len) {
        int id = m->n_added ? added_at(m, text + i, len - i, &tl) : -1;
        if (id < 0) {
            i++;
            continue;
        }
        /* T5's extra ids strip the whitespace on both sides (lstrip and rstrip) */
        const int sentinel = s2s_is_sentinel(m, id);
        size_t end = id == m->c.mask_id || sentinel ? seg + py_rstripped(text + seg, i - seg) : i;
        if (end > seg && (rc = add_pieces(m, target, text + seg, end - seg, ps, err, errlen))) return rc;
        if (parts_add(ps, id, text + i, tl)) return 1;
        i += tl;
        if (sentinel) i += py_leading_space(text + i, len - i);
        seg = i;
    }
    if (len > seg) return add_pieces(m, target, text + seg, len - seg, ps, err, errlen);
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Text -> ids */

/* How many of text's len bytes the tokenizer reads: all, or at most max bytes ending
 * before a UTF-8 character that would be split (within 3 bytes: invalid UTF-8 is cut
 * anywhere). */
static size_t readable_bytes(const char *text, size_t len, size_t max) {
    if (len <= max) return len;
    size_t k = max; /* text[k] is the first byte left out */
    while (k > 0 && max - k < 3 && ((unsigned char)text[k] & 0xc0) == 0x80) k--;
    return k;
}

/* The parts of text[0..len) (NULs already read as spaces), by the family's rules. 0, 1 out
 * of memory, -1 SentencePiece failed (err set). */
static int split_text(const s2s_model *m, int target, const char *text, size_t len, parts *ps, char *err,
                      size_t errlen) {
    if (!target && m->c.family->text_codes) return split_codes(m, text, len, ps, err, errlen);
    return split_added(m, target, text, len, ps, err, errlen);
}

static void free_pieces(char **pieces, int n) {
    for (int j = 0; pieces && j < n; j++) free(pieces[j]);
    free(pieces);
}

/* The n ids [lang] parts... </s> (the parts cut to fit) and, when pieces_out is not NULL,
 * their pieces (NULL-terminated). 0, or -1 out of memory (nothing allocated). */
static int assemble(const s2s_model *m, int target, int lang, const parts *ps, int n, int **ids_out,
                    char ***pieces_out) {
    const vocab *voc = target ? m->tgt_vocab : m->src_vocab;
    const int has_lang = lang >= 0;
    int *ids = malloc(sizeof(int) * (size_t)n);
    char **pieces = pieces_out ? calloc((size_t)n + 1, sizeof(char *)) : NULL;
    if (!ids || (pieces_out && !pieces)) {
        free(ids);
        free(pieces);
        return -1;
    }
    if (has_lang) { /* the language token first: [__xx__] pieces </s> */
        ids[0] = lang;
        const char *lp = vocab_piece(voc, lang);
        if (pieces) pieces[0] = strdup(lp ? lp : "");
    }
    for (int k = has_lang; k < n - 1; k++) {
        const part *pt = &ps->v[k - has_lang];
        ids[k] = pt->id;
        if (pieces) pieces[k] = strndup(pt->p, pt->len);
    }
    ids[n - 1] = m->c.eos_id;
    if (pieces) pieces[n - 1] = strdup(vocab_piece(voc, m->c.eos_id));
    for (int k = 0; pieces && k < n; k++)
        if (!pieces[k]) {
            free_pieces(pieces, n);
            free(ids);
            return -1;
        }
    *ids_out = ids;
    if (pieces_out) *pieces_out = pieces;
    return 0;
}

static int encode_side(const s2s_model *m, int target, int lang, const char *text, size_t len,
                       int **ids_out, int *n_out, char ***pieces_out, int *truncated, char *err,
                       size_t errlen) {
    const size_t full = len;
    len = readable_bytes(text, len, (size_t)m->c.max_pos * S2S_BYTES_PER_POSITION);
    char *buf = malloc(len + 1);
    if (!buf) goto oom;
    memcpy(buf, text, len);
    buf[len] = 0;
    /* NUL bytes are read as spaces: SentencePiece's pieces travel as C strings */
    for (size_t k = 0; k < len; k++)
        if (buf[k] == 0) buf[k] = ' ';
    parts ps = {0};
    int n = 0, rc = split_text(m, target, buf, len, &ps, err, errlen);
    if (!rc) {
        /* T5Tokenizer adds no </s> after a typed one */
        const int typed_eos = m->c.family->sentinels && ps.n > 0 && ps.v[ps.n - 1].id == m->c.eos_id;
        n = ps.n + (lang >= 0) + !typed_eos;
        *truncated = len < full;
        /* sources stop at the tokenizer's model_max_length (as HF truncates), targets at
         * the positions the decoder has */
        const int limit = target ? m->c.max_pos : m->c.model_max_length;
        if (n > limit) { /* keep the first pieces and the closing </s> */
            n = limit;
            *truncated = 1;
        }
        if (assemble(m, target, lang, &ps, n, ids_out, pieces_out)) rc = 1;
    }
    parts_free(&ps);
    free(buf);
    if (rc < 0) return -1;
    if (rc > 0) goto oom;
    *n_out = n;
    return 0;
oom:
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
