/* Per-thread scratch buffers that only grow, and large blocks kept for reuse (at_block_alloc),
 * freed when their thread exits.
 *
 * Kernels need working memory per call (a quantized copy of the inputs, widened f16 rows,
 * transposed weight panels). Allocating it on every call costs more than small kernels
 * take, so each thread keeps its buffers: pool workers live as long as their caller thread,
 * and a program that starts and ends many threads (a server, a Python thread pool) must not
 * leak them, hence the key whose destructor frees a thread's buffers. */
#include <pthread.h>
#include <stdlib.h>

#include "kernels.h"

/* Blocks from at_alloc_weights a thread gave back (at_block_free), for its next requests. */
#define KEPT_BLOCKS 8 /* a batch's encoder workspace, inputs, cross and self caches, logits */
#define OUT_BLOCKS 16
typedef struct {
    void *buf[AT_SCRATCH_SLOTS];
    size_t cap[AT_SCRATCH_SLOTS];
    void *kept[KEPT_BLOCKS];
    size_t kept_bytes[KEPT_BLOCKS];
    unsigned long kept_at[KEPT_BLOCKS]; /* `requests` when it was given back */
    unsigned long requests;             /* at_block_alloc calls so far */
    /* blocks handed out and their real sizes: a kept block given for a smaller request is
     * still as large when it comes back */
    void *out[OUT_BLOCKS];
    size_t out_bytes[OUT_BLOCKS];
} scratch_set;

/* A kept block no request took for this many requests is freed: a batch makes about five
 * (encoder workspace, its output, cross and self caches, logits), so a block survives about
 * three batches of other shapes. */
#define KEPT_STALE 16

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_key_ok;
static _Thread_local scratch_set *mine;

static void free_set(void *p) {
    scratch_set *s = p;
    for (int i = 0; i < AT_SCRATCH_SLOTS; i++) free(s->buf[i]);
    for (int i = 0; i < KEPT_BLOCKS; i++) free(s->kept[i]);
    free(s);
}

static void make_key(void) { scratch_key_ok = pthread_key_create(&scratch_key, free_set) == 0; }

/* The calling thread's set, made on first use; NULL if out of memory. */
static scratch_set *thread_set(void) {
    if (!mine) {
        pthread_once(&scratch_once, make_key);
        scratch_set *s = calloc(1, sizeof *s);
        if (!s) return NULL;
        /* without a key the set lives as long as the process (as before there were keys) */
        if (scratch_key_ok && pthread_setspecific(scratch_key, s) != 0) {
            free(s);
            return NULL;
        }
        mine = s;
    }
    return mine;
}

static void drop_kept(scratch_set *s, int i) {
    free(s->kept[i]);
    s->kept[i] = NULL;
}

/* Note p (of `bytes`) as handed out; without room it comes back at its requested size. */
static void *hand_out(scratch_set *s, void *p, size_t bytes) {
    for (int i = 0; p && i < OUT_BLOCKS; i++)
        if (!s->out[i]) {
            s->out[i] = p;
            s->out_bytes[i] = bytes;
            break;
        }
    return p;
}

/* A new block's size: above 2 MiB, the next of 3, 4, 6, 8, 12, 16, ... MiB (steps of 1.5 and
 * 1.33). The batches of a sorted input grow a little each time, and an exact-size block kept
 * from the last batch fit none of the next one's requests: each batch then faulted in and
 * zeroed its caches afresh (13% of a beam-4 batch-32 run). The rest of a block is address
 * space only, until touched. */
static size_t ladder_bytes(size_t bytes) {
    size_t s = (size_t)2 << 20;
    if (bytes <= s) return bytes;
    while (s < bytes) s = (s & (s - 1)) == 0 ? s / 2 * 3 : s / 3 * 4;
    return s;
}

void *at_block_alloc(size_t bytes) {
    scratch_set *s = thread_set();
    if (!s) return at_alloc_weights(bytes);
    s->requests++;
    /* the smallest kept block of bytes .. 4 x bytes: a batch asks for several blocks of
     * different sizes, and each should find its own from the last batch. Batches sorted by
     * length come in runs of growing size, and the next run starts small again: with 2 x
     * bytes its first batch missed the last one's caches (beam 4, batch 32, 1,000 lines:
     * 2.6 GB faulted in and zeroed, 0.54 GB with 4 x and ladder_bytes, and a lower peak) */
    int best = -1;
    for (int i = 0; i < KEPT_BLOCKS; i++) {
        if (!s->kept[i]) continue;
        if (s->requests - s->kept_at[i] > KEPT_STALE) {
            drop_kept(s, i);
            continue;
        }
        if (s->kept_bytes[i] >= bytes && s->kept_bytes[i] / 4 <= bytes &&
            (best < 0 || s->kept_bytes[i] < s->kept_bytes[best]))
            best = i;
    }
    if (best >= 0) {
        void *p = s->kept[best];
        s->kept[best] = NULL;
        return hand_out(s, p, s->kept_bytes[best]);
    }
    /* kept blocks smaller than this request can never serve it: freed before the new block
     * is allocated, so kept memory does not add to the largest request's */
    for (int i = 0; i < KEPT_BLOCKS; i++)
        if (s->kept[i] && s->kept_bytes[i] < bytes) drop_kept(s, i);
    const size_t size = ladder_bytes(bytes);
    return hand_out(s, at_alloc_weights(size), size);
}

void at_block_free(void *p, size_t bytes) {
    scratch_set *s = p ? thread_set() : NULL;
    for (int i = 0; s && i < OUT_BLOCKS; i++) /* its real size, if it was noted */
        if (s->out[i] == p) {
            bytes = s->out_bytes[i];
            s->out[i] = NULL;
            break;
        }
    for (int i = 0; s && i < KEPT_BLOCKS; i++)
        if (!s->kept[i]) {
            s->kept[i] = p;
            s->kept_bytes[i] = bytes;
            s->kept_at[i] = s->requests;
            return;
        }
    free(p);
}

void *at_scratch(int slot, size_t bytes) {
    if (!thread_set()) return NULL;
    if (bytes > mine->cap[slot]) {
        const size_t rounded = (bytes + 63) & ~(size_t)63;
        void *p = aligned_alloc(64, rounded);
        if (!p) return NULL;
        free(mine->buf[slot]);
        mine->buf[slot] = p;
        mine->cap[slot] = rounded;
    }
    return mine->buf[slot];
}
