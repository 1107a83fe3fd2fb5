/* bench_bandwidth: the machine's memory bandwidth for attend bench (bench_bandwidth.h). */
#include "bench_bandwidth.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* OpenMP's thread pool does not survive fork(), so the child uses plain pthreads. */
enum { PASS_INIT, PASS_TRIAD, PASS_READ };

typedef struct {
    float *a, *b, *c;
    size_t lo, hi;
    float s;
    int pass;  /* PASS_* */
    float sum; /* PASS_READ: the sum read, so the reads cannot be dropped */
} triad_part;

static void *triad_run(void *arg) {
    triad_part *p = arg;
    /* local restrict pointers and an explicit simd loop: through the struct the compiler
     * must assume aliasing and emits scalar code, which understates the bandwidth */
    float *restrict a = p->a, *restrict b = p->b, *restrict c = p->c;
    const float s = p->s;
    if (p->pass == PASS_INIT) {
#pragma omp simd
        for (size_t i = p->lo; i < p->hi; i++) a[i] = 0, b[i] = 1, c[i] = 2;
    } else if (p->pass == PASS_TRIAD) {
#pragma omp simd
        for (size_t i = p->lo; i < p->hi; i++) a[i] = b[i] + s * c[i];
    } else { /* read only, as a batch-1 decoder step reads its weights */
        float sum = 0;
#pragma omp simd reduction(+ : sum)
        for (size_t i = p->lo; i < p->hi; i++) sum += a[i] + b[i] + c[i];
        p->sum = sum;
    }
    return NULL;
}

static void triad_pass(float *a, float *b, float *c, size_t n, float s, int pass, int threads) {
    pthread_t tid[64];
    triad_part part[64];
    if (threads > 64) threads = 64;
    for (int t = 0; t < threads; t++) {
        part[t] = (triad_part){a, b, c, n * t / threads, n * (t + 1) / threads, s, pass, 0};
        if (t > 0 && pthread_create(&tid[t], NULL, triad_run, &part[t])) part[t].hi = part[t].lo, tid[t] = 0;
    }
    triad_run(&part[0]);
    for (int t = 1; t < threads; t++)
        if (part[t].hi > part[t].lo) pthread_join(tid[t], NULL);
}

bandwidth measure_bandwidth(int threads) {
    bandwidth r = {0, 0};
    int fd[2];
    if (pipe(fd)) return r;
    pid_t pid = fork();
    if (pid < 0) return r;
    if (pid == 0) {
        close(fd[0]);
        const size_t n = (size_t)160 << 20; /* 160 Mi floats = 640 MiB per array */
        float *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4);
        bandwidth best = {0, 0};
        if (a && b && c) {
            triad_pass(a, b, c, n, 0, PASS_INIT, threads);
            for (int rep = 0; rep < 5; rep++) {
                double t0 = now();
                triad_pass(a, b, c, n, 0.5f + rep, PASS_TRIAD, threads);
                double gbps = 3.0 * 4 * n / (now() - t0) / 1e9;
                if (gbps > best.triad) best.triad = gbps;
                t0 = now();
                triad_pass(a, b, c, n, 0, PASS_READ, threads);
                gbps = 3.0 * 4 * n / (now() - t0) / 1e9;
                if (gbps > best.read) best.read = gbps;
            }
        }
        if (write(fd[1], &best, sizeof best) != sizeof best) _exit(1);
        _exit(0);
    }
    close(fd[1]);
    if (read(fd[0], &r, sizeof r) != sizeof r) r.triad = r.read = 0;
    close(fd[0]);
    waitpid(pid, NULL, 0);
    return r;
}
