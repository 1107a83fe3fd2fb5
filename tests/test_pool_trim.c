/* The pool follows the calling thread's thread setting (engine/pool.h, at_pool_trim): after a
 * loop on many threads, setting fewer joins the extra workers, the process's thread count
 * comes back down, and loops on the smaller pool still run every item once.
 * Usage: test_pool_trim */
#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>

#include "../engine/kernels.h"
#include "../engine/pool.h"
#include "check.h"

#define N 4096

/* threads of this process: the entries of /proc/self/task */
static int task_count(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void count_items(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    _Atomic int *count = (_Atomic int *)ctx;
    for (int i = lo; i < hi; i++) atomic_fetch_add(&count[i], 1);
}

/* 1 when a loop on threads threads ran every item exactly once */
static int each_once(int threads) {
    static _Atomic int count[N];
    for (int i = 0; i < N; i++) atomic_store(&count[i], 0);
    at_parallel_for(N, threads, count_items, count);
    for (int i = 0; i < N; i++)
        if (atomic_load(&count[i]) != 1) return 0;
    return 1;
}

int main(void) {
    const int before = task_count();
    CHECK(before >= 1);
    at_set_threads(32);
    CHECK(each_once(32));
    const int wide = task_count();
    CHECKF(wide >= before + 31, "%d threads after a 32-thread loop, want at least %d", wide, before + 31);
    at_set_threads(2);
    const int narrow = task_count();
    CHECKF(narrow == before + 1, "%d threads after setting 2, want %d (one worker)", narrow, before + 1);
    CHECK(each_once(2));
    at_set_threads(8); /* grows again on demand */
    CHECK(each_once(8));
    CHECKF(task_count() == before + 7, "%d threads after an 8-thread loop, want %d", task_count(), before + 7);
    at_set_threads(1);
    CHECKF(task_count() == before, "%d threads after setting 1, want %d (no workers)", task_count(), before);
    CHECK(each_once(1));
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
