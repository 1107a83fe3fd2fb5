/* One sentence's self-attention timed both ways: query row by row (the kernel set's
 * attention_heads: dot products) and as matrix products (at_attention_gemm), best of
 * repeated calls, interleaved, one thread unless told. Not a test: the probe that placed
 * AT_ATTENTION_GEMM_MIN (docs/benchmarks.md, Whisper speed).
 *
 *   make build/tests/bench_attention
 *   build/tests/bench_attention HEADS HD LEN... [-t THREADS]    # e.g. 8 64 32 64 128 256 1500 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../engine/kernels.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* the best of `reps` calls of each way, alternating, in ms: best[0] rows, best[1] GEMM */
static void time_both(const at_attention_args *a, int heads, int reps, double best[2]) {
    best[0] = best[1] = 1e30;
    for (int r = 0; r < reps; r++)
        for (int way = 0; way < 2; way++) {
            const double t0 = now();
            if (way == 0) at_k()->attention_heads(a, 0, heads);
            else if (at_attention_gemm(a, heads)) return;
            const double ms = (now() - t0) * 1e3;
            best[way] = ms < best[way] ? ms : best[way];
        }
}

int main(int argc, char **argv) {
    char err[256];
    if (argc < 4 || at_kernels_init(err, sizeof err)) {
        fprintf(stderr, "usage: %s HEADS HD LEN... [-t THREADS]\n", argv[0]);
        return 2;
    }
    const int heads = atoi(argv[1]), hd = atoi(argv[2]), d = heads * hd;
    for (int i = 3; i + 1 < argc; i++)
        if (!strcmp(argv[i], "-t")) at_set_threads(atoi(argv[i + 1]));
    if (argc < 6 || strcmp(argv[argc - 2], "-t")) at_set_threads(1);
    printf("%s, %d heads of %d, %d thread(s): ms per call (best)\n%6s %10s %10s %7s\n", at_k()->name, heads, hd,
           at_threads(), "len", "rows", "gemm", "ratio");
    for (int i = 3; i < argc && strcmp(argv[i], "-t"); i++) {
        const int len = atoi(argv[i]);
        /* queries, keys, values in blocks of their own, as the encoder keeps them */
        float *qkv[3], *o = malloc(sizeof(float) * (size_t)len * d);
        float *scratch = malloc(sizeof(float) * (size_t)heads * len);
        unsigned rng = 12345;
        for (int m = 0; m < 3; m++) { /* uniform in [-1, 1): scores of spread 0.7 (queries scaled) */
            qkv[m] = at_block_alloc(sizeof(float) * (size_t)len * d);
            for (size_t j = 0; j < (size_t)len * d; j++) {
                rng = rng * 1664525u + 1013904223u;
                qkv[m][j] = ((float)(rng >> 8) / 8388608.0f - 1.0f) * (m == 0 ? 0.125f : 1.0f);
            }
        }
        const at_attention_args a = {o, qkv[0], qkv[1], qkv[2], NULL, scratch, d, d, d, len, len, hd, 0, 0, NULL, 0, 0};
        double best[2];
        const int reps = len >= 1000 ? 5 : len >= 200 ? 20 : 200;
        time_both(&a, heads, reps, best);
        printf("%6d %10.3f %10.3f %7.2f\n", len, best[0], best[1], best[0] / best[1]);
        for (int m = 0; m < 3; m++) at_block_free(qkv[m], sizeof(float) * (size_t)len * d);
        free(o), free(scratch);
    }
    return 0;
}
