/* The byte-level BPE model: built from tokens, merges and added-token flags (bpe_new), read
 * by bpe_encode.c and bpe_decode.c. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe_internal.h"

/* GPT-2's bytes-to-unicode: the printable bytes ! .. ~, ¡ .. ¬ and ® .. ÿ stand for
 * themselves; the other 68 bytes, in order, for U+0100, U+0101, ... */
static int printable_byte(int b) {
    return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
}

uint32_t bpe_byte_char(int b) {
    if (printable_byte(b)) return (uint32_t)b;
    uint32_t n = 0;
    for (int c = 0; c < b; c++) n += !printable_byte(c);
    return 0x100 + n;
}

static void set_err(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static int valid_utf8(const char *s) {
    size_t n = strlen(s), k;
    uint32_t cp;
    for (size_t i = 0; i < n; i += k)
        if (bpe_utf8_next((const unsigned char *)s + i, n - i, &cp, &k) < 0) return 0;
    return 1;
}

void bpe_free(bpe_model *m) {
    if (!m) return;
    free(m->token_sym);
    free(m->kind);
    free(m->bytes_off);
    free(m->bytes_len);
    free(m->bytes);
    bpe_strings_free(&m->syms);
    free(m->sym_token);
    bpe_map64_free(&m->pair);
    free(m->merge_sym);
    bpe_map64_free(&m->trie);
    free(m->trie_id);
    free(m);
}

/* Every table sized for its most entries; returns 0 or -1 (out of memory). */
static int alloc_tables(bpe_model *m, int n_tokens, int n_merges, size_t trie_nodes) {
    int n_syms = n_tokens + 256 + 3 * n_merges;
    m->n_tokens = n_tokens;
    m->token_sym = malloc((size_t)n_tokens * sizeof *m->token_sym);
    m->kind = calloc((size_t)n_tokens, 1);
    m->bytes_off = calloc((size_t)n_tokens, sizeof *m->bytes_off);
    m->bytes_len = calloc((size_t)n_tokens, sizeof *m->bytes_len);
    m->sym_token = malloc((size_t)n_syms * sizeof *m->sym_token);
    m->merge_sym = malloc(((size_t)n_merges + 1) * sizeof *m->merge_sym);
    m->trie_id = malloc(trie_nodes * sizeof *m->trie_id);
    if (!m->token_sym || !m->kind || !m->bytes_off || !m->bytes_len || !m->sym_token || !m->merge_sym ||
        !m->trie_id)
        return -1;
    if (bpe_strings_init(&m->syms, n_syms) || bpe_map64_init(&m->pair, (size_t)n_merges) ||
        bpe_map64_init(&m->trie, trie_nodes))
        return -1;
    memset(m->sym_token, 0xff, (size_t)n_syms * sizeof *m->sym_token);
    memset(m->trie_id, 0xff, trie_nodes * sizeof *m->trie_id);
    m->n_nodes = 1;
    return 0;
}

/* The tokens' symbols and kinds; a string given twice is refused. Returns 0, -1 OOM, -2 bad. */
static int add_tokens(bpe_model *m, const char *const *tokens, const unsigned char *special, char *err,
                      size_t errlen) {
    for (int i = 0; i < m->n_tokens; i++) {
        m->token_sym[i] = -1;
        if (!tokens[i] || !tokens[i][0]) continue;
        int s = special ? special[i] : 0;
        m->kind[i] = s == 0 ? BPE_NORMAL : s == BPE_ADDED ? BPE_ADDED : BPE_SPECIAL;
        if (m->kind[i] != BPE_NORMAL && !valid_utf8(tokens[i])) {
            set_err(err, errlen, "bpe: added token %d is not valid UTF-8", i);
            return -2;
        }
        int sym = bpe_strings_add(&m->syms, tokens[i], strlen(tokens[i]));
        if (sym < 0) return -1;
        if (m->sym_token[sym] >= 0) {
            set_err(err, errlen, "bpe: tokens %d and %d are the same string", m->sym_token[sym], i);
            return -2;
        }
        m->sym_token[sym] = i;
        m->token_sym[i] = sym;
    }
    return 0;
}

/* merges[r] = "left right" -> pair (left, right) of rank r making left+right. */
static int add_merges(bpe_model *m, const char *const *merges, int n_merges, char *err, size_t errlen) {
    char buf[256], *joined = buf;
    size_t cap = sizeof buf;
    int rc = 0;
    for (int r = 0; r < n_merges && rc == 0; r++) {
        const char *line = merges[r] ? merges[r] : "";
        const char *sp = strchr(line, ' ');
        size_t n = strlen(line);
        if (!sp || sp == line || !sp[1] || strchr(sp + 1, ' ')) {
            set_err(err, errlen, "bpe: merge %d is not two parts joined by one space: \"%.40s\"", r, line);
            rc = -2;
            break;
        }
        if (n > cap) {
            cap = n;
            char *b = realloc(joined == buf ? NULL : joined, cap);
            if (!b) { rc = -1; break; }
            joined = b;
        }
        size_t nl = (size_t)(sp - line);
        memcpy(joined, line, nl);
        memcpy(joined + nl, sp + 1, n - nl - 1);
        int left = bpe_strings_add(&m->syms, line, nl);
        int right = bpe_strings_add(&m->syms, sp + 1, n - nl - 1);
        int both = bpe_strings_add(&m->syms, joined, n - 1);
        if (left < 0 || right < 0 || both < 0) { rc = -1; break; }
        m->merge_sym[r] = both;
        bpe_map64_put(&m->pair, (uint64_t)left << 32 | (uint32_t)right, r); /* a later line wins */
    }
    if (joined != buf) free(joined);
    return rc;
}

/* Each token's bytes: an added token's text as it is; another token's characters mapped back
 * through bytes-to-unicode (a character outside the alphabet, which HF cannot decode, keeps
 * its own UTF-8). */
static int token_bytes(bpe_model *m) {
    int char_byte[0x144];
    memset(char_byte, 0xff, sizeof char_byte);
    for (int b = 0; b < 256; b++) char_byte[bpe_byte_char(b)] = b;
    size_t total = 0;
    for (int i = 0; i < m->n_tokens; i++)
        if (m->token_sym[i] >= 0) total += m->syms.len[m->token_sym[i]];
    if (total > UINT32_MAX || !(m->bytes = malloc(total + 1))) return -1;
    size_t at = 0;
    for (int i = 0; i < m->n_tokens; i++) {
        m->bytes_off[i] = (uint32_t)at;
        if (m->token_sym[i] < 0) continue;
        const unsigned char *s = (const unsigned char *)m->syms.arena + m->syms.off[m->token_sym[i]];
        size_t n = m->syms.len[m->token_sym[i]], k;
        for (size_t j = 0; j < n; j += k) {
            uint32_t cp;
            int bad = bpe_utf8_next(s + j, n - j, &cp, &k) < 0;
            if (m->kind[i] == BPE_NORMAL && !bad && cp < 0x144 && char_byte[cp] >= 0)
                m->bytes[at++] = (unsigned char)char_byte[cp];
            else
                for (size_t q = 0; q < k; q++) m->bytes[at++] = s[j + q];
        }
        m->bytes_len[i] = (uint32_t)(at - m->bytes_off[i]);
    }
    return 0;
}

/* The added tokens' byte trie: node 0 the root, each added token's last node its id. */
static void build_trie(bpe_model *m) {
    for (int i = 0; i < m->n_tokens; i++) {
        if (m->kind[i] == BPE_NORMAL || m->token_sym[i] < 0) continue;
        const unsigned char *s = (const unsigned char *)m->syms.arena + m->syms.off[m->token_sym[i]];
        int node = 0;
        for (; *s; s++) {
            uint64_t key = (uint64_t)node << 8 | *s;
            int child = bpe_map64_get(&m->trie, key);
            if (child < 0) {
                child = m->n_nodes++;
                bpe_map64_put(&m->trie, key, child);
            }
            node = child;
        }
        m->trie_id[node] = i;
    }
}

bpe_model *bpe_new(const char *const *tokens, int n_tokens, const char *const *merges, int n_merges,
                   const unsigned char *special, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (n_tokens < 1 || !tokens || n_merges < 0 || (n_merges > 0 && !merges) ||
        n_tokens > (INT32_MAX - 256) / 4 || n_merges > (INT32_MAX - 256) / 4 - n_tokens) {
        set_err(err, errlen, "bpe: need 1 or more tokens and 0 or more merges (%d tokens, %d merges)", n_tokens,
                n_merges);
        return NULL;
    }
    size_t trie_nodes = 1;
    for (int i = 0; i < n_tokens; i++)
        if (special && special[i] && tokens[i]) trie_nodes += strlen(tokens[i]);
    bpe_model *m = calloc(1, sizeof *m);
    int rc = !m ? -1 : alloc_tables(m, n_tokens, n_merges, trie_nodes);
    for (int b = 0; b < 256 && rc == 0; b++) { /* the alphabet's symbols come first */
        unsigned char c[4];
        size_t n = bpe_utf8_put(bpe_byte_char(b), c);
        if ((m->byte_sym[b] = bpe_strings_add(&m->syms, (const char *)c, n)) < 0) rc = -1;
    }
    if (rc == 0) rc = add_tokens(m, tokens, special, err, errlen);
    if (rc == 0) rc = add_merges(m, merges, n_merges, err, errlen);
    if (rc == 0) rc = token_bytes(m);
    if (rc == -1) set_err(err, errlen, "bpe: out of memory (%d tokens, %d merges)", n_tokens, n_merges);
    if (rc) {
        bpe_free(m);
        return NULL;
    }
    build_trie(m);
    m->unk = bpe_token_id(m, "<|endoftext|>");
    return m;
}

int bpe_set_unk(bpe_model *m, int id) {
    if (id < -1 || id >= m->n_tokens) return -1;
    m->unk = id;
    return 0;
}

int bpe_token_id(const bpe_model *m, const char *token) {
    if (!token || !token[0]) return -1;
    int sym = bpe_strings_find(&m->syms, token, strlen(token));
    return sym < 0 ? -1 : m->sym_token[sym];
}

const char *bpe_token(const bpe_model *m, int id) {
    if (id < 0 || id >= m->n_tokens || m->token_sym[id] < 0) return NULL;
    return m->syms.arena + m->syms.off[m->token_sym[id]];
}

int bpe_token_kind(const bpe_model *m, int id) {
    return bpe_token(m, id) ? m->kind[id] : -1;
}

int bpe_size(const bpe_model *m) { return m->n_tokens; }
