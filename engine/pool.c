/* A thread pool per calling thread (see pool.h). Why not OpenMP: libgomp's workers spin at
 * every barrier for as long as its wait policy says, and a library cannot choose that policy
 * (libgomp reads it once, at load). With the cores shared, a decoder step's ~60 small regions
 * each waited for a descheduled spinner: int8 batch 1 ran 6.6x slower.
 *
 * One job at a time per pool. The job's generation `gen` is odd while the job is open and
 * even once its caller closed it. A worker takes part by registering (`inside` + 1) and then
 * checking that the generation it woke for is still open; the caller closes the job before
 * it waits for `inside` to drop to 0. So a worker either registered in time (and the caller
 * waits for it) or sees the job closed and leaves without touching it. Items are claimed in
 * chunks from `next`; a worker that never got the CPU claims nothing and delays nobody. */
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pool.h"

/* How long an idle worker (or a caller waiting for the last chunk) polls before it sleeps:
 * long enough to catch the next loop of a decoder step without a wake-up, short enough that
 * a waiting thread gives its core away almost at once when other processes want it. */
#define SPIN_NS 20000

typedef struct pool pool;

typedef struct {
    pool *p;
    int index; /* 1..: the caller is worker 0 */
    int seen;  /* the generation when it was started (no job open) */
} worker_arg;

/* The counters every thread updates live on cache lines of their own, away from the job
 * and from gen, which idle workers poll. */
struct pool {
    /* the job: written by the owner while no worker is registered, before gen opens it */
    at_range_fn fn;
    const void *ctx;
    int n;
    _Atomic int threads;  /* workers with index < threads take part; a claim divides the items left by it */
    _Atomic int gen;      /* wraps around (atomics do): only its changes and parity matter */
    _Atomic int sleepers; /* workers asleep on gen */
    _Atomic int stop;
    _Atomic int retire_above; /* workers with a larger index leave (at_pool_trim); 0: none */
    int n_workers;
    pthread_t *tid;
    _Alignas(64) _Atomic int next; /* next unclaimed item */
    _Alignas(64) _Atomic int inside; /* workers registered on the open job */
    _Atomic int waiting;             /* the owner is asleep on inside */
};

static _Thread_local pool *my_pool;
static _Thread_local int in_parallel;
static pthread_key_t pool_key;
static pthread_once_t pool_key_once = PTHREAD_ONCE_INIT;

int at_in_parallel(void) { return in_parallel; }

/* ---------------------------------------------------------------------------------------
 * Waiting */

static void futex_wait(_Atomic int *word, int val) {
    syscall(SYS_futex, (int *)word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(_Atomic int *word) {
    syscall(SYS_futex, (int *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Poll until *word != val for at most SPIN_NS; 1 if it changed. */
static int spin_while_equal(_Atomic int *word, int val) {
    const long long until = now_ns() + SPIN_NS;
    for (;;) {
        for (int i = 0; i < 64; i++) {
            if (atomic_load_explicit(word, memory_order_acquire) != val) return 1;
            cpu_relax();
        }
        if (now_ns() > until) return 0;
    }
}

/* ---------------------------------------------------------------------------------------
 * Work */

/* Claim and run chunks of the open job until none are left. Chunks are guided (OpenMP's
 * schedule(guided)): a claim takes the items left divided by the thread count, at least one.
 * Threads start on long runs of consecutive items, so the loops whose items prefetch the next
 * one (the GEMMs' blocks of W) prefetch for themselves, and the runs shorten towards the end,
 * so the threads still finish together when one of them is slowed or loses its core. With
 * chunks of n / (16 threads) the two threads alternated blocks: int8 batch 64 decoded 12%
 * slower, f32 4% (BENCHMARKS.md). */
static void run_chunks(pool *p, int worker) {
    int lo = atomic_load_explicit(&p->next, memory_order_relaxed);
    while (lo < p->n) {
        const int take = (p->n - lo) / atomic_load_explicit(&p->threads, memory_order_relaxed);
        const int hi = take > 1 ? lo + take : lo + 1;
        if (!atomic_compare_exchange_weak_explicit(&p->next, &lo, hi, memory_order_relaxed, memory_order_relaxed))
            continue; /* lo is now the counter's value: claim again from there */
        p->fn(p->ctx, lo, hi, worker);
        lo = atomic_load_explicit(&p->next, memory_order_relaxed);
    }
}

static void *worker_main(void *argp) {
    const worker_arg arg = *(const worker_arg *)argp, *a = &arg;
    free(argp);
    pool *p = a->p;
    in_parallel = 1; /* anything a worker runs is inside a loop: nested loops stay serial */
    int seen = a->seen;
    for (;;) {
        int g = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (g == seen && !spin_while_equal(&p->gen, seen)) {
            atomic_fetch_add(&p->sleepers, 1);
            while ((g = atomic_load(&p->gen)) == seen && !atomic_load(&p->stop)) futex_wait(&p->gen, seen);
            atomic_fetch_sub(&p->sleepers, 1);
        }
        if (atomic_load(&p->stop)) return NULL;
        const int retire = atomic_load(&p->retire_above);
        if (retire && a->index > retire) return NULL;
        g = atomic_load(&p->gen);
        seen = g;
        if (!(g & 1)) continue; /* a job closed: wait for the next */
        atomic_fetch_add(&p->inside, 1);
        if (atomic_load(&p->gen) == g && a->index < atomic_load(&p->threads)) run_chunks(p, a->index);
        if (atomic_fetch_sub(&p->inside, 1) == 1 && atomic_load(&p->waiting)) futex_wake(&p->inside);
    }
}

/* ---------------------------------------------------------------------------------------
 * The pool of the calling thread */

static void pool_free(void *ptr) {
    pool *p = ptr;
    if (!p) return;
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->gen, 2); /* a change the sleepers wake for; still even: no job */
    futex_wake(&p->gen);
    for (int i = 0; i < p->n_workers; i++) pthread_join(p->tid[i], NULL);
    free(p->tid);
    free(p);
}

static void make_key(void) { pthread_key_create(&pool_key, pool_free); }

/* The calling thread's pool with at least want workers when the system lets it start them
 * (fewer otherwise); NULL without memory. Called only between jobs. A pool far larger than
 * asked for (one call with threads=64, then calls with 2) is joined and made anew: its idle
 * workers would all wake, spin and sleep again on every job, on cores the call did not ask
 * for. */
static pool *get_pool(int want) {
    pool *p = my_pool;
    if (p && p->n_workers > 2 * want + 2) {
        pthread_setspecific(pool_key, NULL);
        pool_free(p);
        my_pool = p = NULL;
    }
    if (!p) {
        pthread_once(&pool_key_once, make_key);
        p = aligned_alloc(_Alignof(pool), sizeof *p); /* sizeof is a multiple of the alignment */
        if (!p) return NULL;
        memset(p, 0, sizeof *p);
        if (pthread_setspecific(pool_key, p)) {
            free(p);
            return NULL;
        }
        my_pool = p;
    }
    if (want <= p->n_workers) return p;
    pthread_t *tid = realloc(p->tid, sizeof *tid * (size_t)want);
    if (!tid) return p;
    p->tid = tid;
    /* workers take no signals: they stay with the threads the program expects them on */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    while (p->n_workers < want) {
        worker_arg *a = malloc(sizeof *a); /* the worker copies and frees it */
        if (!a) break;
        *a = (worker_arg){p, p->n_workers + 1, atomic_load(&p->gen)};
        if (pthread_create(&p->tid[p->n_workers], NULL, worker_main, a)) {
            free(a);
            break;
        }
        p->n_workers++;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return p;
}

/* Workers beyond what threads needs are joined: one call with many threads must not leave
 * idle workers that every later job wakes (63 of them slowed 2-thread jobs 16x). */
void at_pool_trim(int threads) {
    pool *p = my_pool;
    const int keep = threads > 1 ? threads - 1 : 0;
    if (!p || in_parallel || p->n_workers <= keep) return;
    atomic_store(&p->retire_above, keep > 0 ? keep : -1); /* -1: every index is above */
    atomic_fetch_add(&p->gen, 2); /* a change the sleepers wake for; still even: no job */
    futex_wake(&p->gen);
    for (int i = keep; i < p->n_workers; i++) pthread_join(p->tid[i], NULL);
    p->n_workers = keep;
    atomic_store(&p->retire_above, 0);
}

void at_parallel_for(int n, int threads, at_range_fn fn, const void *ctx) {
    if (n <= 0) return;
    pool *p = threads > 1 && n > 1 && !in_parallel ? get_pool(threads - 1) : NULL;
    if (!p || p->n_workers == 0) {
        fn(ctx, 0, n, 0);
        return;
    }
    if (threads > p->n_workers + 1) threads = p->n_workers + 1;
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    atomic_store_explicit(&p->next, 0, memory_order_relaxed);
    atomic_store(&p->threads, threads);
    atomic_fetch_add(&p->gen, 1); /* odd: open */
    if (atomic_load(&p->sleepers)) futex_wake(&p->gen);

    in_parallel = 1;
    run_chunks(p, 0);
    in_parallel = 0;

    atomic_fetch_add(&p->gen, 1); /* even, closed: late workers leave without touching the job */
    /* wait for the registered workers to finish their last chunks: poll while they make
     * progress, sleep when one of them seems to have lost its core */
    int in;
    while ((in = atomic_load(&p->inside)) != 0) {
        if (spin_while_equal(&p->inside, in)) continue;
        atomic_store(&p->waiting, 1);
        while ((in = atomic_load(&p->inside)) != 0) futex_wait(&p->inside, in);
        atomic_store(&p->waiting, 0);
    }
}
