/* Byte-level BPE encoding: added tokens found whole, the rest cut by GPT-2's pre-tokenizer
 * (bpe_pretok.c), each piece's bytes merged by rank as HF's bpe() merges them. */
#include <stdlib.h>
#include <string.h>

#include "bpe_internal.h"

/* a growing array of ids */
typedef struct {
    int *v;
    size_t n, cap;
} id_list;

static int push_id(id_list *l, int id) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        if (cap > INT32_MAX) return -1;
        int *v = realloc(l->v, cap * sizeof *v);
        if (!v) return -1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = id;
    return 0;
}

int bpe_added_at(const bpe_model *m, const unsigned char *text, size_t len, size_t pos, size_t *n) {
    int node = 0, id = -1;
    for (size_t i = pos; i < len; i++) {
        node = bpe_map64_get(&m->trie, (uint64_t)node << 8 | text[i]);
        if (node < 0) break;
        if (m->trie_id[node] >= 0) id = m->trie_id[node], *n = i + 1 - pos;
    }
    return id;
}

/* ---- merging one piece -------------------------------------------------------------- */

/* The piece's symbols as a linked list over its byte positions (a merged symbol lives at
 * its first byte's place), and a min-heap of (rank << 32 | position) candidate pairs. */
typedef struct {
    int *sym, *next, *prev;
    uint64_t *heap, *batch;
    size_t n_heap;
} merge_state;

static void heap_push(merge_state *s, uint64_t v) {
    size_t i = s->n_heap++;
    while (i > 0 && s->heap[(i - 1) / 2] > v) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = v;
}

static uint64_t heap_pop(merge_state *s) {
    uint64_t top = s->heap[0], v = s->heap[--s->n_heap];
    size_t i = 0, n = s->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && s->heap[c + 1] < s->heap[c]) c++;
        if (s->heap[c] >= v) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (n) s->heap[i] = v;
    return top;
}

/* the rank of the pair that starts at position p, or -1 */
static int pair_rank(const bpe_model *m, const merge_state *s, int p) {
    int q = s->next[p];
    if (q < 0) return -1;
    return bpe_map64_get(&m->pair, (uint64_t)s->sym[p] << 32 | (uint32_t)s->sym[q]);
}

static void push_pair(const bpe_model *m, merge_state *s, int p) {
    int r = p < 0 ? -1 : pair_rank(m, s, p);
    if (r >= 0) heap_push(s, (uint64_t)r << 32 | (uint32_t)p);
}

/* HF's loop: take the lowest rank any adjacent pair has, merge every occurrence of that pair
 * left to right (an occurrence whose left symbol was just merged away is skipped), repeat.
 * A pair made during a pass never has the pass's rank, so a pass is one batch of the heap. */
static void merge_piece(const bpe_model *m, merge_state *s, int n) {
    for (int i = 0; i < n; i++) push_pair(m, s, i);
    while (s->n_heap) {
        uint64_t first = heap_pop(s);
        uint32_t rank = (uint32_t)(first >> 32);
        size_t nb = 0;
        s->batch[nb++] = first;
        while (s->n_heap && (uint32_t)(s->heap[0] >> 32) == rank) s->batch[nb++] = heap_pop(s);
        for (size_t b = 0; b < nb; b++) {
            int p = (int)(uint32_t)s->batch[b];
            if (s->sym[p] < 0 || pair_rank(m, s, p) != (int)rank) continue; /* stale */
            int q = s->next[p];
            s->sym[p] = m->merge_sym[rank];
            s->sym[q] = -1;
            s->next[p] = s->next[q];
            if (s->next[q] >= 0) s->prev[s->next[q]] = p;
            push_pair(m, s, s->prev[p]);
            push_pair(m, s, p);
        }
    }
}

/* The ids of one piece's merged symbols onto out; 0, -1 OOM, -2 a symbol without an id. */
static int encode_piece(const bpe_model *m, merge_state *s, const unsigned char *piece, int n, id_list *out) {
    for (int i = 0; i < n; i++) {
        s->sym[i] = m->byte_sym[piece[i]];
        s->next[i] = i + 1 < n ? i + 1 : -1;
        s->prev[i] = i - 1;
    }
    s->n_heap = 0;
    merge_piece(m, s, n);
    for (int p = 0; p >= 0; p = s->next[p]) {
        int id = m->sym_token[s->sym[p]];
        if (id < 0) id = m->unk;
        if (id < 0) return -2;
        if (push_id(out, id)) return -1;
    }
    return 0;
}

/* room in s for a piece of n bytes; 0 or -1 (OOM) */
static int reserve(merge_state *s, size_t *cap, size_t n) {
    if (n <= *cap) return 0;
    size_t c = n < 64 ? 64 : n;
    int *sym = realloc(s->sym, c * sizeof *sym);
    if (sym) s->sym = sym;
    int *next = realloc(s->next, c * sizeof *next);
    if (next) s->next = next;
    int *prev = realloc(s->prev, c * sizeof *prev);
    if (prev) s->prev = prev;
    uint64_t *heap = realloc(s->heap, 3 * c * sizeof *heap); /* n - 1 pairs, 2 more per merge */
    if (heap) s->heap = heap;
    uint64_t *batch = realloc(s->batch, 3 * c * sizeof *batch);
    if (batch) s->batch = batch;
    if (!sym || !next || !prev || !heap || !batch) return -1;
    *cap = c;
    return 0;
}

/* Encode the text between added tokens, piece by piece; 0, -1, -2 as bpe_encode. */
static int encode_span(const bpe_model *m, merge_state *s, size_t *cap, const unsigned char *t, size_t from,
                       size_t to, id_list *out) {
    while (from < to) {
        size_t end = bpe_piece_end(t, to, from);
        if (reserve(s, cap, end - from)) return -1;
        int rc = encode_piece(m, s, t + from, (int)(end - from), out);
        if (rc) return rc;
        from = end;
    }
    return 0;
}

int bpe_encode(const bpe_model *m, const char *text, size_t len, int **ids, int *n_ids) {
    *ids = NULL;
    *n_ids = 0;
    if (len >= (size_t)1 << 31) return -1; /* positions and ids are ints */
    const unsigned char *t = (const unsigned char *)text;
    merge_state s = {0};
    size_t cap = 0, from = 0, n_added = 0;
    id_list out = {0};
    int rc = 0;
    for (size_t i = 0; i < len && rc == 0;) {
        int id = m->n_nodes > 1 ? bpe_added_at(m, t, len, i, &n_added) : -1;
        if (id < 0) {
            i++;
            continue;
        }
        rc = encode_span(m, &s, &cap, t, from, i, &out);
        if (rc == 0) rc = push_id(&out, id);
        i = from = i + n_added;
    }
    if (rc == 0) rc = encode_span(m, &s, &cap, t, from, len, &out);
    free(s.sym);
    free(s.next);
    free(s.prev);
    free(s.heap);
    free(s.batch);
    if (rc) {
        free(out.v);
        return rc;
    }
    *ids = out.v;
    *n_ids = (int)out.n;
    return 0;
}
