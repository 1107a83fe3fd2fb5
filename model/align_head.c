/* The trained alignment head (issue 38; tools/train_align_head.py trains it): one attention
 * head beside the model, never part of translation. Its query projects the input of decoder
 * layer align_head_layer's cross-attention (the state after that layer's self-attention),
 * its key the encoder's output:
 *   A[t] = softmax_s((Wq x_t + bq) . (Wk m_s + bk) / sqrt(width))
 * Row t belongs to decoder position t, as a cross-attention row does (a view's `shift` reads
 * row t + 1 for target token t). Only computed when attention is captured. */
#include "align_head.h"

#include <math.h>
#include <stdlib.h>

/* a . b over n floats: eight running sums, so the compiler keeps several multiply-adds in
 * flight (and vectorises them) without reordering one long sum */
static float dot(const float *a, const float *b, int n) {
    float acc[8] = {0};
    int j = 0;
    for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; k++) acc[k] += a[j + k] * b[j + k];
    float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; j < n; j++) sum += a[j] * b[j];
    return sum;
}

/* out [width] = W [width, d] . x [d] + b */
static void project(const float *W, const float *b, const float *x, int width, int d, float *out) {
    for (int r = 0; r < width; r++) out[r] = dot(W + (size_t)r * d, x, d) + b[r];
}

int align_head_keys(const s2s_model *m, const float *X, enc_memory *mem) {
    const int width = m->c.align_head_width, d = m->c.d_model;
    free(mem->align_k);
    mem->align_k = NULL;
    if (width <= 0) return 0;
    mem->align_k = malloc(sizeof(float) * (size_t)mem->total * width + 1);
    if (!mem->align_k) return -1;
    for (int s = 0; s < mem->total; s++)
        project(m->align_k_w, m->align_k_b, X + (size_t)s * d, width, d, mem->align_k + (size_t)s * width);
    return 0;
}

void align_head_rows(const s2s_model *m, const enc_memory *mem, const dec_row *rows, int n, const float *in,
                     float *const *att_cross) {
    const int width = m->c.align_head_width, d = m->c.d_model, LH = m->c.dec_layers * m->c.dec_heads;
    float q[ALIGN_HEAD_MAX_WIDTH];
    const float scale = 1.0f / sqrtf((float)width);
    for (int b = 0; b < n; b++) {
        if (!att_cross[b]) continue;
        const int i = rows[b].sent, S = mem->len[i];
        const float *K = mem->align_k + (size_t)mem->off[i] * width;
        float *p = att_cross[b] + (size_t)LH * S, top = -INFINITY, sum = 0.0f;
        project(m->align_q_w, m->align_q_b, in + (size_t)b * d, width, d, q);
        for (int s = 0; s < S; s++) {
            p[s] = dot(q, K + (size_t)s * width, width) * scale;
            if (p[s] > top) top = p[s];
        }
        for (int s = 0; s < S; s++) sum += p[s] = expf(p[s] - top);
        for (int s = 0; s < S; s++) p[s] /= sum;
    }
}
