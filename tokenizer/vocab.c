/* Open-addressing hash map from piece bytes to id. */
#include "vocab.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct vocab {
    char **piece;
    uint32_t *len;
    int n;
    int32_t *slot; /* id + 1, 0 = empty */
    uint64_t mask;
};

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

vocab *vocab_new(const char *const *pieces, const uint64_t *lens, int n, char *err, size_t errlen) {
    vocab *v = calloc(1, sizeof *v);
    uint64_t slots = 16;
    while (slots < 2ull * (uint64_t)n) slots *= 2;
    if (v) {
        v->piece = calloc((size_t)n + 1, sizeof(char *));
        v->len = calloc((size_t)n + 1, sizeof(uint32_t));
        v->slot = calloc(slots, sizeof(int32_t));
    }
    if (!v || !v->piece || !v->len || !v->slot) goto oom;
    v->n = n;
    v->mask = slots - 1;
    for (int i = 0; i < n; i++) {
        v->piece[i] = malloc(lens[i] + 1);
        if (!v->piece[i]) goto oom;
        memcpy(v->piece[i], pieces[i], lens[i]);
        v->piece[i][lens[i]] = 0;
        v->len[i] = (uint32_t)lens[i];
        if (lens[i] == 0) continue;
        uint64_t h = hash_bytes(pieces[i], lens[i]) & v->mask;
        for (;; h = (h + 1) & v->mask) {
            int32_t s = v->slot[h];
            if (s == 0) {
                v->slot[h] = i + 1;
                break;
            }
            /* a repeated piece keeps its first id, as a dict built in id order would not:
             * vocab.json cannot hold duplicates, so this only happens in hostile files */
            if (v->len[s - 1] == lens[i] && memcmp(v->piece[s - 1], pieces[i], lens[i]) == 0) break;
        }
    }
    return v;
oom:
    snprintf(err, errlen, "out of memory for a vocabulary of %d pieces", n);
    vocab_free(v);
    return NULL;
}

void vocab_free(vocab *v) {
    if (!v) return;
    if (v->piece)
        for (int i = 0; i < v->n; i++) free(v->piece[i]);
    free(v->piece);
    free(v->len);
    free(v->slot);
    free(v);
}

int vocab_size(const vocab *v) { return v->n; }

int vocab_id(const vocab *v, const char *piece, size_t len) {
    if (len == 0) return -1;
    for (uint64_t h = hash_bytes(piece, len) & v->mask;; h = (h + 1) & v->mask) {
        int32_t s = v->slot[h];
        if (s == 0) return -1;
        if (v->len[s - 1] == len && memcmp(v->piece[s - 1], piece, len) == 0) return s - 1;
    }
}

const char *vocab_piece(const vocab *v, int id) {
    return id >= 0 && id < v->n ? v->piece[id] : NULL;
}
