/* One linear layer timed alone: at_k()->linear on a packed random matrix, best of repeated
 * calls for 1.5 s, against the register-only FMA peak measured on the same threads
 * (tools/bench_peak.c). Not a test: a probe for BENCHMARKS.md's kernel figures.
 *
 *   make build/tests/bench_linear
 *   build/tests/bench_linear ROWS IN OUT [f32|f16] [THREADS]    # e.g. 640 512 2048 f32 1 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../engine/kernels.h"
#include "../tools/bench_peak.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s ROWS IN OUT [f32|f16] [THREADS]\n", argv[0]);
        return 2;
    }
    const int n = atoi(argv[1]), in = atoi(argv[2]), out = atoi(argv[3]);
    const int dtype = argc > 4 && !strcmp(argv[4], "f16") ? AT_F16 : AT_F32, threads = argc > 5 ? atoi(argv[5]) : 1;
    char err[256];
    if (n < 1 || in < 1 || out < 1 || threads < 1 || at_kernels_init(err, sizeof err)) {
        fprintf(stderr, "bad arguments or kernels: %s\n", err);
        return 2;
    }
    at_set_threads(threads);
    float *x = malloc(sizeof(float) * (size_t)n * in), *y = malloc(sizeof(float) * (size_t)n * out);
    void *w = malloc((size_t)at_dtype_size(dtype) * out * in);
    if (!x || !y || !w) return 1;
    srand(1);
    for (size_t i = 0; i < (size_t)n * in; i++) x[i] = (float)(rand() % 2000 - 1000) * 1e-3f;
    for (size_t i = 0; i < (size_t)out * in; i++) {
        const float v = (float)(rand() % 2000 - 1000) * 1e-4f;
        if (dtype == AT_F32) ((float *)w)[i] = v;
        else ((uint16_t *)w)[i] = at_f32_to_f16_1(v);
    }
    at_matrix m = {w, dtype, out, in, NULL, NULL, 0};
    void *packed = at_matrix_pack(&m);
    if (!packed) return 1;
    double best = 1e30;
    for (const double t0 = now(); now() - t0 < 1.5;) {
        const double a = now();
        at_k()->linear(y, x, &m, NULL, n);
        if (now() - a < best) best = now() - a;
    }
    const compute_peak pk = measure_compute_peak(at_k()->name, threads);
    const double gflops = 2.0 * n * in * out / best * 1e-9;
    printf("%s %s rows %d, %d -> %d, %d thread%s: %.3f ms, %.1f GFLOP/s, %.0f%% of the FMA peak (%.1f)\n",
           at_k()->name, dtype == AT_F32 ? "f32" : "f16", n, in, out, threads, threads > 1 ? "s" : "", best * 1e3,
           gflops, pk.f32_gflops > 0 ? 100 * gflops / pk.f32_gflops : 0.0, pk.f32_gflops);
    free(packed), free(x), free(y), free(w);
    return 0;
}
