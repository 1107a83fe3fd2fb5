/* Text <-> ids, as transformers' MarianTokenizer, M2M100Tokenizer and MBart50Tokenizer do it. */
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

/* The tokens between a source's language token and its </s>: ids, and (when pieces is
 * not NULL) their pieces, malloc'd. */
typedef struct {
    int n, cap;
    int *id;
    char **piece; /* NULL unless pieces are wanted */
} tok_list;

static int tok_add(tok_list *t, int want_pieces, int id, const char *p, size_t len) {
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 64;
        int *ids = realloc(t->id, sizeof(int) * (size_t)cap);
        if (!ids) return -1;
        t->id = ids;
        if (want_pieces) {
            char **ps = realloc(t->piece, sizeof(char *) * (size_t)cap);
            if (!ps) return -1;
            t->piece = ps;
        }
        t->cap = cap;
    }
    if (want_pieces && !(t->piece[t->n] = strndup(p, len))) return -1;
    t->id[t->n++] = id;
    return 0;
}

static void tok_free(tok_list *t) {
    for (int i = 0; t->piece && i < t->n; i++) free(t->piece[i]);
    free(t->piece);
    free(t->id);
}

/* SentencePiece pieces of text[0..len) (NUL-free), each mapped through voc (<unk> if absent). */
static int add_pieces(const marian_model *m, const spm_model *spm, const vocab *voc, const char *text,
                      size_t len, tok_list *t, int want_pieces, char *err, size_t errlen) {
    spm_pieces sp;
    if (spm_encode(spm, text, len, &sp, err, errlen)) return -1;
    int rc = 0;
    for (int k = 0; k < sp.n && !rc; k++) {
        const size_t plen = strlen(sp.piece[k]);
        const int id = vocab_id(voc, sp.piece[k], plen);
        rc = tok_add(t, want_pieces, id >= 0 ? id : m->c.unk_id, sp.piece[k], plen);
    }
    spm_pieces_free(&sp);
    if (rc) snprintf(err, errlen, "out of memory tokenizing a %zu-byte line", len);
    return rc;
}

static size_t space_len(const unsigned char *s, size_t n);

/* Bytes of text[0..len) left after Python's str.rstrip(). */
static size_t rstripped(const char *text, size_t len) {
    for (;;) {
        size_t found = 0;
        for (size_t w = 1; w <= 3 && w <= len; w++)
            if (space_len((const unsigned char *)text + len - w, w) == w) { found = w; break; }
        if (!found) return len;
        len -= found;
    }
}

/* HF's slow tokenizers split the text at every added token (special tokens and language
 * codes) before SentencePiece sees it: each match is its own id, each stretch between
 * two is encoded on its own (so it gets its own leading ▁). The special tokens of an mBART
 * vocabulary never overlap, so the first match from the left is the trie's. <mask> strips
 * the whitespace before it (MBart50Tokenizer's AddedToken(lstrip=True)). */
static int add_split(const marian_model *m, const spm_model *spm, const vocab *voc, const char *text, size_t len,
                     tok_list *t, int want_pieces, char *err, size_t errlen) {
    const marian_config *c = &m->c;
    const int fixed[] = {c->bos_id, c->pad_id, c->eos_id, c->unk_id, c->mask_id};
    const int n_all = 5 + m->n_langs;
    int *ids = malloc(sizeof(int) * (size_t)n_all);
    const char **text_of = malloc(sizeof(char *) * (size_t)n_all);
    size_t *len_of = malloc(sizeof(size_t) * (size_t)n_all);
    int n = 0, rc = -1;
    if (!ids || !text_of || !len_of) {
        snprintf(err, errlen, "out of memory tokenizing a %zu-byte line", len);
        goto done;
    }
    for (int i = 0; i < n_all; i++) { /* each special token's text, once */
        const int id = i < 5 ? fixed[i] : m->lang_id[i - 5];
        const char *p = id >= 0 ? vocab_piece(voc, id) : NULL;
        if (!p || !*p) continue;
        ids[n] = id;
        text_of[n] = p;
        len_of[n++] = strlen(p);
    }
    size_t seg = 0;
    for (size_t k = 0; k < len;) {
        int hit = -1;
        size_t hit_len = 0;
        for (int i = 0; i < n; i++)
            if (text_of[i][0] == text[k] && len_of[i] > hit_len && len_of[i] <= len - k &&
                !memcmp(text + k, text_of[i], len_of[i])) {
                hit = ids[i];
                hit_len = len_of[i];
            }
        if (hit < 0) {
            k++;
            continue;
        }
        size_t seg_end = hit == c->mask_id ? rstripped(text + seg, k - seg) + seg : k;
        if (seg_end > seg && add_pieces(m, spm, voc, text + seg, seg_end - seg, t, want_pieces, err, errlen))
            goto done;
        if (tok_add(t, want_pieces, hit, text + k, hit_len)) {
            snprintf(err, errlen, "out of memory tokenizing a %zu-byte line", len);
            goto done;
        }
        k += hit_len;
        seg = k;
    }
    rc = len > seg ? add_pieces(m, spm, voc, text + seg, len - seg, t, want_pieces, err, errlen) : 0;
done:
    free(ids);
    free(text_of);
    free(len_of);
    return rc;
}

static int encode_side(const marian_model *m, int target, int lang, const char *text, size_t len,
                       int **ids_out, int *n_out, char ***pieces_out, int *truncated, char *err,
                       size_t errlen) {
    const spm_model *spm = target ? m->tgt_spm : m->src_spm;
    const vocab *voc = target ? m->tgt_vocab : m->src_vocab;
    const int want = pieces_out != NULL;
    const size_t full = len;
    len = readable_bytes(text, len, (size_t)m->c.max_pos * MARIAN_BYTES_PER_POSITION);
    size_t cs = 0, ce = 0;
    if (!target && m->c.family->text_codes) find_language_code(text, len, &cs, &ce);
    tok_list mid = {0};
    int *ids = NULL, n = 0;
    char **pieces = NULL;
    char *rest = malloc(len + 1);
    if (!rest) goto oom;
    memcpy(rest, text, cs);
    memcpy(rest + cs, text + ce, len - ce);
    size_t rest_len = len - (ce - cs);
    rest[rest_len] = 0;
    /* NUL bytes are read as spaces: SentencePiece's pieces travel as C strings */
    for (size_t k = 0; k < rest_len; k++)
        if (rest[k] == 0) rest[k] = ' ';
    if (ce > cs && cs == 0) { /* a leading >>xx<< stays one piece */
        const int id = vocab_id(voc, text, ce - cs);
        if (tok_add(&mid, want, id >= 0 ? id : m->c.unk_id, text, ce - cs)) goto oom;
    }
    if (m->c.family->special_split ? add_split(m, spm, voc, rest, rest_len, &mid, want, err, errlen)
                                   : add_pieces(m, spm, voc, rest, rest_len, &mid, want, err, errlen)) {
        free(rest);
        tok_free(&mid);
        return -1;
    }
    free(rest);
    rest = NULL;
    const int has_lang = lang >= 0;
    n = mid.n + has_lang + 1;
    *truncated = len < full;
    /* sources stop at the tokenizer's model_max_length (as HF truncates), targets at the
     * positions the decoder has */
    const int limit = target ? m->c.max_pos : m->c.model_max_length;
    if (n > limit) { /* keep the first pieces and the closing </s> */
        n = limit;
        *truncated = 1;
    }
    ids = malloc(sizeof(int) * (size_t)n);
    pieces = want ? calloc((size_t)n + 1, sizeof(char *)) : NULL;
    if (!ids || (want && !pieces)) goto oom;
    if (has_lang) { /* the language token first: [__xx__] pieces </s> */
        ids[0] = lang;
        const char *lp = vocab_piece(voc, lang);
        if (pieces && !(pieces[0] = strdup(lp ? lp : ""))) goto oom;
    }
    for (int k = has_lang; k < n - 1; k++) {
        ids[k] = mid.id[k - has_lang];
        if (pieces) { /* moved, not copied */
            pieces[k] = mid.piece[k - has_lang];
            mid.piece[k - has_lang] = NULL;
        }
    }
    ids[n - 1] = m->c.eos_id;
    if (pieces && !(pieces[n - 1] = strdup(vocab_piece(voc, m->c.eos_id)))) goto oom;
    tok_free(&mid);
    *ids_out = ids;
    *n_out = n;
    if (pieces_out) *pieces_out = pieces;
    return 0;
oom:
    free(rest);
    tok_free(&mid);
    free(ids);
    for (int k = 0; pieces && k < n; k++) free(pieces[k]);
    free(pieces);
    snprintf(err, errlen, "out of memory tokenizing a %zu-byte line", len);
    return -1;
}

int marian_encode_text(const marian_model *m, const char *text, size_t len, int **ids, int *n,
                       char ***pieces, int *truncated, char *err, size_t errlen) {
    return encode_side(m, 0, -1, text, len, ids, n, pieces, truncated, err, errlen);
}

int marian_encode_text_lang(const marian_model *m, int lang, const char *text, size_t len, int **ids,
                            int *n, char ***pieces, int *truncated, char *err, size_t errlen) {
    return encode_side(m, 0, lang, text, len, ids, n, pieces, truncated, err, errlen);
}

int marian_encode_target(const marian_model *m, const char *text, size_t len, int **ids, int *n,
                         char ***pieces, int *truncated, char *err, size_t errlen) {
    return encode_side(m, 1, -1, text, len, ids, n, pieces, truncated, err, errlen);
}

int marian_encode_target_lang(const marian_model *m, int lang, const char *text, size_t len, int **ids,
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
static int flush_pieces(const marian_model *m, strbuf *out, const char **cur, int *n_cur) {
    if (!*n_cur) return 0;
    char *t = spm_decode(m->tgt_spm, cur, *n_cur);
    *n_cur = 0;
    if (!t) return -1;
    int rc = sb_add(out, t, strlen(t));
    free(t);
    return rc;
}

/* Length of the Python-whitespace character at s (0 if none): str.strip() removes these. */
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

/* Is id a special token decoding skips: </s>, <pad>, <unk>, <s>, <mask>, a language token? */
static int skipped(const marian_model *m, int id) {
    const marian_config *c = &m->c;
    if (id == c->eos_id || id == c->pad_id || id == c->unk_id || id == c->bos_id || id == c->mask_id) return 1;
    for (int i = 0; i < m->n_langs; i++)
        if (id == m->lang_id[i]) return 1;
    return 0;
}

char *marian_decode_text(const marian_model *m, const int *ids, int n) {
    const marian_config *c = &m->c;
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
    replace_all(out.s, "\xe2\x96\x81", " "); /* any ▁ the decoder left */
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
