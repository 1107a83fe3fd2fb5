/* The byte-level BPE tokenizer's two hash tables: uint64 -> int (merge pairs, the added
 * tokens' trie) and interned byte strings (symbols). Open addressing, linear probing, sized
 * once for the most entries they will hold (at most half full). */
#include <stdlib.h>
#include <string.h>

#include "bpe_internal.h"

static size_t capacity_for(size_t n_max) {
    size_t cap = 16;
    while (cap < 2 * n_max + 2) cap <<= 1;
    return cap;
}

/* splitmix64's finalizer: every key bit reaches the slot index */
static size_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return (size_t)x;
}

static size_t hash_bytes(const char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 0x100000001b3ULL;
    return mix64(h);
}

/* ---- uint64 -> int ------------------------------------------------------------------ */

int bpe_map64_init(bpe_map64 *t, size_t n_max) {
    size_t cap = capacity_for(n_max);
    t->key = malloc(cap * sizeof *t->key);
    t->val = malloc(cap * sizeof *t->val);
    t->mask = cap - 1;
    if (!t->key || !t->val) {
        bpe_map64_free(t);
        return -1;
    }
    memset(t->val, 0xff, cap * sizeof *t->val); /* every value -1: empty */
    return 0;
}

void bpe_map64_free(bpe_map64 *t) {
    free(t->key);
    free(t->val);
    t->key = NULL;
    t->val = NULL;
}

int bpe_map64_get(const bpe_map64 *t, uint64_t key) {
    for (size_t i = mix64(key) & t->mask;; i = (i + 1) & t->mask) {
        if (t->val[i] < 0) return -1;
        if (t->key[i] == key) return t->val[i];
    }
}

void bpe_map64_put(bpe_map64 *t, uint64_t key, int val) {
    size_t i = mix64(key) & t->mask;
    while (t->val[i] >= 0 && t->key[i] != key) i = (i + 1) & t->mask;
    t->key[i] = key;
    t->val[i] = val;
}

/* ---- interned strings --------------------------------------------------------------- */

int bpe_strings_init(bpe_strings *s, int n_max) {
    memset(s, 0, sizeof *s);
    size_t cap = capacity_for((size_t)n_max);
    s->cap = n_max;
    s->off = malloc((size_t)n_max * sizeof *s->off + 1);
    s->len = malloc((size_t)n_max * sizeof *s->len + 1);
    s->slot = malloc(cap * sizeof *s->slot);
    s->mask = cap - 1;
    if (!s->off || !s->len || !s->slot) {
        bpe_strings_free(s);
        return -1;
    }
    memset(s->slot, 0xff, cap * sizeof *s->slot);
    return 0;
}

void bpe_strings_free(bpe_strings *s) {
    free(s->arena);
    free(s->off);
    free(s->len);
    free(s->slot);
    memset(s, 0, sizeof *s);
}

/* the slot holding p[0..n), or the empty slot where it would go */
static size_t find_slot(const bpe_strings *s, const char *p, size_t n) {
    size_t i = hash_bytes(p, n) & s->mask;
    for (;; i = (i + 1) & s->mask) {
        int k = s->slot[i];
        if (k < 0) return i;
        if (s->len[k] == n && memcmp(s->arena + s->off[k], p, n) == 0) return i;
    }
}

int bpe_strings_find(const bpe_strings *s, const char *p, size_t n) {
    return s->slot[find_slot(s, p, n)];
}

int bpe_strings_add(bpe_strings *s, const char *p, size_t n) {
    size_t i = find_slot(s, p, n);
    if (s->slot[i] >= 0) return s->slot[i];
    if (s->n >= s->cap || n > UINT32_MAX) return -1; /* sized by the caller: never here */
    if (s->arena_len + n + 1 > s->arena_cap) {
        size_t cap = s->arena_cap ? 2 * s->arena_cap : 4096;
        while (cap < s->arena_len + n + 1) cap *= 2;
        char *a = realloc(s->arena, cap);
        if (!a) return -1;
        s->arena = a;
        s->arena_cap = cap;
    }
    memcpy(s->arena + s->arena_len, p, n);
    s->arena[s->arena_len + n] = 0;
    s->off[s->n] = s->arena_len;
    s->len[s->n] = (uint32_t)n;
    s->arena_len += n + 1;
    s->slot[i] = s->n;
    return s->n++;
}
