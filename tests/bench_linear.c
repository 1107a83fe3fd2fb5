/* One linear layer timed alone: at_k()->linear on a packed random matrix, best of repeated
 * calls for 1.5 s, against the register-only FMA peak measured on the same threads
 * (cli/bench_peak.c). Not a test: a probe for BENCHMARKS.md's kernel figures.
 *
 *   make build/tests/bench_linear
 *   build/tests/bench_linear ROWS IN OUT [f32|f16|i8|bf16] [THREADS]    # e.g. 640 512 2048 f32 1
 *
 * i8: W quantized per row, the inputs per row on each call (as the model does); against the
 * int8 multiply-add peak (vpdpbusd, or vpmaddubsw + vpmaddwd without VNNI). bf16: W from f32
 * into bf16 panels, the inputs rounded on each call; against vdpbf16ps's peak (AVX-512 BF16). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../engine/bf16.h"
#include "../engine/isa.h"
#include "../engine/kernels.h"
#include "../cli/bench_peak.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s ROWS IN OUT [f32|f16|i8|bf16] [THREADS]\n", argv[0]);
        return 2;
    }
    const int n = atoi(argv[1]), in = atoi(argv[2]), out = atoi(argv[3]);
    const char *dn = argc > 4 ? argv[4] : "f32";
    const int bf16 = !strcmp(dn, "bf16"), dtype = !strcmp(dn, "f16") ? AT_F16 : !strcmp(dn, "i8") ? AT_I8 : AT_F32;
    const int threads = argc > 5 ? atoi(argv[5]) : 1;
    char err[256];
    if (n < 1 || in < 1 || out < 1 || threads < 1 || at_kernels_init(err, sizeof err)) {
        fprintf(stderr, "bad arguments or kernels: %s\n", err);
        return 2;
    }
    at_set_threads(threads);
    float *x = malloc(sizeof(float) * (size_t)n * in), *y = malloc(sizeof(float) * (size_t)n * out);
    void *w = malloc((size_t)at_dtype_size(dtype) * out * in);
    float *row = malloc(sizeof(float) * in), *scale = malloc(sizeof(float) * out);
    if (!x || !y || !w || !row || !scale) return 1;
    srand(1);
    for (size_t i = 0; i < (size_t)n * in; i++) x[i] = (float)(rand() % 2000 - 1000) * 1e-3f;
    for (size_t i = 0; i < (size_t)out * in; i++) {
        const float v = (float)(rand() % 2000 - 1000) * 1e-4f;
        if (dtype == AT_F32) ((float *)w)[i] = v;
        else if (dtype == AT_F16) ((uint16_t *)w)[i] = at_f32_to_f16_1(v);
        else { /* a row at a time, quantized when complete */
            row[i % in] = v;
            if (i % in == (size_t)in - 1) scale[i / in] = at_quantize_row((int8_t *)w + i / in * in, row, in);
        }
    }
    at_matrix m = {w, dtype, out, in, NULL, NULL, 0};
    if (dtype == AT_I8) {
        m.scale = scale;
        m.wsum = at_matrix_i8_sums(w, out, in);
        if (!m.wsum) return 1;
    }
    if (bf16 && !at_bf16_available()) {
        fprintf(stderr, "bf16: this CPU or kernel set has no AVX-512 BF16\n");
        return 2;
    }
    void *packed = bf16 ? at_alloc_weights(at_matrix_bf16_bytes(&m)) : at_matrix_pack(&m);
    if (!packed) return 1;
    if (bf16) at_matrix_to_bf16_into(&m, packed);
    double best = 1e30;
    for (const double t0 = now(); now() - t0 < 1.5;) {
        const double a = now();
        at_k()->linear(y, x, &m, NULL, n);
        if (now() - a < best) best = now() - a;
    }
    const int amx = dtype == AT_I8 && !strcmp(at_isa_int8_path(), "amx");
    const compute_peak pk = measure_compute_peak(at_k()->name, amx, bf16, threads);
    const double gflops = 2.0 * n * in * out / best * 1e-9,
                 peak = amx ? pk.amx_gops : dtype == AT_I8 ? pk.i8_gops : bf16 ? pk.bf16_gflops : pk.f32_gflops;
    printf("%s %s rows %d, %d -> %d, %d thread%s: %.3f ms, %.1f G%s/s, %.0f%% of the %s peak (%.1f)\n", at_k()->name,
           dn, n, in, out, threads, threads > 1 ? "s" : "", best * 1e3, gflops, dtype == AT_I8 ? "OP" : "FLOP",
           peak > 0 ? 100 * gflops / peak : 0.0, amx ? "AMX" : dtype == AT_I8 ? pk.i8_how : bf16 ? "vdpbf16ps" : "FMA", peak);
    free(packed), free(x), free(y), free(w), free(row), free(scale), free((void *)m.wsum);
    return 0;
}
