/* read: libsndfile decodes, channels are averaged, libsoxr resamples to 16 kHz, a sink takes
 * the samples chunk by chunk (read.h). */
#include "read.h"

#include <math.h>
#include <sndfile.h>
#include <soxr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------
 * Files in memory, through libsndfile's virtual I/O */

typedef struct {
    const unsigned char *data;
    sf_count_t size, pos;
} mem_file;

static sf_count_t mem_length(void *u) { return ((mem_file *)u)->size; }

static sf_count_t mem_seek(sf_count_t offset, int whence, void *u) {
    mem_file *m = u;
    const sf_count_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? m->pos : m->size;
    if (offset < -base || offset > INT64_MAX - base) return -1;
    m->pos = base + offset; /* past the end is allowed: reads there give nothing */
    return m->pos;
}

static sf_count_t mem_read(void *ptr, sf_count_t count, void *u) {
    mem_file *m = u;
    const sf_count_t left = m->pos < m->size ? m->size - m->pos : 0, n = count < left ? count : left;
    if (n <= 0) return 0;
    memcpy(ptr, m->data + m->pos, (size_t)n);
    m->pos += n;
    return n;
}

static sf_count_t mem_write(const void *ptr, sf_count_t count, void *u) {
    (void)ptr, (void)count, (void)u;
    return 0; /* opened for reading only */
}

static sf_count_t mem_tell(void *u) { return ((mem_file *)u)->pos; }

/* ---------------------------------------------------------------------------------------
 * Decoding */

typedef struct {
    SNDFILE *sf;
    SF_INFO sfi;
    double max_seconds;
    audio_sink sink;
    void *ctx;
    soxr_t rs;          /* NULL at 16 kHz */
    float *in, *mono, *out;
    size_t out_cap;
    uint64_t frames_in, samples_out;
    int stopped;        /* the sink has what it wants */
} decoder;

/* libsndfile's message without its trailing period and newline. */
static void sndfile_message(SNDFILE *sf, const char *what, char *err, size_t errlen) {
    char msg[200];
    snprintf(msg, sizeof msg, "%s", sf_strerror(sf));
    size_t n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '.' || msg[n - 1] == ' ')) msg[--n] = 0;
    snprintf(err, errlen, "%s: %s", what, msg);
}

/* The header's rate, channels and declared length against the limits; info filled. */
static int check_header(const decoder *d, audio_info *info, char *err, size_t errlen) {
    const SF_INFO *s = &d->sfi;
    if (info) {
        SF_FORMAT_INFO f = {.format = s->format & SF_FORMAT_TYPEMASK};
        info->rate = s->samplerate;
        info->channels = s->channels;
        info->frames = s->frames >= 0 && s->frames < SF_COUNT_MAX ? s->frames : -1;
        snprintf(info->format, sizeof info->format, "%s",
                 sf_command(NULL, SFC_GET_FORMAT_INFO, &f, sizeof f) == 0 && f.name ? f.name : "?");
    }
    if (s->samplerate < AUDIO_MIN_RATE || s->samplerate > AUDIO_MAX_RATE) {
        snprintf(err, errlen, "sample rate %d Hz: outside %d..%d", s->samplerate, AUDIO_MIN_RATE, AUDIO_MAX_RATE);
        return -1;
    }
    if (s->channels < 1 || s->channels > AUDIO_MAX_CHANNELS) {
        snprintf(err, errlen, "%d channels: at most %d are read", s->channels, AUDIO_MAX_CHANNELS);
        return -1;
    }
    const double seconds = (double)s->frames / s->samplerate;
    if (d->max_seconds > 0 && s->frames > 0 && s->frames < SF_COUNT_MAX && seconds > d->max_seconds) {
        snprintf(err, errlen, "%.1f s of audio: longer than the limit of %g s", seconds, d->max_seconds);
        return -1;
    }
    return 0;
}

/* n samples at 16 kHz to the sink, within the length limit. */
static int emit(decoder *d, const float *x, size_t n, char *err, size_t errlen) {
    if (!n || d->stopped) return 0;
    d->samples_out += n;
    if (d->max_seconds > 0 && (double)d->samples_out > d->max_seconds * MEL_RATE) {
        snprintf(err, errlen, "longer than the limit of %g s of audio", d->max_seconds);
        return -1;
    }
    const int r = d->sink(d->ctx, x, n, err, errlen);
    if (r > 0) d->stopped = 1;
    return r < 0 ? -1 : 0;
}

/* x[0..n) through the resampler (x NULL: the end of the input, what it holds is flushed). */
static int resample(decoder *d, const float *x, size_t n, char *err, size_t errlen) {
    size_t used = 0;
    for (;;) {
        size_t idone = 0, odone = 0;
        const soxr_error_t e = soxr_process(d->rs, x ? x + used : NULL, x ? n - used : 0, &idone, d->out, d->out_cap, &odone);
        if (e) {
            snprintf(err, errlen, "resampling: %s", e);
            return -1;
        }
        used += idone;
        for (size_t i = 0; i < odone; i++)
            if (!isfinite(d->out[i])) { /* finite input can overflow float near its limits */
                snprintf(err, errlen, "resampling overflowed near %.3f s: samples too large to filter",
                         (double)(d->samples_out + i) / MEL_RATE);
                return -1;
            }
        if (emit(d, d->out, odone, err, errlen)) return -1;
        if (x ? used >= n : odone == 0) return 0;
        if (x && !idone && !odone) {
            snprintf(err, errlen, "resampling: no progress");
            return -1;
        }
    }
}

/* got frames of d->in averaged into d->mono; -1 at a NaN or infinite sample. */
static int mix(decoder *d, size_t got, char *err, size_t errlen) {
    const int ch = d->sfi.channels;
    for (size_t i = 0; i < got; i++) {
        double sum = 0;
        for (int c = 0; c < ch; c++) sum += d->in[i * ch + c];
        d->mono[i] = ch == 1 ? d->in[i] : (float)(sum / ch);
        if (!isfinite(sum)) {
            const uint64_t at = d->frames_in + i;
            snprintf(err, errlen, "sample %llu (%.3f s) is not a finite number (NaN or infinity)",
                     (unsigned long long)at, (double)at / d->sfi.samplerate);
            return -1;
        }
    }
    return 0;
}

static int decode_chunks(decoder *d, char *err, size_t errlen) {
    for (;;) {
        const sf_count_t got = sf_readf_float(d->sf, d->in, AUDIO_CHUNK);
        if (got <= 0) break;
        if (mix(d, (size_t)got, err, errlen)) return -1;
        d->frames_in += (uint64_t)got;
        if (d->rs ? resample(d, d->mono, (size_t)got, err, errlen) : emit(d, d->mono, (size_t)got, err, errlen)) return -1;
        if (d->stopped) return 0;
    }
    if (sf_error(d->sf) != SF_ERR_NO_ERROR) {
        sndfile_message(d->sf, "decoding failed", err, errlen);
        return -1;
    }
    if (d->rs && resample(d, NULL, 0, err, errlen)) return -1;
    if (!d->samples_out) {
        snprintf(err, errlen, "no audio samples");
        return -1;
    }
    return 0;
}

/* Decode an opened file; closes it. */
static int decode(decoder *d, audio_info *info, char *err, size_t errlen) {
    int rc = check_header(d, info, err, errlen);
    if (!rc) {
        const double ratio = (double)MEL_RATE / d->sfi.samplerate;
        d->out_cap = (size_t)ceil(AUDIO_CHUNK * ratio) + 4096;
        d->in = malloc(sizeof(float) * AUDIO_CHUNK * (size_t)d->sfi.channels);
        d->mono = malloc(sizeof(float) * AUDIO_CHUNK);
        d->out = malloc(sizeof(float) * d->out_cap);
        if (d->sfi.samplerate != MEL_RATE) {
            soxr_error_t e = NULL;
            const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
            const soxr_quality_spec_t q = soxr_quality_spec(SOXR_HQ, 0);
            d->rs = soxr_create(d->sfi.samplerate, MEL_RATE, 1, &e, &io, &q, NULL);
            if (!d->rs) snprintf(err, errlen, "resampler: %s", e ? e : "cannot be created");
            if (!d->rs) rc = -1;
        }
        if (!rc && (!d->in || !d->mono || !d->out)) {
            snprintf(err, errlen, "out of memory");
            rc = -1;
        }
        if (!rc) rc = decode_chunks(d, err, errlen);
    }
    if (d->rs) soxr_delete(d->rs);
    free(d->in);
    free(d->mono);
    free(d->out);
    sf_close(d->sf);
    return rc;
}

int audio_decode_file(const char *path, double max_seconds, audio_sink sink, void *ctx, audio_info *info,
                      char *err, size_t errlen) {
    decoder d = {.max_seconds = max_seconds, .sink = sink, .ctx = ctx};
    d.sf = sf_open(path, SFM_READ, &d.sfi);
    if (!d.sf) {
        sndfile_message(NULL, "not readable as audio", err, errlen);
        return -1;
    }
    return decode(&d, info, err, errlen);
}

int audio_decode_memory(const void *data, size_t n, double max_seconds, audio_sink sink, void *ctx,
                        audio_info *info, char *err, size_t errlen) {
    SF_VIRTUAL_IO io = {mem_length, mem_seek, mem_read, mem_write, mem_tell};
    mem_file m = {data, (sf_count_t)n, 0};
    decoder d = {.max_seconds = max_seconds, .sink = sink, .ctx = ctx};
    d.sf = sf_open_virtual(&io, SFM_READ, &d.sfi, &m);
    if (!d.sf) {
        sndfile_message(NULL, "not readable as audio", err, errlen);
        return -1;
    }
    return decode(&d, info, err, errlen);
}

/* ---------------------------------------------------------------------------------------
 * Sinks: all samples in memory, or Whisper's features */

typedef struct {
    float *x;
    size_t n, cap;
} sample_buffer;

static int keep_samples(void *ctx, const float *x, size_t n, char *err, size_t errlen) {
    sample_buffer *b = ctx;
    if (b->n + n > b->cap) {
        const size_t cap = (b->n + n) + (b->n + n) / 2;
        float *p = cap < SIZE_MAX / sizeof(float) ? realloc(b->x, sizeof(float) * cap) : NULL;
        if (!p) {
            snprintf(err, errlen, "out of memory for %zu samples", b->n + n);
            return -1;
        }
        b->x = p;
        b->cap = cap;
    }
    memcpy(b->x + b->n, x, sizeof(float) * n);
    b->n += n;
    return 0;
}

static float *loaded(sample_buffer *b, int rc, size_t *n) {
    *n = rc ? 0 : b->n;
    if (rc) free(b->x);
    return rc ? NULL : b->x;
}

float *audio_load_file(const char *path, double max_seconds, size_t *n, char *err, size_t errlen) {
    sample_buffer b = {0};
    return loaded(&b, audio_decode_file(path, max_seconds, keep_samples, &b, NULL, err, errlen), n);
}

float *audio_load_memory(const void *data, size_t size, double max_seconds, size_t *n, char *err, size_t errlen) {
    sample_buffer b = {0};
    return loaded(&b, audio_decode_memory(data, size, max_seconds, keep_samples, &b, NULL, err, errlen), n);
}

/* Into a mel stream; decoding stops once a truncating window is full. */
static int push_mel(void *ctx, const float *x, size_t n, char *err, size_t errlen) {
    mel_stream *s = ctx;
    if (mel_stream_push(s, x, n, err, errlen)) return -1;
    return mel_stream_full(s) ? 1 : 0;
}

/* The features once decoding returned rc; frees the stream. */
static float *features(mel_stream *s, int rc, size_t *n_frames, size_t *n_samples, char *err, size_t errlen) {
    float *out = rc ? NULL : mel_stream_finish(s, n_frames, err, errlen);
    if (n_samples) *n_samples = mel_stream_samples(s);
    mel_stream_free(s);
    return out;
}

float *audio_features_file(const char *path, double max_seconds, const mel_config *c, size_t *n_frames,
                           audio_info *info, size_t *n_samples, char *err, size_t errlen) {
    *n_frames = 0;
    mel_stream *s = mel_stream_new(c, err, errlen);
    if (!s) return NULL;
    const int rc = audio_decode_file(path, max_seconds, push_mel, s, info, err, errlen);
    return features(s, rc, n_frames, n_samples, err, errlen);
}

float *audio_features_memory(const void *data, size_t size, double max_seconds, const mel_config *c,
                             size_t *n_frames, audio_info *info, size_t *n_samples, char *err, size_t errlen) {
    *n_frames = 0;
    mel_stream *s = mel_stream_new(c, err, errlen);
    if (!s) return NULL;
    const int rc = audio_decode_memory(data, size, max_seconds, push_mel, s, info, err, errlen);
    return features(s, rc, n_frames, n_samples, err, errlen);
}
