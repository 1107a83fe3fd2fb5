/* The engine's thread pool (engine/pool.h): every item runs exactly once, a worker index is
 * never in use twice at once, nested loops run serially on the calling thread, several
 * caller threads each get their own pool, and idle workers sleep instead of spinning.
 * Usage: test_pool */
#include <dirent.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../engine/kernels.h"
#include "../engine/pool.h"
#include "check.h"

#define MAX_ITEMS 20011
#define MAX_THREADS 8

/* ---------------------------------------------------------------------------------------
 * Each item once, worker indices in range and exclusive */

typedef struct {
    _Atomic int *count;                /* [n] times each item ran */
    _Atomic int busy[MAX_THREADS];     /* 1 while a chunk runs with that worker index */
    _Atomic int bad_worker, overlap;
    _Atomic int longest; /* the most items one chunk had */
    int threads;
} count_job;

static void count_items(const void *ctx, int lo, int hi, int worker) {
    count_job *j = (count_job *)ctx;
    if (worker < 0 || worker >= j->threads) {
        atomic_fetch_add(&j->bad_worker, 1);
        return;
    }
    if (atomic_exchange(&j->busy[worker], 1)) atomic_fetch_add(&j->overlap, 1);
    for (int i = lo; i < hi; i++) atomic_fetch_add(&j->count[i], 1);
    for (int l = atomic_load(&j->longest); hi - lo > l && !atomic_compare_exchange_weak(&j->longest, &l, hi - lo);) {}
    atomic_store(&j->busy[worker], 0);
}

/* at_parallel_for(n, threads) over fresh counters; 1 when every item ran exactly once. */
static int run_counted(int n, int threads, count_job *j) {
    memset(j, 0, sizeof *j);
    j->count = calloc((size_t)(n > 0 ? n : 1), sizeof *j->count);
    j->threads = threads;
    at_parallel_for(n, threads, count_items, j);
    int once = 1;
    for (int i = 0; i < n; i++) once &= j->count[i] == 1;
    free(j->count);
    return once;
}

static void test_each_item_once(void) {
    const int sizes[] = {0, 1, 2, 3, 7, 64, 1000, MAX_ITEMS};
    const int threads[] = {1, 2, 3, 4, MAX_THREADS};
    for (size_t a = 0; a < sizeof sizes / sizeof *sizes; a++)
        for (size_t b = 0; b < sizeof threads / sizeof *threads; b++)
            for (int round = 0; round < 20; round++) {
                count_job j;
                const int n = sizes[a], t = threads[b];
                const int once = run_counted(n, t, &j);
                CHECKF(once, "n %d, %d threads: an item ran not exactly once", n, t);
                CHECKF(!j.bad_worker, "n %d, %d threads: worker index out of range", n, t);
                CHECKF(!j.overlap, "n %d, %d threads: one worker index ran two chunks at once", n, t);
                /* guided: the first claim is a thread's share of the whole, and none is longer */
                const int first = t == 1 || n <= 1 ? n : n / t > 1 ? n / t : 1;
                CHECKF(j.longest == first, "n %d, %d threads: longest chunk %d items, expected %d", n, t,
                       (int)j.longest, first);
                if (!once || j.bad_worker || j.overlap) return;
            }
    CHECK(!at_in_parallel()); /* outside any loop again */
}

/* ---------------------------------------------------------------------------------------
 * Nested loops run serially, on the thread that calls them */

typedef struct {
    _Atomic int inner_calls, inner_not_serial, outer_not_parallel;
    _Atomic int inner_items;
} nest_job;

typedef struct {
    nest_job *nj;
    pthread_t caller;
} inner_job;

static void inner(const void *ctx, int lo, int hi, int worker) {
    const inner_job *ij = ctx;
    atomic_fetch_add(&ij->nj->inner_calls, 1);
    if (lo != 0 || worker != 0 || !pthread_equal(pthread_self(), ij->caller))
        atomic_fetch_add(&ij->nj->inner_not_serial, 1);
    atomic_fetch_add(&ij->nj->inner_items, hi - lo);
}

static void outer(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    nest_job *nj = (nest_job *)ctx;
    if (!at_in_parallel()) atomic_fetch_add(&nj->outer_not_parallel, 1);
    for (int i = lo; i < hi; i++) {
        const inner_job ij = {nj, pthread_self()};
        at_parallel_for(50, 4, inner, &ij); /* would deadlock or oversubscribe if it forked */
    }
}

static void test_nested_serial(void) {
    nest_job nj;
    memset(&nj, 0, sizeof nj);
    at_parallel_for(40, 3, outer, &nj);
    CHECKF(nj.inner_calls == 40, "%d inner calls, want one per outer item (40)", nj.inner_calls);
    CHECK(!nj.inner_not_serial);
    CHECK(nj.inner_items == 40 * 50);
    CHECK(!nj.outer_not_parallel);
}

/* ---------------------------------------------------------------------------------------
 * Several caller threads at once, each with its own thread count and pool */

#define CALLERS 4

typedef struct {
    int id, ok, threads_seen;
} caller_arg;

static void *caller_main(void *p) {
    caller_arg *a = p;
    a->ok = 1;
    a->threads_seen = at_threads();
    at_set_threads(1 + a->id % 3);
    for (int round = 0; round < 200 && a->ok; round++) {
        count_job j;
        const int n = 1 + (round * 37 + a->id * 11) % 3000;
        a->ok = run_counted(n, at_threads(), &j) && !j.bad_worker && !j.overlap;
    }
    a->ok &= at_threads() == 1 + a->id % 3; /* no other thread changed ours */
    return NULL;
}

static void test_concurrent_callers(void) {
    at_set_threads(2);
    pthread_t tid[CALLERS];
    caller_arg args[CALLERS];
    for (int i = 0; i < CALLERS; i++) {
        args[i] = (caller_arg){i, 0, 0};
        CHECK(pthread_create(&tid[i], NULL, caller_main, &args[i]) == 0);
    }
    for (int i = 0; i < CALLERS; i++) {
        pthread_join(tid[i], NULL); /* the thread's pool is joined as it exits */
        CHECKF(args[i].ok, "caller %d: items lost, repeated or overlapping", i);
        CHECKF(args[i].threads_seen == at_default_threads(), "caller %d started with %d threads, want the default %d",
               i, args[i].threads_seen, at_default_threads());
    }
    CHECK(at_threads() == 2); /* the callers' settings did not leak into this thread */
    at_set_threads(0);
    CHECK(at_threads() == at_default_threads());
}

/* ---------------------------------------------------------------------------------------
 * Idle workers sleep */

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sum_items(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    _Atomic long *sum = (_Atomic long *)ctx;
    long s = 0;
    for (int i = lo; i < hi; i++) s += i;
    atomic_fetch_add(sum, s);
}

static void test_idle_workers_sleep(void) {
    /* many short loops, as a decoder step makes them, then nothing for 200 ms: spinning
     * workers would burn up to 200 ms of CPU each in that time */
    _Atomic long sum = 0;
    for (int r = 0; r < 1000; r++) at_parallel_for(1000, MAX_THREADS, sum_items, &sum);
    CHECK(sum == 1000L * (999L * 1000 / 2));
    const double c0 = cpu_seconds();
    const struct timespec idle = {0, 200 * 1000 * 1000};
    nanosleep(&idle, NULL);
    const double burnt = cpu_seconds() - c0;
    CHECKF(burnt < 0.02, "%.1f ms of CPU burnt in 200 ms without work (%d workers): they spin", burnt * 1e3,
           MAX_THREADS - 1);
}

/* Threads of this process (/proc/self/task). */
static int task_count(void) {
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.';
    if (d) closedir(d);
    return n;
}

static void test_pool_shrinks(void) {
    /* one call with 48 threads, then calls with 2: the big pool does not stay (its 47 idle
     * workers would wake on every job of the small calls); the results stay right */
    _Atomic long sum = 0;
    const int before = task_count();
    at_parallel_for(4800, 48, sum_items, &sum);
    const int big = task_count();
    for (int r = 0; r < 10; r++) at_parallel_for(1000, 2, sum_items, &sum);
    const int after = task_count();
    CHECK(sum == 4800L * 4799 / 2 + 10 * (999L * 1000 / 2));
    CHECKF(big >= before + 40 && after <= before + 2, "threads: %d before, %d with 48, %d after", before, big, after);
}

/* ---------------------------------------------------------------------------------------
 * Scratch memory (engine/scratch.c) goes with its thread: threads that each take 4 MiB of
 * it (and keep two blocks) and end leave the heap as it was. */

static void *use_scratch(void *arg) {
    (void)arg;
    for (int slot = 0; slot < AT_SCRATCH_SLOTS; slot++) {
        char *p = at_scratch(slot, (size_t)4 << 20);
        if (p) memset(p, 1, (size_t)4 << 20);
    }
    for (int i = 0; i < 2; i++) { /* two kept blocks */
        char *p = at_block_alloc((size_t)(3 + i) << 20);
        if (p) memset(p, 1, (size_t)(3 + i) << 20);
        at_block_free(p, (size_t)(3 + i) << 20);
    }
    return NULL;
}

static size_t heap_in_use(void) {
    const struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

static void test_scratch_freed_at_thread_exit(void) {
    char *p = at_scratch(AT_SCRATCH_QUANT, 100);
    CHECK(p && ((uintptr_t)p & 63) == 0);
    CHECK(at_scratch(AT_SCRATCH_QUANT, 50) == p); /* smaller: the same buffer */
    use_scratch(NULL);                            /* warm up this thread's allocator */
    const size_t before = heap_in_use();
    for (int i = 0; i < 20; i++) {
        pthread_t t;
        CHECK(pthread_create(&t, NULL, use_scratch, NULL) == 0);
        pthread_join(t, NULL);
    }
    const size_t after = heap_in_use();
    CHECKF(after < before + ((size_t)4 << 20), "heap grew by %zu bytes over 20 threads of 12 MiB scratch each",
           after - before);
}

/* A block given back comes back for a request of a quarter of its size or more (the smallest
 * that fits), and only to its thread. A request that fits nothing frees the kept blocks smaller
 * than itself (kept memory never adds to the largest request's) and leaves larger ones for
 * their next batch; a block no request took for KEPT_STALE (16) requests is freed. */
static void test_kept_blocks(void) {
    const size_t mb = (size_t)1 << 20;
    char *a = at_block_alloc(4 * mb);
    CHECK(a != NULL);
    at_block_free(a, 4 * mb);
    char *b = at_block_alloc(3 * mb);
    CHECKF(b == a, "a kept 4 MiB block is not reused for 3 MiB");
    at_block_free(b, 3 * mb);
    char *c = at_block_alloc(mb / 2); /* under a quarter of 4 MiB: a new block */
    CHECKF(c != NULL && c != b, "a kept 4 MiB block was handed out for 0.5 MiB");
    char *d = at_block_alloc(3 * mb);
    CHECKF(d == b, "a smaller request's miss freed a larger kept block");
    at_block_free(c, mb / 2);
    at_block_free(d, 3 * mb);
    char *e = at_block_alloc(2 * mb), *f = at_block_alloc(mb / 2);
    CHECKF(e == d && f == c, "each request gets the kept block it fits");
    char *i2 = at_block_alloc(2 * mb); /* fits no kept block: a new one */
    CHECK(i2 != NULL && i2 != e && i2 != f);
    at_block_free(f, mb / 2);
    at_block_free(i2, 2 * mb);
    at_block_free(e, 3 * mb);
    char *g = at_block_alloc(3 * mb / 2); /* the 2 and the 4 MiB blocks fit: the smaller one */
    CHECKF(g == i2, "a 1.5 MiB request did not get the smallest kept block that fits");
    at_block_free(g, 2 * mb);

    /* a miss frees the smaller kept blocks before allocating (0.5 + 2 + 4 MiB kept) */
    const size_t kept = heap_in_use();
    char *h = at_block_alloc(32 * mb);
    CHECK(h != NULL);
    const size_t with_big = heap_in_use();
    CHECKF(with_big < kept + 32 * mb - 4 * mb, "the heap grew by %zu MiB for a 32 MiB miss: smaller blocks kept",
           (with_big - kept) >> 20);
    at_block_free(h, 32 * mb);
    /* stale: 20 requests that never take the kept 32 MiB block free it */
    for (int i = 0; i < 20; i++) at_block_free(at_block_alloc(64 << 10), 64 << 10);
    CHECKF(heap_in_use() < with_big - 16 * mb, "a 32 MiB block no request took is still kept");
}

/* A kept block lent for a smaller request comes back at its real size: with a 6 MiB block
 * (last lent for 3.5 MiB) and a 4 MiB one kept, 3 MiB gets the 4 MiB one. On a thread of its
 * own, so no other test's kept blocks take part. */
static void *kept_real_size(void *arg) {
    (void)arg;
    const size_t mb = (size_t)1 << 20;
    char *a = at_block_alloc(6 * mb);
    at_block_free(a, 6 * mb);
    char *b = at_block_alloc(7 * mb / 2);
    char *y = at_block_alloc(4 * mb);
    CHECK(b == a && y != NULL && y != a);
    at_block_free(b, 7 * mb / 2);
    at_block_free(y, 4 * mb);
    char *r = at_block_alloc(3 * mb);
    CHECKF(r == y, "a 6 MiB block lent for 3.5 MiB was kept as a 3.5 MiB one");
    at_block_free(r, 3 * mb);
    return NULL;
}

/* New blocks above 2 MiB come in steps of 1.5 and 1.33 (3, 4, 6, 8, 12 MiB...): a kept 9 MiB
 * request's block serves the next, slightly larger batch's 11 MiB (as an exact 9 MiB one
 * could not), and a 1 MiB request still gets a block of its own size. */
static void *kept_ladder(void *arg) {
    (void)arg;
    const size_t mb = (size_t)1 << 20;
    char *a = at_block_alloc(9 * mb);
    at_block_free(a, 9 * mb);
    char *b = at_block_alloc(11 * mb);
    CHECKF(b == a, "a kept block for 9 MiB did not serve 11 MiB");
    char *c = at_block_alloc(13 * mb);
    CHECKF(c != NULL && c != a, "13 MiB got the 12 MiB block");
    at_block_free(b, 11 * mb);
    at_block_free(c, 13 * mb);
    char *q = at_block_alloc(3 * mb), *r = at_block_alloc(2 * mb); /* a quarter of 12 MiB; less */
    CHECKF(q == a, "3 MiB did not get the kept 12 MiB block");
    CHECKF(r != NULL && r != c, "2 MiB got the 16 MiB block");
    at_block_free(q, 3 * mb);
    at_block_free(r, 2 * mb);
    return NULL;
}

static void on_own_thread(void *(*fn)(void *)) {
    pthread_t t;
    const int made = pthread_create(&t, NULL, fn, NULL) == 0;
    if (made) pthread_join(t, NULL);
    CHECK(made); /* after the join: the thread counts its own checks */
}

int main(void) {
    test_scratch_freed_at_thread_exit();
    test_kept_blocks();
    on_own_thread(kept_real_size);
    on_own_thread(kept_ladder);
    test_each_item_once();
    test_nested_serial();
    test_concurrent_callers();
    test_idle_workers_sleep();
    test_pool_shrinks();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
