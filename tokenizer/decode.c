/* Ids -> text, as transformers' decode(skip_special_tokens=True) with its default clean-up:
 * special tokens skipped, the pieces between them joined by the target SentencePiece model
 * (NllbTokenizer: as they are), an id without a piece read as <unk> (MarianTokenizer adds a
 * space after it), "▁" as spaces, the ends stripped and HF's clean_up_tokenization. */
#include "text.h"

#include <stdlib.h>
#include <string.h>

#include "pystrip.h"
#include "bpe.h"

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
    if (m->nllb || m->c.family->sentinels) { /* T5Tokenizer has no token for such an id */
        const char *p = vocab_piece(m->tgt_vocab, id);
        if (!p || !*p) return 1;
    }
    if (s2s_is_sentinel(m, id)) return 1;
    for (int i = 0; i < m->n_langs; i++)
        if (id == m->lang_id[i]) return 1;
    return 0;
}

/* The ids' text into out, before the clean-up. 0, or -1 out of memory. */
static int join_pieces(const s2s_model *m, const int *ids, int n, strbuf *out) {
    /* an id without a piece reads as <unk>, a special token: MarianTokenizer adds a space */
    const char *unk = m->c.family->unk_space ? "<unk> " : "<unk>";
    const char **cur = malloc(sizeof(char *) * (size_t)(n + 1));
    int n_cur = 0;
    if (!cur || sb_add(out, "", 0)) goto oom;
    for (int i = 0; i < n; i++) {
        int id = ids[i];
        if (skipped(m, id)) continue;
        const char *p = vocab_piece(m->tgt_vocab, id);
        if (!p || !*p) {
            if (flush_pieces(m, out, cur, &n_cur) || sb_add(out, unk, strlen(unk))) goto oom;
            continue;
        }
        cur[n_cur++] = p;
    }
    if (flush_pieces(m, out, cur, &n_cur)) goto oom;
    free(cur);
    return 0;
oom:
    free(cur);
    return -1;
}

/* A speech model's ids -> text: WhisperTokenizer.decode(skip_special_tokens=True). */
static char *decode_speech(const s2s_model *m, const int *ids, int n) {
    return bpe_whisper_decode(m->bpe, ids, n, 1, m->c.speech.prev_id, m->c.start_id, NULL);
}

char *s2s_decode_text(const s2s_model *m, const int *ids, int n) {
    if (m->c.family->audio) return decode_speech(m, ids, n);
    strbuf out = {0};
    if (join_pieces(m, ids, n, &out)) {
        free(out.s);
        return NULL;
    }
    replace_all(out.s, "\xe2\x96\x81", " "); /* any ▁ the decoder left (NllbTokenizer: every one) */
    out.n = strlen(out.s);
    /* strip */
    const size_t a = py_leading_space(out.s, out.n);
    const size_t b = a + py_rstripped(out.s + a, out.n - a);
    memmove(out.s, out.s + a, b - a);
    out.s[b - a] = 0;
    /* HF's clean_up_tokenization */
    static const char *const pairs[][2] = {
        {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
        {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) replace_all(out.s, pairs[i][0], pairs[i][1]);
    return out.s;
}
