/* mel: Whisper's log-mel spectrogram, as Hugging Face's WhisperFeatureExtractor computes it.
 *
 *   float bank[80 * MEL_BINS];
 *   mel_filters(80, MEL_N_FFT, MEL_RATE, bank);            // or a model file's own bank
 *   mel_config c = mel_default_config(bank, 80);           // one 30-second window
 *   mel_stream *s = mel_stream_new(&c, err, sizeof err);
 *   mel_stream_push(s, samples, n, err, sizeof err);       // 16 kHz mono; as often as needed
 *   size_t frames;
 *   float *feat = mel_stream_finish(s, &frames, err, sizeof err);  // [frames][80]; free()
 *   mel_stream_free(s);
 *
 * or in one call, into memory of mel_frame_count(&c, n) * n_mels floats:
 *   mel_log_spectrogram(&c, samples, n, out, err, sizeof err);
 *
 * The recipe (docs/audio.md): frames of MEL_N_FFT samples every MEL_HOP, centred (the signal
 * reflected at both ends), times a periodic Hann window; the power spectrum through the mel
 * filters; log10 of max(x, 1e-10); every value raised to at least the largest minus 8; then
 * (x + 4) / 4. The last frame is dropped: n samples give n / MEL_HOP frames. Computed in double,
 * then stored as float.
 *
 * Layout: frame-major, out[frame][mel] (Hugging Face's input_features is the transpose,
 * [mel][frame]). A stream keeps frames, not samples: 4 * n_mels bytes per 10 ms (115 MB per
 * hour of audio at 80 mels) and under 600 samples of signal.
 *
 * Pure C, no allocation outside a stream and no global state: streams on different threads
 * are independent. Errors are returned as -1 or NULL with one line in err. */
#ifndef ATTEND_MEL_H
#define ATTEND_MEL_H

#include <stddef.h>

#define MEL_RATE 16000
#define MEL_N_FFT 400
#define MEL_HOP 160
#define MEL_BINS (MEL_N_FFT / 2 + 1)
#define MEL_WINDOW_SAMPLES 480000 /* 30 s: Whisper's window */
#define MEL_WINDOW_FRAMES (MEL_WINDOW_SAMPLES / MEL_HOP)
#define MEL_MAX_MELS 512

/* The mel filter bank of Hugging Face's mel_filter_bank(n_fft/2 + 1, n_mels, 0, 8000, rate,
 * norm="slaney", mel_scale="slaney"), as Whisper uses it: n_mels triangles with corners evenly
 * spaced on the Slaney mel scale (linear below 1 kHz, logarithmic above) from 0 to 8 kHz, each
 * scaled by 2 / its width in Hz. out[n_mels][n_fft/2 + 1]; computed in double. */
void mel_filters(int n_mels, int n_fft, int rate, float *out);

typedef struct {
    const float *filters; /* [n_mels][MEL_BINS]; read while the stream lives */
    int n_mels;           /* 80 or 128 for Whisper; 1..MEL_MAX_MELS */
    size_t pad_to;        /* zeros appended up to this many samples (Hugging Face's max_length) */
    int truncate;         /* samples past pad_to are dropped (its truncation=True) */
} mel_config;

/* Hugging Face's default: one 30-second window, shorter audio padded with zeros, longer audio
 * cut (pad_to = MEL_WINDOW_SAMPLES, truncate = 1). Its long-form path (truncation=False) is
 * the same with truncate = 0: one spectrogram of the whole audio, one global maximum; with
 * pad_to = 0 too, it is padding="longest" (no padding). */
mel_config mel_default_config(const float *filters, int n_mels);

/* Frames that n samples give under c: max(n', pad_to) / MEL_HOP, n' = n cut to pad_to when
 * truncating. */
size_t mel_frame_count(const mel_config *c, size_t n);

typedef struct mel_stream mel_stream;

/* A stream over c (copied; the filters are read from c->filters until mel_stream_free).
 * NULL with a message if c is invalid or memory runs out. */
mel_stream *mel_stream_new(const mel_config *c, char *err, size_t errlen);
/* Take n more samples (16 kHz mono). -1 with a message if a sample is NaN or infinite, or
 * memory runs out; the stream is then failed and takes nothing more. */
int mel_stream_push(mel_stream *s, const float *x, size_t n, char *err, size_t errlen);
/* Samples taken so far (after truncation). */
size_t mel_stream_samples(const mel_stream *s);
/* 1 once a truncating stream has all the samples it takes (more are ignored), else 0. */
int mel_stream_full(const mel_stream *s);
/* The features of everything pushed: [*n_frames][n_mels], the caller frees them. NULL with a
 * message if no samples were given nor padded, if fewer than MEL_HOP were (no frame), or if the
 * stream failed. The stream is spent afterwards: only mel_stream_free remains. */
float *mel_stream_finish(mel_stream *s, size_t *n_frames, char *err, size_t errlen);
void mel_stream_free(mel_stream *s);

/* One call: the features of x[0..n) into out (mel_frame_count(c, n) * c->n_mels floats).
 * 0, or -1 with a message. */
int mel_log_spectrogram(const mel_config *c, const float *x, size_t n, float *out, char *err, size_t errlen);

#endif
