/* bf16 compute checks for test_kernels.c (it defines CHECK_ISA, frand, fill): rounding, the
 * packed layout, and the linear layer of the active set (AVX-512 BF16 kernel or the portable
 * reference) against double sums of the same bf16 products, on odd shapes and tails. */
#include "../engine/bf16.h"

static void test_bf16_rounding(void) {
    const float tie_even = 1.0f + 1.0f / 256, tie_odd = 1.0f + 3.0f / 256;
    CHECK_ISA(at_f32_to_bf16_1(tie_even) == 0x3f80, "bf16: 1+2^-8 rounds to 1.0 (even), got %04x",
              at_f32_to_bf16_1(tie_even));
    CHECK_ISA(at_f32_to_bf16_1(tie_odd) == 0x3f82, "bf16: 1+3*2^-8 rounds up to even, got %04x", at_f32_to_bf16_1(tie_odd));
    CHECK_ISA(isnan(at_bf16_to_f32_1(at_f32_to_bf16_1(NAN))), "bf16: NaN stays NaN");
    /* the kernel rounds its inputs the same way: one column, w = 1, y = bf16(x) exactly */
    float w1 = 1.0f, y = 0;
    at_matrix W = {&w1, AT_F32, 1, 1, NULL, NULL, 0};
    void *buf = at_alloc_weights(at_matrix_bf16_bytes(&W));
    at_matrix_to_bf16_into(&W, buf);
    at_k()->linear(&y, &tie_odd, &W, NULL, 1);
    CHECK_ISA(y == 1.0f + 1.0f / 64, "bf16 linear: input 1+3*2^-8 gives %.9g, want 1.015625 (nearest even)", y);
    free(buf);
}

/* One shape: W [out, in] from f32 (or f16 when f16), x [n, in]; every output within the
 * f32 summation error of the exact sum of the bf16 products, and each row equal, bit for
 * bit, to that row alone (batch independence: whichever tiles and thread parts it ran in). */
static void check_bf16_shape(int out, int in, int n, int f16, int swish) {
    float *w = malloc(sizeof(float) * out * in), *x = malloc(sizeof(float) * n * in), *b = malloc(sizeof(float) * out);
    float *y = malloc(sizeof(float) * n * out), *y1 = malloc(sizeof(float) * out), *row = malloc(sizeof(float) * in);
    uint16_t *h = malloc(2 * (size_t)out * in);
    fill(w, (size_t)out * in, 0.5f), fill(x, (size_t)n * in, 2.0f), fill(b, out, 1.0f);
    for (size_t i = 0; f16 && i < (size_t)out * in; i++) h[i] = at_f32_to_f16_1(w[i]);
    at_matrix W = {f16 ? (const void *)h : w, f16 ? AT_F16 : AT_F32, out, in, NULL, NULL, 0};
    void *buf = at_alloc_weights(at_matrix_bf16_bytes(&W));
    at_matrix_to_bf16_into(&W, buf);
    if (swish) at_linear_act(y, x, &W, b, n, AT_ACT_SWISH);
    else at_k()->linear(y, x, &W, b, n);
    int bad = 0, diff = 0;
    for (int o = 0; o < out; o++) {
        at_matrix_row(row, &W, o);
        const float src = f16 ? at_f16_to_f32_1(h[(size_t)o * in]) : w[(size_t)o * in];
        if (row[0] != at_bf16_to_f32_1(at_f32_to_bf16_1(src))) bad++;
        for (int t = 0; t < n; t++) {
            double s = 0, mag = 0;
            for (int c = 0; c < in; c++) {
                const double p = (double)at_bf16_to_f32_1(at_f32_to_bf16_1(x[(size_t)t * in + c])) * row[c];
                s += p, mag += fabs(p);
            }
            s += b[o];
            if (swish) s = s / (1 + exp(-s));
            if (fabs(y[(size_t)t * out + o] - s) > 1e-6 * (in + 4) * (mag + fabs(b[o])) + 1e-5) bad++;
        }
    }
    for (int t = 0; t < n; t++) {
        if (swish) at_linear_act(y1, x + (size_t)t * in, &W, b, 1, AT_ACT_SWISH);
        else at_k()->linear(y1, x + (size_t)t * in, &W, b, 1);
        if (memcmp(y1, y + (size_t)t * out, sizeof(float) * out)) diff++;
    }
    CHECK_ISA(bad == 0, "bf16 linear out=%d in=%d n=%d %s%s: %d outputs off", out, in, n, f16 ? "f16" : "f32",
              swish ? " swish" : "", bad);
    CHECK_ISA(diff == 0, "bf16 linear out=%d in=%d n=%d: %d rows differ from the row alone", out, in, n, diff);
    free(buf), free(w), free(x), free(b), free(y), free(y1), free(row), free(h);
}

static void test_bf16(void) {
    test_bf16_rounding();
    /* the next two split the input rows among threads (few panel groups, 24+ rows); the last
     * rounds its inputs on every thread (64 x 1280 inputs) */
    const int shapes[][3] = {{1, 1, 1}, {17, 3, 2}, {16, 64, 6}, {33, 63, 7}, {100, 130, 13}, {47, 512, 1}, {512, 257, 9},
                             {320, 320, 32}, {200, 96, 37}, {64, 1280, 64}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++)
        for (int f16 = 0; f16 < 2; f16++) check_bf16_shape(shapes[i][0], shapes[i][1], shapes[i][2], f16, 0);
    check_bf16_shape(70, 96, 5, 0, 1);
    check_bf16_shape(330, 128, 31, 0, 1);
}
