/* bf16 compute's portable parts: rounding, the packed layout, and the reference linear
 * layer (the kernel is engine/kernels_bf16.c). */
#include "bf16.h"
#include "isa.h"

#include <string.h>

uint16_t at_f32_to_bf16_1(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1); /* round half to even */
    return (uint16_t)(u >> 16);
}

float at_bf16_to_f32_1(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

int at_bf16_available(void) { return at_cpu_has("avx512bf16") && at_k() == at_isa_by_name("avx512"); }

size_t at_matrix_bf16_bytes(const at_matrix *m) {
    const size_t panels = ((size_t)m->rows + AT_BF16_PANEL - 1) / AT_BF16_PANEL;
    return panels * at_bf16_pairs(m->cols) * AT_BF16_PANEL * 2 * sizeof(uint16_t);
}

typedef struct {
    const at_matrix *m, *p;
    uint16_t *dst;
} convert_args;

/* Element (r, c) of an f32 or f16 matrix, in any layout. */
static float element(const at_matrix *m, int r, int c) {
    const size_t i = at_matrix_index(m, r, c);
    return m->dtype == AT_F32 ? ((const float *)m->data)[i] : at_f16_to_f32_1(((const uint16_t *)m->data)[i]);
}

/* Panels [lo, hi): every element rounded into its pair slot, the padding zero. */
static void convert_panels(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const convert_args *a = ctx;
    const int cols = a->m->cols;
    for (int r = lo * AT_BF16_PANEL; r < hi * AT_BF16_PANEL; r++)
        for (int c = 0; c < cols + (cols & 1); c++)
            a->dst[at_bf16_index(a->p, r, c)] = r < a->m->rows && c < cols ? at_f32_to_bf16_1(element(a->m, r, c)) : 0;
}

void at_matrix_to_bf16_into(at_matrix *m, void *buf) {
    at_matrix p = *m;
    p.data = buf;
    p.dtype = AT_BF16;
    p.packed = AT_PACKED_BF16;
    const int panels = (m->rows + AT_BF16_PANEL - 1) / AT_BF16_PANEL;
    const convert_args a = {m, &p, buf};
    at_parallel_for(panels, at_matrix_bf16_bytes(m) >= ((size_t)1 << 20) ? at_threads() : 1, convert_panels, &a);
    *m = p;
}

void at_bf16_row(float *dst, const at_matrix *m, int r) {
    const uint16_t *d = m->data;
    for (int c = 0; c < m->cols; c++) dst[c] = at_bf16_to_f32_1(d[at_bf16_index(m, r, c)]);
}

void at_linear_bf16_ref(float *y, const float *x, const at_matrix *w, const float *b, int n) {
    const int in = w->cols, out = w->rows;
    const uint16_t *d = w->data;
    for (int t = 0; t < n; t++)
        for (int o = 0; o < out; o++) {
            float s = 0;
            for (int c = 0; c < in; c++)
                s += at_bf16_to_f32_1(at_f32_to_bf16_1(x[(size_t)t * in + c])) * at_bf16_to_f32_1(d[at_bf16_index(w, o, c)]);
            y[(size_t)t * out + o] = s + (b ? b[o] : 0.0f);
        }
}

void at_linear_bf16_any(float *y, const float *x, const at_matrix *w, const float *b, int n) {
    if (at_bf16_available()) at_linear_bf16(y, x, w, b, n);
    else at_linear_bf16_ref(y, x, w, b, n);
}

void at_linear_bf16_swish_any(float *y, const float *x, const at_matrix *w, const float *b, int n) {
    if (at_bf16_available()) {
        at_linear_bf16_swish(y, x, w, b, n);
        return;
    }
    at_linear_bf16_ref(y, x, w, b, n);
    at_k()->swish(y, (size_t)n * w->rows);
}
