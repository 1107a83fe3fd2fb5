/* Kernel unit tests: every kernel of every kernel set this CPU runs, against naive code
 * computed in double precision. Prints "N passed, M failed". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../engine/isa.h"
#include "../engine/kernels.h"
#include "check.h"

/* every message names the kernel set under test */
#define CHECK_ISA(cond, fmt, ...) CHECKF(cond, "[%s] " fmt, isa_name, ##__VA_ARGS__)

static const char *isa_name = "?";
static unsigned rng_state = 12345;

static float frand(void) { /* uniform in [-1, 1) */
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)((rng_state >> 8) & 0xffffff) / 8388608.0f - 1.0f;
}

static void fill(float *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = frand() * scale;
}

#include "bf16_check.h"

/* ------------------------------------------------------------------------------------- */

static void test_f16(void) {
    const at_kernels *K = at_k();
    uint16_t *h = malloc(65536 * 2);
    float *f = malloc(65536 * 4);
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    K->f16_to_f32(f, h, 65536);
    int bad = 0;
    for (int i = 0; i < 65536; i++) {
        float want = at_f16_to_f32_1((uint16_t)i);
        if (memcmp(&want, &f[i], 4) != 0 && !(isnan(want) && isnan(f[i]))) bad++;
    }
    CHECK_ISA(bad == 0, "f16_to_f32: %d of 65536 values differ from the exact conversion", bad);
    /* round trip of every finite half, and round-to-nearest-even on a tie */
    int rt = 0;
    for (int i = 0; i < 65536; i++) {
        float v = at_f16_to_f32_1((uint16_t)i);
        if (isfinite(v) && at_f32_to_f16_1(v) != (uint16_t)i && !(v == 0 && (i & 0x7fff) == 0)) rt++;
    }
    CHECK_ISA(rt == 0, "f32_to_f16 round trip: %d values", rt);
    CHECK_ISA(at_f32_to_f16_1(1.0f + 1.0f / 2048) == 0x3c00, "tie 1+2^-11 rounds to even (1.0)");
    CHECK_ISA(at_f32_to_f16_1(1.0f + 3.0f / 2048) == 0x3c02, "tie 1+3*2^-11 rounds to even");
    CHECK_ISA(at_f32_to_f16_1(65520.0f) == 0x7c00, "65520 overflows to inf");
    free(h);
    free(f);
}

static void test_dot_axpy(void) {
    const at_kernels *K = at_k();
    int sizes[] = {1, 3, 7, 8, 15, 16, 17, 31, 64, 100, 257};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        int n = sizes[s];
        float *a = malloc(4 * n), *b = malloc(4 * n), *y = malloc(4 * n), *y0 = malloc(4 * n);
        fill(a, n, 1), fill(b, n, 1), fill(y, n, 1);
        memcpy(y0, y, 4 * n);
        double want = 0;
        for (int i = 0; i < n; i++) want += (double)a[i] * b[i];
        float got = K->dot(a, b, n);
        CHECK_ISA(fabs(got - want) <= 1e-5 * (1 + sqrt(n)), "dot n=%d: %g vs %g", n, got, want);
        K->axpy(y, 0.5f, a, n);
        double err = 0;
        for (int i = 0; i < n; i++) err = fmax(err, fabs(y[i] - (y0[i] + 0.5 * a[i])));
        CHECK_ISA(err <= 1e-6, "axpy n=%d: error %g", n, err);
        free(a), free(b), free(y), free(y0);
    }
}

/* y = x Wᵀ + b for several shapes, f32 and f16 weights; and batch independence. */
static void test_linear(void) {
    const at_kernels *K = at_k();
    int shapes[][3] = {{1, 1, 1}, {1, 64, 64}, {3, 17, 33}, {5, 48, 100}, {1, 512, 512},
                       {7, 130, 257}, {20, 64, 128}, {33, 96, 31}, {64, 40, 72}, {2, 1000, 64},
                       {1, 37, 100}, {1, 130, 257}, {1, 48, 2048}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int n = shapes[s][0], out = shapes[s][1], in = shapes[s][2];
        for (int dtype = 0; dtype < 2; dtype++) {
            float *x = malloc(sizeof(float) * n * in), *w = malloc(sizeof(float) * out * in);
            float *b = malloc(sizeof(float) * out), *y = malloc(sizeof(float) * n * out);
            float *y1 = malloc(sizeof(float) * out);
            uint16_t *wh = malloc(2 * (size_t)out * in);
            fill(x, (size_t)n * in, 1), fill(w, (size_t)out * in, 0.2f), fill(b, out, 1);
            for (size_t i = 0; i < (size_t)out * in; i++) {
                wh[i] = at_f32_to_f16_1(w[i]);
                if (dtype == AT_F16) w[i] = at_f16_to_f32_1(wh[i]); /* what the kernel sees */
            }
            at_matrix W = {.data = dtype == AT_F16 ? (const void *)wh : (const void *)w,
                           .dtype = dtype, .rows = out, .cols = in};
            for (int with_bias = 0; with_bias < 2; with_bias++) {
                K->linear(y, x, &W, with_bias ? b : NULL, n);
                double err = 0;
                for (int t = 0; t < n; t++)
                    for (int o = 0; o < out; o++) {
                        double want = with_bias ? b[o] : 0;
                        for (int i = 0; i < in; i++) want += (double)x[t * in + i] * w[(size_t)o * in + i];
                        err = fmax(err, fabs(y[t * out + o] - want));
                    }
                CHECK_ISA(err <= 2e-5 * sqrt(in), "linear %s n=%d out=%d in=%d bias=%d: error %g",
                      dtype ? "f16" : "f32", n, out, in, with_bias, err);
            }
            /* each row alone must give bit-identical results to the batched call */
            int diff = 0;
            for (int t = 0; t < n; t++) {
                K->linear(y1, x + (size_t)t * in, &W, b, 1);
                K->linear(y, x, &W, b, n);
                if (memcmp(y1, y + (size_t)t * out, sizeof(float) * out)) diff++;
            }
            CHECK_ISA(diff == 0, "linear %s n=%d out=%d in=%d: %d rows depend on the batch",
                  dtype ? "f16" : "f32", n, out, in, diff);
            free(x), free(w), free(b), free(y), free(y1), free(wh);
        }
    }
}

/* swish over a wide range against double precision; special values; and a value's result
 * must not depend on its position (the SIMD tail runs the same code). */
static void test_swish(void) {
    enum { N = 20011 }; /* not a multiple of any vector width */
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
    for (int i = 0; i < N; i++) x[i] = -100.0f + 200.0f * i / (N - 1);
    memcpy(y, x, sizeof(float) * N);
    at_k()->swish(y, N);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        const double want = x[i] / (1.0 + exp(-(double)x[i]));
        const double err = fabs(y[i] - want) / fmax(fabs(want), 1e-30);
        if (fabs(want) > 1e-30) worst = fmax(worst, err);
    }
    CHECK_ISA(worst < 1e-6, "swish: relative error %g over [-100, 100]", worst);
    /* the same values shifted by one place: every result bit-identical */
    float *z = malloc(sizeof(float) * (N + 1));
    z[0] = 1.0f;
    memcpy(z + 1, x, sizeof(float) * N);
    at_k()->swish(z, N + 1);
    CHECK_ISA(!memcmp(z + 1, y, sizeof(float) * N), "swish: a value's result depends on its position");
    float sp[6] = {0.0f, -0.0f, NAN, INFINITY, -INFINITY, 1e-40f};
    at_k()->swish(sp, 6);
    CHECK_ISA(sp[0] == 0 && !signbit(sp[0]) && sp[1] == 0 && signbit(sp[1]) && isnan(sp[2]) && sp[3] == INFINITY &&
                  isnan(sp[4]) && fabsf(sp[5] - 5e-41f) < 1e-45f,
              "swish: 0, -0, NaN, inf, -inf, subnormal give %g %g %g %g %g %g", sp[0], sp[1], sp[2], sp[3], sp[4], sp[5]);
    free(x), free(y), free(z);
}

/* A row computed in a 4-row tile and the same row computed alone (a matrix's last out % 4
 * rows) must agree bit for bit: both reduce their lanes in V_HSUM's order. */
static void test_linear_tile_rows(void) {
    enum { IN = 300, N = 3 };
    float w[5 * IN], x[N * IN], b[5], y[N * 5];
    fill(x, N * IN, 1), fill(w, 5 * IN, 0.3f), fill(b, 5, 1);
    int same = 1;
    for (int dtype = 0; dtype < 2; dtype++)
        for (int r = 0; r < 4; r++) {
            memcpy(w + 4 * IN, w + r * IN, sizeof(float) * IN);
            b[4] = b[r];
            uint16_t wh[5 * IN];
            for (int i = 0; i < 5 * IN; i++) wh[i] = at_f32_to_f16_1(w[i]);
            at_matrix W = {.data = dtype ? (const void *)wh : (const void *)w, .dtype = dtype, .rows = 5, .cols = IN};
            for (int n = 1; n <= N; n += 2) {
                at_k()->linear(y, x, &W, b, n);
                for (int t = 0; t < n; t++) same &= !memcmp(&y[t * 5 + r], &y[t * 5 + 4], sizeof(float));
            }
        }
    CHECK_ISA(same, "linear: a row in a 4-row tile differs from the same row computed alone");
}

/* The SIMD sets compute each f32 / f16 linear output as one chain of fused multiply-adds
 * over k = 0, 1, ... from zero, then + bias (engine/kernels_simd.h), whatever the batch size
 * and layout: every output must equal that chain bit for bit (fmaf rounds once, as the
 * vector FMA does). Batch sizes 1..70 cross the micro-tile (3 or 6 rows) and block edges,
 * row counts the 64-row panel groups, column counts the 128-column blocks. */
static void test_linear_chain(void) {
    if (!strcmp(isa_name, "generic")) return; /* its own order: checked against double above */
    int shapes[][2] = {{1, 1}, {63, 7}, {64, 128}, {65, 129}, {130, 300}, {200, 64}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int out = shapes[s][0], in = shapes[s][1], N = 70;
        float *x = malloc(sizeof(float) * N * in), *w = malloc(sizeof(float) * out * in), *b = malloc(sizeof(float) * out);
        float *y = malloc(sizeof(float) * N * out);
        uint16_t *wh = malloc(2 * (size_t)out * in);
        fill(x, (size_t)N * in, 1), fill(w, (size_t)out * in, 0.3f), fill(b, out, 1);
        for (size_t i = 0; i < (size_t)out * in; i++) wh[i] = at_f32_to_f16_1(w[i]);
        for (int dtype = 0; dtype < 2; dtype++)
            for (int packed = 0; packed < 2; packed++) {
                at_matrix W = {.data = dtype ? (const void *)wh : (const void *)w, .dtype = dtype, .rows = out, .cols = in};
                void *buf = packed ? at_matrix_pack(&W) : NULL;
                int bad = 0, first = 0;
                for (int n = 1; n <= N; n += n < 16 ? 1 : 9) {
                    at_k()->linear(y, x, &W, n % 2 ? b : NULL, n);
                    for (int t = 0; t < n; t++)
                        for (int o = 0; o < out; o++) {
                            float acc = 0.0f;
                            for (int k = 0; k < in; k++) {
                                const float wk = dtype ? at_f16_to_f32_1(wh[(size_t)o * in + k]) : w[(size_t)o * in + k];
                                acc = fmaf(wk, x[(size_t)t * in + k], acc);
                            }
                            if (n % 2) acc += b[o];
                            if (memcmp(&acc, &y[(size_t)t * out + o], sizeof acc) && !bad++) first = n;
                        }
                }
                CHECK_ISA(bad == 0, "linear %s %s %dx%d: %d outputs differ from the fused chain (first at n=%d)",
                          dtype ? "f16" : "f32", packed ? "packed" : "row-major", out, in, bad, first);
                free(buf);
            }
        free(x), free(w), free(b), free(y), free(wh);
    }
}

/* int8 matrices: the kernel set's result is bit-identical to the generic one (integer dot
 * products are exact), close to the dequantized product, and independent of the batch;
 * at_quantize_row keeps every value within half a step. */
static void test_linear_i8(void) {
    const at_kernels *K = at_k();
    int shapes[][3] = {{1, 1, 1}, {1, 64, 64}, {3, 17, 33}, {5, 48, 100}, {1, 512, 512},
                       {7, 130, 257}, {20, 64, 128}, {33, 96, 31}, {64, 40, 72}, {2, 1000, 64},
                       {1, 37, 100}, {1, 130, 257}, {1, 48, 2048}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int n = shapes[s][0], out = shapes[s][1], in = shapes[s][2];
        float *x = malloc(sizeof(float) * n * in), *w = malloc(sizeof(float) * out * in);
        float *b = malloc(sizeof(float) * out), *y = malloc(sizeof(float) * n * out);
        float *yg = malloc(sizeof(float) * n * out), *y1 = malloc(sizeof(float) * out);
        float *sc = malloc(sizeof(float) * out), *xs = malloc(sizeof(float) * n);
        int8_t *q = malloc((size_t)out * in), *xq = malloc((size_t)n * in);
        fill(x, (size_t)n * in, 1), fill(w, (size_t)out * in, 0.2f), fill(b, out, 1);
        if (out > 3) memset(w + (size_t)2 * in, 0, sizeof(float) * in); /* an all-zero row */
        int bad_q = 0;
        for (int o = 0; o < out; o++) {
            sc[o] = at_quantize_row(q + (size_t)o * in, w + (size_t)o * in, in);
            for (int i = 0; i < in; i++)
                if (fabs(q[(size_t)o * in + i] * (double)sc[o] - w[(size_t)o * in + i]) > 0.5001 * sc[o]) bad_q++;
        }
        CHECK_ISA(bad_q == 0, "quantize_row out=%d in=%d: %d values off by more than half a step", out, in, bad_q);
        int32_t *sums = at_matrix_i8_sums(q, out, in);
        at_matrix W = {.data = q, .dtype = AT_I8, .rows = out, .cols = in, .scale = sc, .wsum = sums};
        K->linear(y, x, &W, b, n);
        at_kernels_generic.linear(yg, x, &W, b, n);
        CHECK_ISA(!memcmp(y, yg, sizeof(float) * n * out), "linear i8 n=%d out=%d in=%d: differs from generic", n,
              out, in);
        double err = 0;
        for (int t = 0; t < n; t++) {
            xs[t] = at_quantize_row(xq + (size_t)t * in, x + (size_t)t * in, in);
            for (int o = 0; o < out; o++) {
                double want = b[o];
                for (int i = 0; i < in; i++)
                    want += (double)xq[(size_t)t * in + i] * xs[t] * q[(size_t)o * in + i] * sc[o];
                err = fmax(err, fabs(y[t * out + o] - want));
            }
        }
        CHECK_ISA(err <= 1e-4 * sqrt(in), "linear i8 n=%d out=%d in=%d: error %g against the integer product", n,
              out, in, err);
        int diff = 0;
        for (int t = 0; t < n; t++) {
            K->linear(y1, x + (size_t)t * in, &W, b, 1);
            if (memcmp(y1, y + (size_t)t * out, sizeof(float) * out)) diff++;
        }
        CHECK_ISA(diff == 0, "linear i8 n=%d out=%d in=%d: %d rows depend on the batch", n, out, in, diff);
        free(x), free(w), free(b), free(y), free(yg), free(y1), free(sc), free(xs), free(q), free(xq), free(sums);
    }
}

/* int8 with every batch size from 1 to 70 (the many-row GEMM takes over from a few rows on,
 * with micro-tiles of 6 input rows and blocks of 64 W rows): bit-identical to the generic
 * kernel in both layouts, with and without bias, for row counts that fill no 16-row panel
 * and column counts that fill no 64-byte chunk (or no 4-byte group). */
static void test_linear_i8_batches(void) {
    const at_kernels *K = at_k();
    int shapes[][2] = {{37, 100}, {64, 64}, {130, 257}, {17, 3}, {80, 131}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int out = shapes[s][0], in = shapes[s][1], N = 70;
        float *x = malloc(sizeof(float) * N * in), *w = malloc(sizeof(float) * out * in), *b = malloc(sizeof(float) * out);
        float *y = malloc(sizeof(float) * N * out), *yg = malloc(sizeof(float) * N * out), *sc = malloc(sizeof(float) * out);
        int8_t *q = malloc((size_t)out * in);
        fill(x, (size_t)N * in, 1), fill(w, (size_t)out * in, 0.3f), fill(b, out, 1);
        for (int t = 0; t < N; t += 9) x[(size_t)t * in] = 3; /* a large value: some inputs quantize to +127 */
        for (int o = 0; o < out; o++) sc[o] = at_quantize_row(q + (size_t)o * in, w + (size_t)o * in, in);
        int32_t *sums = at_matrix_i8_sums(q, out, in);
        at_matrix W = {.data = q, .dtype = AT_I8, .rows = out, .cols = in, .scale = sc, .wsum = sums}, P = W;
        void *buf = at_matrix_pack(&P);
        int bad = 0, first = 0;
        for (int layout = 0; layout < 2 && buf; layout++)
            for (int n = 1; n <= N; n++) {
                const float *bias = n % 2 ? b : NULL;
                K->linear(y, x, layout ? &P : &W, bias, n);
                at_kernels_generic.linear(yg, x, &W, bias, n);
                if (memcmp(y, yg, sizeof(float) * n * out) && !bad++) first = n + 1000 * layout;
            }
        CHECK_ISA(buf && bad == 0, "linear i8 %dx%d: %d batch sizes differ from generic (first: n=%d%s)", out, in, bad,
                  first % 1000, first >= 1000 ? ", packed" : "");
        free(buf), free(x), free(w), free(b), free(y), free(yg), free(sc), free(q), free(sums);
    }
}

/* The packed layout: every row reads back unchanged, the padding is zero, and a linear
 * layer gives bit-identical results packed or row-major, in every dtype, with row counts
 * that fill no whole group and column counts that fill no whole chunk. */
static void test_packed(void) {
    const at_kernels *K = at_k();
    int shapes[][3] = {{1, 1, 1}, {1, 5, 70}, {3, 17, 33}, {1, 512, 512}, {7, 130, 257},
                       {1, 37, 100}, {6, 48, 2048}, {64, 40, 72}, {1, 130, 16}, {2, 9, 129},
                       {100, 130, 40}, {1, 2050, 513}}; /* the last one packs in parallel (over 4 MiB in f32) */
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int n = shapes[s][0], out = shapes[s][1], in = shapes[s][2];
        float *x = malloc(sizeof(float) * n * in), *w = malloc(sizeof(float) * out * in);
        float *b = malloc(sizeof(float) * out), *y = malloc(sizeof(float) * n * out);
        float *yp = malloc(sizeof(float) * n * out), *r0 = malloc(sizeof(float) * in), *r1 = malloc(sizeof(float) * in);
        uint16_t *wh = malloc(2 * (size_t)out * in);
        int8_t *q = malloc((size_t)out * in);
        float *sc = malloc(sizeof(float) * out);
        fill(x, (size_t)n * in, 1), fill(w, (size_t)out * in, 0.2f), fill(b, out, 1);
        for (size_t i = 0; i < (size_t)out * in; i++) wh[i] = at_f32_to_f16_1(w[i]);
        for (int o = 0; o < out; o++) sc[o] = at_quantize_row(q + (size_t)o * in, w + (size_t)o * in, in);
        int32_t *sums = at_matrix_i8_sums(q, out, in);
        const void *data[3] = {w, wh, q};
        for (int dtype = 0; dtype < 3; dtype++) {
            const char *dn = dtype == AT_F32 ? "f32" : dtype == AT_F16 ? "f16" : "i8";
            at_matrix W = {.data = data[dtype], .dtype = dtype, .rows = out, .cols = in};
            if (dtype == AT_I8) W.scale = sc, W.wsum = sums;
            at_matrix P = W;
            void *buf = at_matrix_pack(&P);
            CHECK_ISA(buf && P.packed, "pack %s %dx%d", dn, out, in);
            if (!buf) continue;
            int rows_same = 1;
            for (int o = 0; o < out; o++) {
                at_matrix_row(r0, &W, o), at_matrix_row(r1, &P, o);
                rows_same &= !memcmp(r0, r1, sizeof(float) * in);
            }
            CHECK_ISA(rows_same, "pack %s %dx%d: a row reads back changed", dn, out, in);
            /* padding: everything the rows did not fill */
            const size_t es = (size_t)at_dtype_size(dtype), total = at_matrix_elems(&P) * es;
            size_t nonzero = 0, filled = (size_t)out * in * es, zero_bytes = 0;
            for (size_t i = 0; i < total; i++) zero_bytes += ((unsigned char *)buf)[i] == 0;
            for (size_t i = 0; i < filled; i++) nonzero += ((const unsigned char *)data[dtype])[i] != 0;
            CHECK_ISA(total - zero_bytes == nonzero, "pack %s %dx%d: %zu non-zero bytes, the rows have %zu", dn,
                      out, in, total - zero_bytes, nonzero);
            for (int with_bias = 0; with_bias < 2; with_bias++) {
                K->linear(y, x, &W, with_bias ? b : NULL, n);
                K->linear(yp, x, &P, with_bias ? b : NULL, n);
                CHECK_ISA(!memcmp(y, yp, sizeof(float) * n * out), "linear %s n=%d out=%d in=%d bias=%d: packed differs",
                          dn, n, out, in, with_bias);
                /* swish in the tiles (at_linear_act) gives the numbers of linear, then swish */
                at_activate(y, (size_t)n * out, AT_ACT_SWISH);
                for (int packed = 0; packed < 2; packed++) {
                    at_linear_act(yp, x, packed ? &P : &W, with_bias ? b : NULL, n, AT_ACT_SWISH);
                    CHECK_ISA(!memcmp(y, yp, sizeof(float) * n * out),
                              "linear + swish %s n=%d out=%d in=%d bias=%d packed=%d: differs from swish after",
                              dn, n, out, in, with_bias, packed);
                }
            }
            free(buf);
        }
        free(x), free(w), free(b), free(y), free(yp), free(r0), free(r1), free(wh), free(q), free(sc), free(sums);
    }
}

/* Degenerate int8 inputs: a row whose max is subnormal or tiny quantizes to zeros (127 / max
 * would overflow to inf, and 0 * inf is NaN), so the output is the bias; a row with NaN or
 * infinity gives NaN outputs, never an undefined float-to-int8 conversion. Every ISA agrees. */
static void test_linear_i8_degenerate(void) {
    enum { IN = 45, OUT = 3, N = 6 }; /* 45: the SIMD paths have a scalar tail */
    float w[OUT * IN], b[OUT] = {0.5f, -1, 2}, x[N * IN], y[N * OUT], yg[N * OUT], sc[OUT];
    int8_t q[OUT * IN];
    fill(w, OUT * IN, 1);
    for (int o = 0; o < OUT; o++) sc[o] = at_quantize_row(q + o * IN, w + o * IN, IN);
    int32_t *sums = at_matrix_i8_sums(q, OUT, IN);
    at_matrix W = {.data = q, .dtype = AT_I8, .rows = OUT, .cols = IN, .scale = sc, .wsum = sums};
    const float row_max[N] = {1e-45f /* subnormal */, 1e-38f, 1e-31f, NAN, INFINITY, 1e-20f};
    for (int t = 0; t < N; t++)
        for (int i = 0; i < IN; i++) x[t * IN + i] = i % 3 ? 0.0f : row_max[t] * (i % 2 ? -1 : 1);
    x[1 * IN + 7] = 5e-39f; /* a subnormal next to zeros, not at a multiple of 3 */
    for (int i = 0; i < IN; i++) x[3 * IN + i] = x[4 * IN + i] = 0.25f;
    x[3 * IN + 41] = NAN, x[4 * IN + 21] = -INFINITY; /* followed by finite values */
    at_k()->linear(y, x, &W, b, N);
    at_kernels_generic.linear(yg, x, &W, b, N);
    int bias_rows = 1, nan_rows = 1, same = 1;
    for (int t = 0; t < N; t++)
        for (int o = 0; o < OUT; o++) {
            float v = y[t * OUT + o];
            if (t < 3 && v != b[o]) bias_rows = 0;
            if ((t == 3 || t == 4) && !isnan(v)) nan_rows = 0;
            if (!(v == yg[t * OUT + o] || (isnan(v) && isnan(yg[t * OUT + o])))) same = 0;
        }
    CHECK_ISA(bias_rows, "linear i8: rows with max |x| below 1e-30 give the bias");
    CHECK_ISA(nan_rows, "linear i8: rows with NaN or inf give NaN");
    CHECK_ISA(same, "linear i8 degenerate rows: differs from generic");
    int8_t qr[IN];
    CHECK_ISA(at_quantize_row(qr, x + 5 * IN, IN) > 0 && qr[0] == 127 && qr[3] == -127,
          "quantize_row: a row with max 1e-20 is quantized normally");
    CHECK_ISA(at_quantize_row(qr, x + IN, IN) == 0 && qr[0] == 0 && qr[7] == 0, "quantize_row: subnormal row is zero");
    free(sums);
}

static void test_small_kernels(void) {
    /* layernorm with residual */
    int n = 3, d = 50;
    float x[150], r[150], g[50], b[50], x0[150];
    fill(x, 150, 3), fill(r, 150, 1), fill(g, 50, 1), fill(b, 50, 1);
    memcpy(x0, x, sizeof x);
    at_add_layernorm(x, r, g, b, n, d, 1e-5f);
    double err = 0;
    for (int t = 0; t < n; t++) {
        double mean = 0, var = 0;
        for (int i = 0; i < d; i++) mean += x0[t * d + i] + r[t * d + i];
        mean /= d;
        for (int i = 0; i < d; i++) var += pow(x0[t * d + i] + r[t * d + i] - mean, 2);
        var /= d;
        for (int i = 0; i < d; i++) {
            double want = (x0[t * d + i] + r[t * d + i] - mean) / sqrt(var + 1e-5) * g[i] + b[i];
            err = fmax(err, fabs(x[t * d + i] - want));
        }
    }
    CHECK_ISA(err < 1e-5, "add_layernorm: error %g", err);

    /* several rows at once give each row exactly what it gets alone (the sums of 8 rows run
     * side by side, in each row's own order), for every row count and in the last, short group */
    {
        enum { N = 21, D = 77 };
        static float xs[N * D], rs[N * D], gs[D], bs[D], one[D];
        fill(xs, N * D, 4), fill(rs, N * D, 1), fill(gs, D, 1), fill(bs, D, 1);
        for (int i = 0; i < D; i += 5) xs[i] = 1e-12f, xs[D + i] = 3e4f; /* wide ranges: rounding matters */
        int rows_bad = 0;
        for (int rows = 1; rows <= N; rows += 4) {
            float *y = malloc(sizeof(float) * rows * D);
            memcpy(y, xs, sizeof(float) * rows * D);
            at_add_layernorm(y, rs, gs, bs, rows, D, 1e-5f);
            for (int t = 0; t < rows; t++) {
                memcpy(one, xs + t * D, sizeof one);
                at_add_layernorm(one, rs + t * D, gs, bs, 1, D, 1e-5f);
                rows_bad += memcmp(one, y + t * D, sizeof one) != 0;
            }
            free(y);
        }
        CHECK_ISA(rows_bad == 0, "add_layernorm: %d rows differ from the same row normalized alone", rows_bad);
    }

    /* activations */
    float a[5] = {-3, -0.5f, 0, 0.7f, 4}, s[5], rl[5], ge[5];
    memcpy(s, a, sizeof a), memcpy(rl, a, sizeof a), memcpy(ge, a, sizeof a);
    at_activate(s, 5, AT_ACT_SWISH), at_activate(rl, 5, AT_ACT_RELU), at_activate(ge, 5, AT_ACT_GELU);
    double es = 0, er = 0, eg = 0;
    for (int i = 0; i < 5; i++) {
        es = fmax(es, fabs(s[i] - a[i] / (1 + exp(-a[i]))));
        er = fmax(er, fabs(rl[i] - (a[i] > 0 ? a[i] : 0)));
        eg = fmax(eg, fabs(ge[i] - 0.5 * a[i] * (1 + erf(a[i] / sqrt(2)))));
    }
    CHECK_ISA(es < 1e-6 && er == 0 && eg < 1e-6, "activations: swish %g relu %g gelu %g", es, er, eg);

    /* softmax, including -inf entries and an all -inf row */
    float sm[4] = {1, 2, -INFINITY, 3}, dead[2] = {-INFINITY, -INFINITY};
    at_softmax(sm, 4);
    double z = exp(1) + exp(2) + exp(3);
    CHECK_ISA(fabs(sm[0] - exp(1) / z) < 1e-7 && sm[2] == 0 && fabs(sm[3] - exp(3) / z) < 1e-7, "softmax");
    at_softmax(dead, 2);
    CHECK_ISA(dead[0] == 0 && dead[1] == 0, "softmax of an all -inf row is zeros, not NaN");

    /* argmax: first of equal maxima, like torch.argmax */
    float am[5] = {1, 5, 2, 5, -1};
    CHECK_ISA(at_argmax(am, 5) == 1, "argmax picks the first maximum");
}

/* The greedy rule, written out: the first index of the largest value; NaN never wins (and a
 * NaN first element is never replaced) */
static int naive_argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* One pattern of argmax inputs: kind 0 random, 1 few distinct values (ties), 2 NaNs and
 * -inf sprinkled, 3 signed zeros and -inf, 4 all -inf, 5 the maximum in the last element,
 * 6 ties at the maximum far apart, 7 a NaN first */
static void argmax_input(float *x, int n, int kind) {
    for (int i = 0; i < n; i++) {
        const float r = frand();
        switch (kind) {
        case 1: x[i] = (float)(int)(r * 3); break;
        case 2: x[i] = r < -0.8f ? NAN : r > 0.8f ? -INFINITY : r; break;
        case 3: x[i] = r < -0.5f ? -INFINITY : r < 0 ? -0.0f : 0.0f; break;
        case 4: x[i] = -INFINITY; break;
        default: x[i] = r; break;
        }
    }
    if (kind == 5) x[n - 1] = 2;
    if (kind == 6) x[n / 3] = x[n - 1] = 2, x[n / 2] = NAN;
    if (kind == 7) x[0] = NAN;
}

/* add_scalar and first_above (beam search's scans) against their loops, on argmax's inputs
 * (ties, NaN, -inf, signed zeros) at every length up to 200 and a vocabulary's, every
 * alignment; thresholds below, at and above values of the row, and NaN. */
static void test_row_scans(void) {
    enum { MAXN = 58101, KINDS = 8 };
    float *buf = malloc(sizeof(float) * (MAXN + 16)), *sum = malloc(sizeof(float) * MAXN);
    float *want = malloc(sizeof(float) * MAXN);
    static const int big[] = {255, 256, 257, 1000, 4099, MAXN};
    int bad_add = 0, bad_first = 0, hits = 0;
    for (int c = 0; c < 200 + (int)(sizeof big / sizeof *big); c++) {
        const int n = c < 200 ? c + 1 : big[c - 200];
        for (int kind = 0; kind < KINDS; kind++) {
            float *x = buf + (n + kind) % 16;
            argmax_input(x, n, kind);
            const float add = kind % 3 == 0 ? 0.0f : kind % 3 == 1 ? 0.75f : -0.75f;
            for (int i = 0; i < n; i++) want[i] = x[i] + add;
            at_k()->add_scalar(sum, x, add, n);
            bad_add += memcmp(sum, want, sizeof(float) * n) != 0;
            const float thrs[] = {-INFINITY, -2, x[n / 2] + add, x[n - 1] + add, 1.5f, 2 + add, INFINITY, NAN};
            for (size_t t = 0; t < sizeof thrs / sizeof *thrs; t++) {
                int first = n;
                for (int i = 0; i < n; i++)
                    if (x[i] + add > thrs[t]) {
                        first = i;
                        break;
                    }
                hits += first < n;
                bad_first += at_k()->first_above(x, n, add, thrs[t]) != first;
            }
        }
    }
    CHECK_ISA(bad_add == 0, "add_scalar: %d rows differ from the loop", bad_add);
    CHECK_ISA(bad_first == 0 && hits > 1000, "first_above: %d answers differ from the loop (%d hits)", bad_first, hits);
    free(buf), free(sum), free(want);
}

/* The set's argmax (and at_argmax) against the loop: lengths 1..200 and a vocabulary's, every
 * alignment within a vector, ties, NaN, -inf and signed zeros. */
static void test_argmax(void) {
    enum { MAXN = 58101, KINDS = 8 };
    float *buf = malloc(sizeof(float) * (MAXN + 16));
    static const int big[] = {255, 256, 257, 1000, 4099, MAXN};
    int bad = 0, cases = 0, nan_first = 0;
    for (int c = 0; c < 200 + (int)(sizeof big / sizeof *big); c++) {
        const int n = c < 200 ? c + 1 : big[c - 200];
        for (int kind = 0; kind < KINDS; kind++) {
            const int off = (n + kind) % 16;
            float *x = buf + off;
            argmax_input(x, n, kind);
            const int want = naive_argmax(x, n), got = at_k()->argmax(x, n), via = at_argmax(x, n);
            if (got != want || via != want) {
                if (bad++ < 5) fprintf(stderr, "[%s] argmax n=%d kind %d offset %d: %d (at_argmax %d), want %d\n", isa_name, n, kind, off, got, via, want);
            }
            nan_first += x[0] != x[0] && want == 0;
            cases++;
        }
    }
    CHECK_ISA(bad == 0 && cases > 1600 && nan_first > 200, "argmax: %d of %d inputs differ from the loop", bad, cases);
    free(buf);
}

/* The old order: one head at a time, with the table's dot and axpy. */
static void attention_per_head(const at_attention_args *a, int heads) {
    const at_kernels *K = at_k();
    for (int h = 0; h < heads; h++) {
        float *sc = a->scratch + (size_t)h * a->s_n;
        for (int t = 0; t < a->t_n; t++) {
            const float *qt = a->q + (size_t)t * a->ld_q + (size_t)h * a->hd;
            const int vis = a->causal ? (a->q_pos0 + t + 1 < a->s_n ? a->q_pos0 + t + 1 : a->s_n) : a->s_n;
            for (int s = 0; s < vis; s++) sc[s] = K->dot(qt, a->k + (size_t)s * a->ld_kv + (size_t)h * a->hd, a->hd);
            at_softmax(sc, vis);
            float *o = a->out + (size_t)t * a->ld_o + (size_t)h * a->hd;
            for (int j = 0; j < a->hd; j++) o[j] = 0;
            for (int s = 0; s < vis; s++) K->axpy(o, sc[s], a->v + (size_t)s * a->ld_kv + (size_t)h * a->hd, a->hd);
        }
    }
}

/* at_attention (all heads together, in heads' four-wide dot products) gives bit for bit the
 * outputs of one head at a time over the set's dot and axpy: head counts 1..9 and 16, head
 * sizes that are and are not whole vectors, keys wider than the heads (ld_kv > d); and so
 * does at_attention_run on the same keys and values stored head by head (kv_h). */
static void test_attention_per_head(void) {
    int cases[][5] = {/* t_n, s_n, heads, hd, causal */
                      {1, 20, 8, 64, 0}, {1, 17, 8, 64, 1}, {3, 9, 4, 16, 0}, {5, 5, 3, 20, 1}, {1, 33, 5, 7, 0},
                      {2, 12, 16, 32, 0}, {1, 1, 1, 64, 0}, {4, 30, 9, 24, 1}, {1, 6, 6, 100, 0}, {2, 3, 7, 1, 0}};
    int bad = 0;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const int tn = cases[c][0], sn = cases[c][1], H = cases[c][2], hd = cases[c][3], causal = cases[c][4];
        const int d = H * hd, ld = d + 3, pos0 = causal ? sn - tn : 0;
        float *q = malloc(4 * tn * d), *k = malloc(4 * sn * ld), *v = malloc(4 * sn * ld);
        float *o = malloc(4 * tn * d), *o2 = malloc(4 * tn * d), *scratch = malloc(4 * H * sn);
        fill(q, tn * d, 2), fill(k, sn * ld, 2), fill(v, sn * ld, 1);
        at_attention(o, d, q, d, k, v, ld, tn, sn, H, hd, causal, pos0, NULL, scratch);
        const at_attention_args a = {o2, q, k, v, NULL, scratch, d, d, ld, tn, sn, hd, causal, pos0, NULL, 0, 0, hd};
        attention_per_head(&a, H);
        if (memcmp(o, o2, sizeof(float) * tn * d)) {
            if (bad++ < 3) fprintf(stderr, "[%s] attention t=%d s=%d heads=%d hd=%d differs from one head at a time\n", isa_name, tn, sn, H, hd);
        }
        /* the same keys and values stored head by head ([H][s_n][hd], kv_h = s_n * hd) */
        float *ka = malloc(4 * sn * d), *va = malloc(4 * sn * d);
        for (int s = 0; s < sn; s++)
            for (int h = 0; h < H; h++)
                for (int j = 0; j < hd; j++)
                    ka[(h * sn + s) * hd + j] = k[s * ld + h * hd + j], va[(h * sn + s) * hd + j] = v[s * ld + h * hd + j];
        const at_attention_args apart = {o2, q, ka, va, NULL, scratch, d, d, hd, tn, sn, hd, causal, pos0, NULL, 0, 0,
                                         (ptrdiff_t)sn * hd};
        at_attention_run(&apart, H);
        if (memcmp(o, o2, sizeof(float) * tn * d)) {
            if (bad++ < 3) fprintf(stderr, "[%s] attention t=%d s=%d heads=%d hd=%d differs with heads apart\n", isa_name, tn, sn, H, hd);
        }
        free(q), free(k), free(v), free(o), free(o2), free(scratch), free(ka), free(va);
    }
    CHECK_ISA(bad == 0, "attention: %d shapes differ bit for bit from one head at a time", bad);
}

/* T5's pieces: the RMS norm and GELU's tanh approximation against double-precision code. */
static void test_rmsnorm_gelu_tanh(void) {
    enum { N = 3, D = 37 };
    float x[N * D], g[D], y[N * D];
    fill(x, N * D, 4), fill(g, D, 2);
    memcpy(y, x, sizeof x);
    at_rmsnorm(y, g, N, D, 1e-6f);
    double err = 0;
    for (int r = 0; r < N; r++) {
        double ss = 0;
        for (int j = 0; j < D; j++) ss += (double)x[r * D + j] * x[r * D + j];
        for (int j = 0; j < D; j++) err = fmax(err, fabs(y[r * D + j] - g[j] * x[r * D + j] / sqrt(ss / D + 1e-6)));
    }
    CHECK_ISA(err < 1e-5, "rmsnorm differs by %g", err);
    memcpy(y, x, sizeof x);
    at_activate(y, N * D, AT_ACT_GELU_TANH);
    err = 0;
    for (int i = 0; i < N * D; i++) {
        const double v = x[i], want = 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
        err = fmax(err, fabs(y[i] - want));
    }
    CHECK_ISA(err < 1e-5, "gelu_tanh differs by %g", err);
}

/* The score bias of head h, query row t, key s in test_attention's cases: none (kind 0), a
 * full [H, t_n, s_n] array (1), or a table by distance s - t read with a negative row
 * stride (2: T5's encoder; t_n = s_n). */
static const float *bias_of(const float *bias, int kind, int tn, int sn, ptrdiff_t *bh, ptrdiff_t *bt) {
    *bh = kind == 1 ? (ptrdiff_t)tn * sn : 2 * sn - 1, *bt = kind == 1 ? sn : -1;
    return kind == 1 ? bias : kind == 2 ? bias + (sn - 1) : NULL;
}

/* How far attention's results (a->out, and a->probs unless NULL) are from a naive version in
 * double: err[0] probabilities, err[1] outputs, err[2] rows' sums of probabilities off 1,
 * err[3] the largest probability past the causal limit. */
static void attention_errors(const at_attention_args *a, int H, double err[4]) {
    const int tn = a->t_n, sn = a->s_n, hd = a->hd;
    double *sc = malloc(sizeof(double) * sn);
    err[0] = err[1] = err[2] = err[3] = 0;
    for (int h = 0; h < H; h++)
        for (int t = 0; t < tn; t++) {
            const int vis = a->causal ? (a->q_pos0 + t + 1 < sn ? a->q_pos0 + t + 1 : sn) : sn;
            double mx = -1e300, sum = 0, rowsum = 0;
            for (int s = 0; s < vis; s++) {
                sc[s] = a->bias ? a->bias[h * a->bias_h + t * a->bias_t + s] : 0;
                for (int j = 0; j < hd; j++)
                    sc[s] += (double)a->q[(size_t)t * a->ld_q + h * hd + j] * a->k[(size_t)s * a->ld_kv + h * hd + j];
                mx = fmax(mx, sc[s]);
            }
            for (int s = 0; s < vis; s++) sum += (sc[s] = exp(sc[s] - mx));
            for (int s = 0; a->probs && s < sn; s++) {
                double want = s < vis ? sc[s] / sum : 0, got = a->probs[((size_t)h * tn + t) * sn + s];
                err[0] = fmax(err[0], fabs(got - want));
                rowsum += got;
                if (s >= vis) err[3] = fmax(err[3], fabs(got));
            }
            if (a->probs) err[2] = fmax(err[2], fabs(rowsum - 1));
            for (int j = 0; j < hd; j++) {
                double want = 0;
                for (int s = 0; s < vis; s++) want += sc[s] / sum * a->v[(size_t)s * a->ld_kv + h * hd + j];
                err[1] = fmax(err[1], fabs(a->out[(size_t)t * a->ld_o + h * hd + j] - want));
            }
        }
    free(sc);
}

/* Multi-head attention against a naive version; causal and not; probabilities returned;
 * with a score bias (at_attention_bias) and without. */
static void test_attention(void) {
    int cases[][6] = {/* t_n, s_n, heads, hd, causal, bias kind */
                      {1, 1, 1, 4, 0, 0}, {5, 9, 4, 8, 0, 0}, {7, 7, 2, 16, 1, 0}, {1, 12, 8, 64, 1, 0},
                      {3, 40, 3, 24, 0, 0}, {5, 9, 4, 8, 0, 1}, {1, 12, 8, 64, 1, 1}, {9, 9, 5, 12, 0, 2},
                      {6, 6, 2, 16, 1, 2}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        int tn = cases[c][0], sn = cases[c][1], H = cases[c][2], hd = cases[c][3], causal = cases[c][4];
        const int kind = cases[c][5];
        int d = H * hd, pos0 = causal ? sn - tn : 0;
        float *q = malloc(4 * tn * d), *k = malloc(4 * sn * d), *v = malloc(4 * sn * d);
        float *o = malloc(4 * tn * d), *p = malloc(4 * H * tn * sn), *scratch = malloc(4 * H * sn);
        float *bias = malloc(4 * H * (tn * sn + 2 * sn));
        fill(q, tn * d, 1), fill(k, sn * d, 1), fill(v, sn * d, 1), fill(bias, H * (tn * sn + 2 * sn), 2);
        ptrdiff_t bh, bt;
        const float *b = bias_of(bias, kind, tn, sn, &bh, &bt);
        at_attention_bias(o, d, q, d, k, v, d, tn, sn, H, hd, causal, pos0, p, scratch, b, bh, bt);
        const at_attention_args a = {o, q, k, v, p, NULL, d, d, d, tn, sn, hd, causal, pos0, b, bh, bt, hd};
        double e[4];
        attention_errors(&a, H, e);
        CHECK_ISA(e[0] < 1e-6 && e[1] < 1e-5 && e[2] < 1e-5 && e[3] == 0,
              "attention t=%d s=%d heads=%d hd=%d causal=%d bias %d: probs %g out %g rowsum %g masked %g", tn,
              sn, H, hd, causal, kind, e[0], e[1], e[2], e[3]);
        free(q), free(k), free(v), free(o), free(p), free(scratch), free(bias);
    }
}

/* Long sentences (at least AT_ATTENTION_GEMM_MIN rows and keys) run as matrix products
 * (at_attention_gemm): against the naive version in double, with and without probabilities
 * (the same outputs bit for bit, as with keys and values stored head by head), causal, with
 * either bias, head sizes that are and are not whole vectors or panels, query blocks cut
 * short, keys wider than the heads (ld_kv > d). */
static void test_attention_gemm(void) {
    rng_state = 12345; /* its own data, whatever the tests before it drew */
    int cases[][6] = {/* t_n, s_n, heads, hd, causal, bias kind */
                      {128, 128, 2, 64, 0, 0}, {200, 333, 3, 16, 0, 0}, {250, 250, 2, 64, 1, 0},
                      {130, 130, 4, 20, 0, 2}, {150, 150, 2, 64, 1, 2}, {129, 140, 1, 7, 0, 1},
                      {300, 300, 6, 64, 0, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const int tn = cases[c][0], sn = cases[c][1], H = cases[c][2], hd = cases[c][3], causal = cases[c][4];
        const int kind = cases[c][5], d = H * hd, ld = d + 5, pos0 = causal ? sn - tn : 0;
        float *q = malloc(4 * tn * d), *k = malloc(4 * sn * ld), *v = malloc(4 * sn * ld);
        float *o = malloc(4 * tn * d), *o2 = malloc(4 * tn * d), *p = malloc(4 * (size_t)H * tn * sn);
        float *scratch = malloc(4 * H * sn), *bias = malloc(4 * (size_t)H * (tn * sn + 2 * sn));
        fill(q, tn * d, 1), fill(k, sn * ld, 1), fill(v, sn * ld, 1), fill(bias, H * (tn * sn + 2 * sn), 2);
        ptrdiff_t bh, bt;
        const float *b = bias_of(bias, kind, tn, sn, &bh, &bt);
        at_attention_bias(o, d, q, d, k, v, ld, tn, sn, H, hd, causal, pos0, p, scratch, b, bh, bt);
        at_attention_bias(o2, d, q, d, k, v, ld, tn, sn, H, hd, causal, pos0, NULL, scratch, b, bh, bt);
        const at_attention_args a = {o, q, k, v, p, NULL, d, d, ld, tn, sn, hd, causal, pos0, b, bh, bt, hd};
        double e[4];
        attention_errors(&a, H, e);
        /* heads stored apart ([H][s_n][hd]): the same outputs */
        float *ka = malloc(4 * (size_t)sn * d), *va = malloc(4 * (size_t)sn * d), *o3 = malloc(4 * tn * d);
        for (int s = 0; s < sn; s++)
            for (int h = 0; h < H; h++)
                for (int j = 0; j < hd; j++)
                    ka[(h * sn + s) * hd + j] = k[s * ld + h * hd + j], va[(h * sn + s) * hd + j] = v[s * ld + h * hd + j];
        const at_attention_args apart = {o3, q, ka, va, NULL, scratch, d, d, hd, tn, sn, hd, causal, pos0, b, bh, bt,
                                         (ptrdiff_t)sn * hd};
        at_attention_run(&apart, H);
        const int same = !memcmp(o, o2, 4 * (size_t)tn * d) && !memcmp(o, o3, 4 * (size_t)tn * d);
        /* probabilities within 2e-6: unscaled scores of 64 products reach |8|, and f32's
         * error there (~1e-6) moves p by up to p(1 - p) times it (1.06e-6 seen) */
        CHECK_ISA(e[0] < 2e-6 && e[1] < 1e-5 && e[2] < 1e-5 && e[3] == 0 && same,
                  "GEMM attention t=%d s=%d heads=%d hd=%d causal=%d bias %d: probs %g out %g rowsum %g masked %g%s",
                  tn, sn, H, hd, causal, kind, e[0], e[1], e[2], e[3],
                  same ? "" : ", outputs differ without probabilities or with heads apart");
        free(q), free(k), free(v), free(o), free(o2), free(o3), free(p), free(scratch), free(bias), free(ka), free(va);
    }
}

/* AT_ACT_GELU_VEC (the set's vector erfc) against erfc in double over [-12, 12]: absolute
 * error (relative above 1), relative error down to -5, every tail length of the vector loop,
 * the special values. */
static void test_gelu_vec(void) {
    enum { N = 4001 };
    static float x[N];
    for (int i = 0; i < N; i++) x[i] = -12.0f + 24.0f * (float)i / (N - 1);
    double worst = 0, tail = 0;
    for (int n = N - 17; n <= N; n++) {
        float *y = malloc(sizeof(float) * n);
        memcpy(y, x, sizeof(float) * n);
        at_activate(y, (size_t)n, AT_ACT_GELU_VEC);
        for (int i = 0; i < n; i++) {
            const double want = 0.5 * x[i] * erfc(-x[i] / sqrt(2));
            worst = fmax(worst, fabs(y[i] - want) / fmax(fabs(want), 1));
            if (x[i] > -5) tail = fmax(tail, fabs(y[i] - want) / fmax(fabs(want), 1e-30));
        }
        free(y);
    }
    float sp[4] = {0.0f, NAN, INFINITY, -INFINITY};
    at_activate(sp, 4, AT_ACT_GELU_VEC);
    /* libm's 1 + erff(x) (the generic set's) cancels in the left tail: only the vector sets
     * keep relative accuracy there */
    const int vec = strcmp(isa_name, "generic") != 0;
    CHECK_ISA(worst < 2e-7 && (!vec || tail < 1e-5) && sp[0] == 0 && isnan(sp[1]) && sp[2] == INFINITY && isnan(sp[3]),
              "gelu (vector erfc): error %g (relative above 1), relative above -5 %g; gelu(0, nan, inf, -inf) = "
              "%g %g %g %g", worst, tail, sp[0], sp[1], sp[2], sp[3]);
}

int main(void) {
    const char *names[] = {"generic", "avx2", "avx512"};
    char err[256];
    int ran = 0;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        if (!at_isa_by_name(names[i])) {
            printf("skip %s: not supported by this CPU or build\n", names[i]);
            continue;
        }
        setenv("ATTEND_ISA", names[i], 1);
        if (at_kernels_init(err, sizeof err)) {
            printf("FAIL %s\n", err);
            failed++;
            continue;
        }
        isa_name = names[i];
        for (int threads = 1; threads <= 2; threads++) {
            at_set_threads(threads);
            int before = failed;
            test_f16();
            test_dot_axpy();
            test_linear();
            test_linear_tile_rows();
            test_linear_chain();
            test_swish();
            test_linear_i8();
            test_linear_i8_batches();
            test_linear_i8_degenerate();
            test_packed();
            test_small_kernels();
            test_argmax();
            test_row_scans();
            test_attention();
            test_attention_gemm();
            test_gelu_vec();
            test_attention_per_head();
            test_rmsnorm_gelu_tanh();
            test_bf16();
            printf("%s %s, %d thread%s\n", failed == before ? "ok  " : "FAIL", names[i], threads,
                   threads > 1 ? "s" : "");
        }
        ran++;
    }
    /* CPUs with AMX take its tiles for int8 from 8 rows on (the runs above); the VNNI GEMM
     * on the same VNNI panels is what other AVX-512 VNNI CPUs (Zen 4, Ice Lake) run */
    if (at_isa_by_name("avx512") && at_cpu_has("amx")) {
        setenv("ATTEND_ISA", "avx512", 1);
        at_cpu_mask("amx");
        if (!at_kernels_init(err, sizeof err)) {
            isa_name = "avx512 without AMX";
            for (int threads = 1; threads <= 2; threads++) {
                at_set_threads(threads);
                int before = failed;
                test_linear_i8();
                test_linear_i8_batches();
                test_linear_i8_degenerate();
                test_packed();
                printf("%s avx512 without AMX (int8), %d thread%s\n", failed == before ? "ok  " : "FAIL", threads,
                       threads > 1 ? "s" : "");
            }
        }
    } else {
        printf("skip avx512 with AMX: not supported by this CPU, OS or build\n");
    }
    /* AVX-512 CPUs without VNNI (Skylake-SP) take AVX2's int8 path inside the avx512 set */
    if (at_isa_by_name("avx512") && at_cpu_has("avx512vnni")) {
        setenv("ATTEND_ISA", "avx512", 1);
        at_cpu_mask("avx512vnni");
        if (!at_kernels_init(err, sizeof err)) {
            isa_name = "avx512 without VNNI";
            int before = failed;
            test_linear_i8();
            test_linear_i8_batches();
            test_linear_i8_degenerate();
            test_packed();
            printf("%s avx512 without VNNI (int8)\n", failed == before ? "ok  " : "FAIL");
        }
    }
    printf("%s avx512 with AVX-512 BF16 (bf16 kernel)\n", at_isa_by_name("avx512") && at_cpu_has("avx512bf16") ? "ran " : "skip");
    printf("%d passed, %d failed\n", passed, failed);
    return failed || !ran ? 1 : 0;
}
