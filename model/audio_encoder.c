/* The speech encoder's input side (family->audio, Whisper): log-mel features through two
 * 1-D convolutions, each followed by GELU, then the stored position table; encoder.c runs
 * the layers after it as for text.
 *
 * A convolution of kernel 3 and padding 1 is a linear layer over three stacked input frames
 * (t - 1, t, t + 1; zeros outside): the exporter stores each kernel as a matrix
 * [d, 3 * channels], tap-major, so the engine's linear kernels (f32, f16, bf16, int8) run
 * it. The second convolution has stride 2: output frame t reads frames 2t - 1 .. 2t + 1.
 * GELU as the FFNs run it (sublayer.h: ffn_activation). */
#include "layers.h"

#include <stdlib.h>
#include <string.h>

/* cols [out_frames, 3 * ch]: row t holds input frames stride*t - 1, stride*t, stride*t + 1 of
 * x, each ch values (x_row(frame) gives a frame's values, or NULL outside). */
typedef struct {
    const float *x;
    int frames, ch;
    size_t frame_stride, ch_stride; /* where value c of frame f is: f * frame_stride + c * ch_stride */
} frames_view;

static void stack_frames(float *cols, const frames_view *v, int out_frames, int stride) {
    const int ch = v->ch;
    for (int t = 0; t < out_frames; t++)
        for (int k = 0; k < 3; k++) {
            float *dst = cols + ((size_t)t * 3 + k) * ch;
            const int f = stride * t + k - 1;
            if (f < 0 || f >= v->frames) {
                memset(dst, 0, sizeof(float) * (size_t)ch);
                continue;
            }
            const float *src = v->x + (size_t)f * v->frame_stride;
            if (v->ch_stride == 1) memcpy(dst, src, sizeof(float) * (size_t)ch);
            else
                for (int c = 0; c < ch; c++) dst[c] = src[(size_t)c * v->ch_stride];
        }
}

int encode_audio_input(const s2s_model *m, const float *mel, float *X) {
    const s2s_config *c = &m->c;
    const int d = c->d_model, mels = c->speech.n_mels, out = c->speech.n_frames, in = 2 * out;
    const size_t wide = (size_t)in * 3 * (mels > d ? mels : d);
    float *cols = malloc(sizeof(float) * wide), *h = malloc(sizeof(float) * (size_t)in * d);
    if (!cols || !h) {
        free(cols);
        free(h);
        return -1;
    }
    /* mel is [mels, in] (HF's layout): value c of frame f at c * in + f */
    const frames_view features = {mel, in, mels, 1, (size_t)in};
    stack_frames(cols, &features, in, 1);
    at_linear_act(h, cols, &m->conv1.w, m->conv1.b, in, AT_ACT_GELU_VEC);
    const frames_view hidden = {h, in, d, (size_t)d, 1};
    stack_frames(cols, &hidden, out, 2);
    at_linear_act(X, cols, &m->conv2.w, m->conv2.b, out, AT_ACT_GELU_VEC);
    float *row = h; /* a position row (the table may be f16 or int8) */
    for (int t = 0; t < out; t++) {
        const float *p = s2s_position(m, 0, t, row);
        float *x = X + (size_t)t * d;
        for (int j = 0; j < d; j++) x[j] += p[j];
    }
    free(cols);
    free(h);
    return 0;
}
