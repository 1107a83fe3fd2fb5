/* The engine's thread pool: one per calling thread, created on its first parallel loop and
 * joined when that thread exits. Items are handed out in guided chunks from an atomic counter
 * (each claim takes the items left divided by the thread count: long runs of consecutive
 * items first, shorter ones at the end), so a thread that the OS deschedules (cores shared
 * with other processes) simply does fewer, and the calling thread works too. Idle workers spin a few microseconds, then sleep on a futex:
 * nothing burns CPU between calls.
 *
 *   static void rows(const void *ctx, int lo, int hi, int worker) { ... items [lo, hi) ... }
 *   at_parallel_for(n_rows, work > GRAIN ? at_threads() : 1, rows, &args);
 *
 * Each item must be computed the same way whichever thread runs it: results then do not
 * depend on the thread count or on the timing. */
#ifndef AT_POOL_H
#define AT_POOL_H

/* Items [lo, hi) of a loop. worker is in [0, threads) of the at_parallel_for call (the
 * caller is 0) and no two chunks run at once with the same worker: per-thread scratch can
 * be indexed by it. */
typedef void (*at_range_fn)(const void *ctx, int lo, int hi, int worker);

/* Run fn over items [0, n) on up to threads threads (the calling thread included) and
 * return when all are done. Runs serially, fn(ctx, 0, n, 0), when threads <= 1, n <= 1, or
 * when called from inside another at_parallel_for (nested loops never fork). */
void at_parallel_for(int n, int threads, at_range_fn fn, const void *ctx);

/* Stop and join the calling thread's workers beyond threads - 1 (none when threads <= 1);
 * call between jobs. at_set_threads calls it, so the pool follows the thread setting. */
void at_pool_trim(int threads);
/* 1 while the calling thread runs items of an at_parallel_for with more than one thread. */
int at_in_parallel(void);

#endif
