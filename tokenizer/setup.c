/* The tokenizer's parts from a checkpoint's tokenizer.* keys, at load: both vocabularies
 * (piece <-> id), both SentencePiece models, the language tokens of a multilingual family,
 * tokenizer.class (whose rules the text follows) and the table of added tokens the source
 * text is split at. Every key is checked: a bad one refuses the file by name. */
#include "text.h"

#include <stdlib.h>
#include <string.h>

#include "../model/load.h"
#include "bpe.h"

/* ---------------------------------------------------------------------------------------
 * Vocabularies and SentencePiece models */

/* The vocabulary of key's pieces (strings in id order, exactly n of them), or NULL with err. */
static vocab *load_vocab(const gguf_file *f, const char *key, int n, char *err, size_t errlen) {
    const gguf_kv *kv = gguf_get_array(f, key, GGUF_STRING, err, errlen);
    if (!kv) return NULL;
    if (kv->count != (uint64_t)n) {
        s2s_fail(err, errlen, "key %s: %llu pieces, the model has %d ids", key,
                 (unsigned long long)kv->count, n);
        return NULL;
    }
    const char **pieces = malloc(sizeof(char *) * (size_t)n);
    uint64_t *lens = malloc(sizeof(uint64_t) * (size_t)n);
    vocab *v = NULL;
    if (!pieces || !lens) {
        s2s_fail(err, errlen, "out of memory");
    } else {
        for (int i = 0; i < n; i++) {
            pieces[i] = kv->strings[i].ptr;
            lens[i] = kv->strings[i].len;
        }
        v = vocab_new(pieces, lens, n, err, errlen);
    }
    free(pieces);
    free(lens);
    return v;
}

/* The SentencePiece model serialized in key's bytes, or NULL with err naming the key. */
static spm_model *load_spm(const gguf_file *f, const char *key, char *err, size_t errlen) {
    const gguf_kv *kv = gguf_get_array(f, key, GGUF_U8, err, errlen);
    if (!kv) return NULL;
    char inner[200];
    spm_model *sp = spm_load(kv->data, kv->count, inner, sizeof inner);
    if (!sp) s2s_fail(err, errlen, "key %s: %s", key, inner);
    return sp;
}

/* ---------------------------------------------------------------------------------------
 * Language tokens (multilingual families) */

/* tokenizer.languages (codes) and tokenizer.language_ids (their tokens' ids): as many of
 * each, codes non-empty and distinct, ids inside both vocabularies and distinct. */
static int load_languages(s2s_model *m, char *err, size_t errlen) {
    const gguf_kv *codes = gguf_get_array(m->file, "tokenizer.languages", GGUF_STRING, err, errlen);
    if (!codes) return -1;
    const gguf_kv *ids = gguf_get_array(m->file, "tokenizer.language_ids", GGUF_U32, err, errlen);
    if (!ids) return -1;
    if (codes->count != ids->count || codes->count < 1 || codes->count > 100000) {
        s2s_fail(err, errlen, "key tokenizer.language_ids: %llu ids for %llu codes (1..100000 needed)",
                 (unsigned long long)ids->count, (unsigned long long)codes->count);
        return -1;
    }
    const int n = (int)codes->count;
    const int lim = m->c.vocab_size < m->c.decoder_vocab_size ? m->c.vocab_size : m->c.decoder_vocab_size;
    m->lang_code = calloc((size_t)n, sizeof(char *));
    m->lang_id = malloc(sizeof(int) * (size_t)n);
    if (!m->lang_code || !m->lang_id) {
        s2s_fail(err, errlen, "out of memory");
        return -1;
    }
    m->n_langs = n;
    for (int i = 0; i < n; i++) {
        gguf_str s = codes->strings[i];
        uint32_t id;
        memcpy(&id, ids->data + 4 * (size_t)i, 4);
        char b[48];
        if (s.len == 0 || s.len > 64 || memchr(s.ptr, 0, s.len)) {
            s2s_fail(err, errlen, "key tokenizer.languages: code %d '%s' is empty, too long or holds a NUL byte", i,
                     s2s_shown(b, sizeof b, s));
            return -1;
        }
        if (id >= (uint32_t)lim) {
            s2s_fail(err, errlen, "key tokenizer.language_ids: id %u of '%s' outside the vocabulary (0..%d)", id,
                     s2s_shown(b, sizeof b, s), lim - 1);
            return -1;
        }
        m->lang_code[i] = strndup(s.ptr, s.len);
        m->lang_id[i] = (int)id;
        if (!m->lang_code[i]) {
            s2s_fail(err, errlen, "out of memory");
            return -1;
        }
        for (int j = 0; j < i; j++)
            if (!strcmp(m->lang_code[j], m->lang_code[i]) || m->lang_id[j] == m->lang_id[i]) {
                s2s_fail(err, errlen, "key tokenizer.languages: '%s' repeats a code or an id", m->lang_code[i]);
                return -1;
            }
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * tokenizer.class and the added tokens */

/* tokenizer.class (optional): whose rules the text follows. Absent, the family's own
 * tokenizer (MarianTokenizer, M2M100Tokenizer); m2m_100 files may name NllbTokenizer. */
static int read_class(s2s_model *m, char *err, size_t errlen) {
    const s2s_config *c = &m->c;
    const int multi = c->family->languages;
    if (!gguf_find_kv(m->file, "tokenizer.class")) return 0;
    gguf_str s;
    if (gguf_get_str(m->file, "tokenizer.class", &s, err, errlen)) return -1;
#define IS(lit) (s.len == strlen(lit) && !memcmp(s.ptr, lit, s.len))
    if (multi && IS("NllbTokenizer")) {
        m->nllb = 1;
    } else if (!(multi ? IS("M2M100Tokenizer") : IS("MarianTokenizer"))) {
        char b[48];
        s2s_fail(err, errlen, "key tokenizer.class: '%s' is not a tokenizer attend runs for %s (%s)",
                 s2s_shown(b, sizeof b, s), c->family->name,
                 multi ? "M2M100Tokenizer, NllbTokenizer" : "MarianTokenizer");
        return -1;
    }
#undef IS
    return 0;
}

/* The added tokens of a multilingual family, which the source text is split on: <s>
 * <pad> </s> <unk>, the language tokens, <mask>, each id once, those with a source piece,
 * ordered by their piece's first byte (m->added_id, m->added_start). */
static int build_added(s2s_model *m, char *err, size_t errlen) {
    const s2s_config *c = &m->c;
    m->added_id = malloc(sizeof(int) * (size_t)(m->n_langs + 5));
    if (!m->added_id) {
        s2s_fail(err, errlen, "out of memory");
        return -1;
    }
    const int lim = c->vocab_size < c->decoder_vocab_size ? c->vocab_size : c->decoder_vocab_size;
    for (int b = 0; b < 256; b++) /* counting sort by first byte, stable */
        for (int k = 0; k < m->n_langs + 5; k++) {
            const int fixed[5] = {c->bos_id, c->pad_id, c->eos_id, c->unk_id, c->mask_id};
            const int id = k < 4 ? fixed[k] : k < 4 + m->n_langs ? m->lang_id[k - 4] : fixed[4];
            const char *p = id >= 0 && id < lim ? vocab_piece(m->src_vocab, id) : NULL;
            if (!p || (unsigned char)p[0] != b || !*p) continue;
            int dup = 0;
            for (int j = 0; j < m->n_added; j++) dup |= m->added_id[j] == id;
            if (!dup) m->added_id[m->n_added++] = id;
        }
    /* added_start[b]: the first token starting with a byte >= b */
    for (int b = 256, k = m->n_added; b >= 0; b--) {
        while (k > 0 && b < 256 && (unsigned char)vocab_piece(m->src_vocab, m->added_id[k - 1])[0] >= b) k--;
        m->added_start[b] = b == 256 ? m->n_added : k;
    }
    return 0;
}

/* Is piece p (n bytes) T5's <extra_id_N>? */
static int is_extra_id(const char *p, size_t n) {
    if (n < 12 || memcmp(p, "<extra_id_", 10) || p[n - 1] != '>') return 0;
    for (size_t k = 10; k < n - 1; k++)
        if (p[k] < '0' || p[k] > '9') return 0;
    return 1;
}

int s2s_is_sentinel(const s2s_model *m, int id) {
    if (!m->c.family->sentinels || id < 0 || id >= m->c.vocab_size) return 0;
    const char *p = vocab_piece(m->src_vocab, id);
    return p && is_extra_id(p, strlen(p));
}

/* T5Tokenizer's added tokens: <pad> </s> <unk> and every <extra_id_N> piece of the source
 * vocabulary, ordered by first byte (m->added_id, m->added_start). */
static int build_sentinels(s2s_model *m, char *err, size_t errlen) {
    const s2s_config *c = &m->c;
    int n = 3;
    for (int id = 0; id < c->vocab_size; id++) n += s2s_is_sentinel(m, id);
    m->added_id = malloc(sizeof(int) * (size_t)n);
    if (!m->added_id) {
        s2s_fail(err, errlen, "out of memory");
        return -1;
    }
    const int fixed[3] = {c->pad_id, c->eos_id, c->unk_id};
    for (int k = 0; k < 3; k++) {
        const char *p = vocab_piece(m->src_vocab, fixed[k]);
        if (!p || !*p) continue; /* a special token without a piece is never typed */
        int dup = 0;
        for (int j = 0; j < m->n_added; j++) dup |= m->added_id[j] == fixed[k];
        if (!dup) m->added_id[m->n_added++] = fixed[k];
    }
    for (int id = 0; id < c->vocab_size; id++)
        if (s2s_is_sentinel(m, id)) m->added_id[m->n_added++] = id;
    /* every piece here starts with '<': one bucket, searched whole */
    for (int b = 0; b <= 256; b++) m->added_start[b] = b <= '<' ? 0 : m->n_added;
    for (int k = 0; k < m->n_added; k++)
        if (vocab_piece(m->src_vocab, m->added_id[k])[0] != '<') {
            s2s_fail(err, errlen, "key tokenizer.source_pieces: special token %d does not start with '<'",
                     m->added_id[k]);
            return -1;
        }
    return 0;
}

/* NUL-terminated copies of a string array key's entries (NULL with err). */
static char **copy_strings(const gguf_kv *kv, char *err, size_t errlen) {
    char **s = calloc(kv->count + 1, sizeof *s);
    for (uint64_t i = 0; s && i < kv->count; i++)
        if (!(s[i] = strndup(kv->strings[i].ptr, kv->strings[i].len))) {
            for (uint64_t k = 0; k < i; k++) free(s[k]);
            free(s);
            s = NULL;
        }
    if (!s) s2s_fail(err, errlen, "out of memory");
    return s;
}

static void free_strings(char **s, uint64_t n) {
    for (uint64_t i = 0; s && i < n; i++) free(s[i]);
    free(s);
}

/* The flags bpe_new takes: key's ids marked kind. */
static int mark_ids(const gguf_file *f, const char *key, unsigned char kind, unsigned char *flags, int n, char *err,
                    size_t errlen) {
    const gguf_kv *kv = gguf_get_array(f, key, GGUF_U32, err, errlen);
    if (!kv) return -1;
    for (uint64_t i = 0; i < kv->count; i++) {
        uint32_t id;
        memcpy(&id, kv->data + 4 * i, 4);
        if (id >= (uint32_t)n) {
            s2s_fail(err, errlen, "key %s: id %u outside the vocabulary", key, id);
            return -1;
        }
        flags[id] = kind;
    }
    return 0;
}

/* The byte-level BPE tokenizer of tokenizer.bpe_tokens / _merges / _special_ids / _added_ids. */
static int load_bpe(s2s_model *m, char *err, size_t errlen) {
    const gguf_kv *toks = gguf_get_array(m->file, "tokenizer.bpe_tokens", GGUF_STRING, err, errlen);
    const gguf_kv *merges = toks ? gguf_get_array(m->file, "tokenizer.bpe_merges", GGUF_STRING, err, errlen) : NULL;
    if (!merges) return -1;
    const int n = m->c.decoder_vocab_size;
    char **t = copy_strings(toks, err, errlen), **mg = t ? copy_strings(merges, err, errlen) : NULL;
    unsigned char *flags = calloc((size_t)n + 1, 1);
    int rc = -1;
    if (!flags) s2s_fail(err, errlen, "out of memory");
    if (t && mg && flags && toks->count == (uint64_t)n && merges->count < (1u << 24) &&
        !mark_ids(m->file, "tokenizer.bpe_special_ids", BPE_SPECIAL, flags, n, err, errlen) &&
        !mark_ids(m->file, "tokenizer.bpe_added_ids", BPE_ADDED, flags, n, err, errlen)) {
        char inner[200];
        m->bpe = bpe_new((const char *const *)t, n, (const char *const *)mg, (int)merges->count, flags, inner,
                         sizeof inner);
        if (m->bpe) rc = 0;
        else s2s_fail(err, errlen, "key tokenizer.bpe_tokens: %s", inner);
    }
    free_strings(t, toks->count);
    free_strings(mg, merges->count);
    free(flags);
    return rc;
}

/* A speech model's tokenizer: the byte-level BPE tokens (one vocabulary read twice, for
 * both sides; their strings name the ids in pieces and attention labels), the BPE model
 * itself and the language tokens; no SentencePiece model. */
static int load_speech_tokenizer(s2s_model *m, char *err, size_t errlen) {
    m->src_vocab = load_vocab(m->file, "tokenizer.bpe_tokens", m->c.vocab_size, err, errlen);
    if (!m->src_vocab) return -1;
    m->tgt_vocab = load_vocab(m->file, "tokenizer.bpe_tokens", m->c.decoder_vocab_size, err, errlen);
    if (!m->tgt_vocab || load_bpe(m, err, errlen)) return -1;
    return load_languages(m, err, errlen);
}

int s2s_tokenizer_load(s2s_model *m, char *err, size_t errlen) {
    if (m->c.family->audio) return load_speech_tokenizer(m, err, errlen);
    m->src_vocab = load_vocab(m->file, "tokenizer.source_pieces", m->c.vocab_size, err, errlen);
    if (!m->src_vocab) return -1;
    m->tgt_vocab = load_vocab(m->file, "tokenizer.target_pieces", m->c.decoder_vocab_size, err, errlen);
    if (!m->tgt_vocab) return -1;
    m->src_spm = load_spm(m->file, "tokenizer.source_spm", err, errlen);
    if (!m->src_spm) return -1;
    m->tgt_spm = load_spm(m->file, "tokenizer.target_spm", err, errlen);
    if (!m->tgt_spm) return -1;
    if (m->c.family->languages && load_languages(m, err, errlen)) return -1;
    if (read_class(m, err, errlen)) return -1;
    if (m->c.family->sentinels) return build_sentinels(m, err, errlen);
    if (!m->c.family->languages) return 0;
    if (m->nllb) { /* NLLB's <mask> is a piece of its vocabulary, not a key (mBART's is) */
        m->c.mask_id = vocab_id(m->src_vocab, "<mask>", 6);
        if (m->c.mask_id >= m->c.decoder_vocab_size) m->c.mask_id = -1;
    }
    return build_added(m, err, errlen);
}

/* ---------------------------------------------------------------------------------------
 * Language codes */

int s2s_language_id(const s2s_model *m, const char *code, size_t len) {
    for (int i = 0; i < m->n_langs; i++)
        if (strlen(m->lang_code[i]) == len && !memcmp(m->lang_code[i], code, len)) return m->lang_id[i];
    return -1;
}

char *s2s_language_list(const s2s_model *m) {
    size_t n = 1;
    for (int i = 0; i < m->n_langs; i++) n += strlen(m->lang_code[i]) + 2;
    char *out = m->n_langs ? malloc(n) : NULL;
    if (!out) return NULL;
    out[0] = 0;
    for (int i = 0; i < m->n_langs; i++) {
        if (i) strcat(out, ", ");
        strcat(out, m->lang_code[i]);
    }
    return out;
}
