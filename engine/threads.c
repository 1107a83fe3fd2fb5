/* How many threads: -t N exactly when given, else $OMP_NUM_THREADS, else one per physical
 * core this process may run on. Matrix kernels gain nothing from a core's second hardware
 * thread (both share one set of vector units) and lose to the contention. */
#include <ctype.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "kernels.h"
#include "pool.h"

static int online_cpus(void) {
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static int read_sys_int(int cpu, const char *what) {
    char path[128];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/%s", cpu, what);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int v = -1;
    if (fscanf(f, "%d", &v) != 1) v = -1;
    fclose(f);
    return v;
}

int at_physical_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return online_cpus();
    /* distinct (package, core) pairs among the CPUs in our set (on the stack: callers may
     * run on several threads at once) */
    enum { MAX_SEEN = 1024 };
    int seen_pkg[MAX_SEEN], seen_core[MAX_SEEN];
    int n = 0, unknown = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE && n < MAX_SEEN; cpu++) {
        if (!CPU_ISSET(cpu, &set)) continue;
        const int pkg = read_sys_int(cpu, "physical_package_id"), core = read_sys_int(cpu, "core_id");
        if (pkg < 0 || core < 0) {
            unknown++; /* no topology (some containers): count the CPU itself */
            continue;
        }
        int dup = 0;
        for (int i = 0; i < n && !dup; i++) dup = seen_pkg[i] == pkg && seen_core[i] == core;
        if (!dup) seen_pkg[n] = pkg, seen_core[n++] = core;
    }
    const int cores = n + unknown;
    return cores > 0 ? cores : online_cpus();
}

int at_default_threads(void) {
    const char *env = getenv("OMP_NUM_THREADS");
    if (env && isdigit((unsigned char)env[0])) { /* "4" or the first of a list "4,2" */
        const long v = strtol(env, NULL, 10);
        if (v > 0 && v <= 4096) return (int)v;
    }
    return at_physical_cores();
}

/* The thread count is a per-thread setting, not a global: each calling thread sets its own,
 * so calls on several threads do not interfere. 0: not set yet, at_default_threads(). */
static _Thread_local int my_threads;

int at_set_threads(int n) {
    const int old = at_threads();
    my_threads = n > 0 ? n : at_default_threads();
    at_pool_trim(my_threads);
    return old;
}

int at_threads(void) {
    if (my_threads == 0) my_threads = at_default_threads();
    return my_threads;
}
