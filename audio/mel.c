/* mel: Whisper's log-mel features (mel.h). Frames are computed as soon as their samples are
 * there, so a stream holds a few hundred samples and the frames; the clamp to the global
 * maximum waits for the end. */
#include "mel.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fft.h"

#define MEL_FMAX 8000.0     /* Whisper's filters end here whatever the rate */
#define MEL_FLOOR 1e-10     /* log10 of the mel power is taken of at least this */
#define MEL_RANGE 8.0f      /* values end at most 8 decades below the largest */
#define MEL_PIECE 65536     /* samples appended to the stream's buffer at a time */
#define HALF (MEL_N_FFT / 2) /* the reflected samples before the first frame's centre */

/* ---------------------------------------------------------------------------------------
 * The filter bank */

/* Slaney's mel scale: linear to 1 kHz (15 mels), logarithmic above (27 mels per factor 6.4). */
static double hz_to_mel(double f) { return f < 1000.0 ? 3.0 * f / 200.0 : 15.0 + log(f / 1000.0) * 27.0 / log(6.4); }
static double mel_to_hz(double m) { return m < 15.0 ? 200.0 * m / 3.0 : 1000.0 * exp(log(6.4) / 27.0 * (m - 15.0)); }

void mel_filters(int n_mels, int n_fft, int rate, float *out) {
    const int bins = n_fft / 2 + 1;
    const double top = hz_to_mel(MEL_FMAX);
    for (int m = 0; m < n_mels; m++) {
        /* corners m, m + 1, m + 2 of n_mels + 2 evenly spaced in mels from 0 to top */
        const double lo = mel_to_hz(top * m / (n_mels + 1)), mid = mel_to_hz(top * (m + 1) / (n_mels + 1));
        const double hi = mel_to_hz(top * (m + 2) / (n_mels + 1)), norm = 2.0 / (hi - lo);
        for (int b = 0; b < bins; b++) {
            const double f = (double)(rate / 2) * b / (bins - 1); /* HF: linspace(0, rate // 2, bins) */
            const double up = (f - lo) / (mid - lo), down = (hi - f) / (hi - mid);
            const double w = up < down ? up : down;
            out[(size_t)m * bins + b] = (float)(w > 0 ? w * norm : 0.0);
        }
    }
}

mel_config mel_default_config(const float *filters, int n_mels) {
    return (mel_config){filters, n_mels, MEL_WINDOW_SAMPLES, 1};
}

/* Samples the stream analyses out of n given: cut to pad_to when truncating, padded to it. */
static size_t analysed(const mel_config *c, size_t n) {
    if (c->truncate && c->pad_to && n > c->pad_to) n = c->pad_to;
    return n > c->pad_to ? n : c->pad_to;
}

size_t mel_frame_count(const mel_config *c, size_t n) { return analysed(c, n) / MEL_HOP; }

/* ---------------------------------------------------------------------------------------
 * The stream */

struct mel_stream {
    mel_config c;
    int *lo, *hi;     /* each filter's non-zero bins [lo, hi): Whisper's span a few bins each */
    fft_plan *fft;
    double window[MEL_N_FFT];
    double frame[MEL_N_FFT], spec[MEL_BINS * 2], power[MEL_BINS];
    float *buf;       /* samples [buf_start, n_in) */
    size_t buf_start, buf_cap, n_in;
    float *out;       /* frames [0, next): log10 of the mel power, [frame][mel] */
    size_t next, out_cap;
    float max;        /* the largest value in out */
    int failed, spent;
};

mel_stream *mel_stream_new(const mel_config *c, char *err, size_t errlen) {
    if (!c->filters || c->n_mels < 1 || c->n_mels > MEL_MAX_MELS) {
        snprintf(err, errlen, "mel: %d mel filters (1..%d, with a filter bank)", c->n_mels, MEL_MAX_MELS);
        return NULL;
    }
    for (size_t i = 0; i < (size_t)c->n_mels * MEL_BINS; i++)
        if (!isfinite(c->filters[i])) {
            snprintf(err, errlen, "mel: filter %zu, bin %zu of the bank is not a finite number", i / MEL_BINS, i % MEL_BINS);
            return NULL;
        }
    mel_stream *s = calloc(1, sizeof *s);
    if (s) {
        s->c = *c;
        s->lo = malloc(sizeof(int) * (size_t)c->n_mels);
        s->hi = malloc(sizeof(int) * (size_t)c->n_mels);
        s->fft = fft_plan_new(MEL_N_FFT);
        s->max = -INFINITY;
    }
    if (!s || !s->lo || !s->hi || !s->fft) {
        mel_stream_free(s);
        snprintf(err, errlen, "mel: out of memory");
        return NULL;
    }
    for (int m = 0; m < c->n_mels; m++) {
        const float *f = c->filters + (size_t)m * MEL_BINS;
        int lo = 0, hi = MEL_BINS;
        while (lo < hi && f[lo] == 0) lo++;
        while (hi > lo && f[hi - 1] == 0) hi--;
        s->lo[m] = lo;
        s->hi[m] = hi;
    }
    for (int j = 0; j < MEL_N_FFT; j++) s->window[j] = 0.5 - 0.5 * cos(2 * M_PI * j / MEL_N_FFT); /* periodic Hann */
    return s;
}

void mel_stream_free(mel_stream *s) {
    if (!s) return;
    free(s->lo);
    free(s->hi);
    fft_plan_free(s->fft);
    free(s->buf);
    free(s->out);
    free(s);
}

size_t mel_stream_samples(const mel_stream *s) { return s->n_in; }

int mel_stream_full(const mel_stream *s) { return s->c.truncate && s->c.pad_to && s->n_in >= s->c.pad_to; }

/* Position p of the signal as numpy's reflect padding continues it past both ends of a signal
 * of total samples (a mirror of period 2 (total - 1)); total 0: the end is not known yet, only
 * the start is mirrored. Samples past n_in are the padding zeros. */
static float sample_at(const mel_stream *s, long long p, size_t total) {
    if (total == 1) p = 0;
    else if (total) {
        const long long period = 2 * ((long long)total - 1);
        p %= period;
        if (p < 0) p += period;
        if (p >= (long long)total) p = period - p;
    } else if (p < 0) p = -p;
    if ((size_t)p >= s->n_in) return 0.0f;
    assert((size_t)p >= s->buf_start);
    return s->buf[(size_t)p - s->buf_start];
}

/* Room for frame k in s->out; -1 if memory runs out. */
static int reserve_frame(mel_stream *s, size_t k, char *err, size_t errlen) {
    if (k < s->out_cap) return 0;
    size_t cap = s->out_cap + s->out_cap / 2 + 1024;
    float *out = cap <= SIZE_MAX / sizeof(float) / (size_t)s->c.n_mels
                     ? realloc(s->out, sizeof(float) * cap * (size_t)s->c.n_mels) : NULL;
    if (!out) {
        snprintf(err, errlen, "mel: out of memory for %zu frames", cap);
        return -1;
    }
    s->out = out;
    s->out_cap = cap;
    return 0;
}

/* Frame k (centred on sample k * MEL_HOP) into s->out: log10 of its mel power. total: as for
 * sample_at. */
static void compute_frame(mel_stream *s, size_t k, size_t total) {
    float *dst = s->out + k * (size_t)s->c.n_mels;
    const long long p0 = (long long)(k * MEL_HOP) - HALF;
    if (total && p0 >= (long long)s->n_in && p0 + MEL_N_FFT <= (long long)total) {
        /* padding only: the spectrum is exactly zero */
        for (int m = 0; m < s->c.n_mels; m++) dst[m] = (float)log10(MEL_FLOOR);
    } else {
        for (int j = 0; j < MEL_N_FFT; j++) s->frame[j] = sample_at(s, p0 + j, total) * s->window[j];
        fft_real(s->fft, s->frame, s->spec);
        for (int b = 0; b < MEL_BINS; b++) s->power[b] = s->spec[2 * b] * s->spec[2 * b] + s->spec[2 * b + 1] * s->spec[2 * b + 1];
        for (int m = 0; m < s->c.n_mels; m++) {
            const float *f = s->c.filters + (size_t)m * MEL_BINS;
            double acc = 0;
            for (int b = s->lo[m]; b < s->hi[m]; b++) acc += (double)f[b] * s->power[b];
            dst[m] = (float)log10(acc > MEL_FLOOR ? acc : MEL_FLOOR);
        }
    }
    for (int m = 0; m < s->c.n_mels; m++) s->max = dst[m] > s->max ? dst[m] : s->max;
}

/* Every frame whose samples have all arrived (its last one, and the 200 mirrored before the
 * start); then the samples no later frame needs are dropped. */
static int drain(mel_stream *s, char *err, size_t errlen) {
    while (s->n_in > HALF && s->next * MEL_HOP + HALF < s->n_in) {
        if (reserve_frame(s, s->next, err, errlen)) return -1;
        compute_frame(s, s->next++, 0);
    }
    const size_t keep = s->next * MEL_HOP > HALF ? s->next * MEL_HOP - HALF : 0;
    if (keep > s->buf_start) {
        memmove(s->buf, s->buf + (keep - s->buf_start), sizeof(float) * (s->n_in - keep));
        s->buf_start = keep;
    }
    return 0;
}

/* Append x[0..n) to the buffer; -1 if memory runs out. */
static int append(mel_stream *s, const float *x, size_t n, char *err, size_t errlen) {
    const size_t held = s->n_in - s->buf_start;
    if (held + n > s->buf_cap) {
        const size_t cap = held + n + MEL_N_FFT;
        float *b = realloc(s->buf, sizeof(float) * cap);
        if (!b) {
            snprintf(err, errlen, "mel: out of memory");
            return -1;
        }
        s->buf = b;
        s->buf_cap = cap;
    }
    memcpy(s->buf + held, x, sizeof(float) * n);
    s->n_in += n;
    return 0;
}

int mel_stream_push(mel_stream *s, const float *x, size_t n, char *err, size_t errlen) {
    if (s->failed || s->spent) {
        snprintf(err, errlen, "mel: the stream %s", s->failed ? "failed earlier" : "is finished");
        return -1;
    }
    if (s->c.truncate && s->c.pad_to) {
        const size_t room = s->n_in < s->c.pad_to ? s->c.pad_to - s->n_in : 0;
        n = n < room ? n : room;
    }
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) {
            snprintf(err, errlen, "sample %zu (%.3f s) is not a finite number (NaN or infinity)", s->n_in + i,
                     (double)(s->n_in + i) / MEL_RATE);
            s->failed = 1;
            return -1;
        }
    for (size_t at = 0; at < n; at += MEL_PIECE) {
        const size_t piece = n - at < MEL_PIECE ? n - at : MEL_PIECE;
        if (append(s, x + at, piece, err, errlen) || drain(s, err, errlen)) {
            s->failed = 1;
            return -1;
        }
    }
    return 0;
}

float *mel_stream_finish(mel_stream *s, size_t *n_frames, char *err, size_t errlen) {
    *n_frames = 0;
    if (s->failed || s->spent) {
        snprintf(err, errlen, "mel: the stream %s", s->failed ? "failed earlier" : "is finished");
        return NULL;
    }
    s->spent = 1;
    const size_t total = analysed(&s->c, s->n_in), frames = total / MEL_HOP;
    if (total == 0) {
        snprintf(err, errlen, "no audio samples");
        return NULL;
    }
    if (frames == 0) {
        snprintf(err, errlen, "%zu samples: shorter than one %d-sample hop, no frame", total, MEL_HOP);
        return NULL;
    }
    for (; s->next < frames; s->next++) {
        if (reserve_frame(s, s->next, err, errlen)) return NULL;
        compute_frame(s, s->next, total);
    }
    /* Hugging Face: np.maximum(x, x.max() - 8.0), then (x + 4.0) / 4.0, in float32 */
    const float floor = s->max - MEL_RANGE;
    const size_t count = frames * (size_t)s->c.n_mels;
    for (size_t i = 0; i < count; i++) s->out[i] = ((s->out[i] > floor ? s->out[i] : floor) + 4.0f) / 4.0f;
    float *out = realloc(s->out, sizeof(float) * count);
    if (!out) out = s->out;
    s->out = NULL;
    s->out_cap = 0;
    *n_frames = frames;
    return out;
}

int mel_log_spectrogram(const mel_config *c, const float *x, size_t n, float *out, char *err, size_t errlen) {
    mel_stream *s = mel_stream_new(c, err, errlen);
    if (!s) return -1;
    size_t frames = 0;
    float *f = mel_stream_push(s, x, n, err, errlen) ? NULL : mel_stream_finish(s, &frames, err, errlen);
    mel_stream_free(s);
    if (!f) return -1;
    memcpy(out, f, sizeof(float) * frames * (size_t)c->n_mels);
    free(f);
    return 0;
}
