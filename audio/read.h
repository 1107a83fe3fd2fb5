/* read: sound files as Whisper hears them, 16 kHz mono float samples.
 *
 *   static int take(void *ctx, const float *x, size_t n, char *err, size_t errlen) {...}
 *   audio_info info;
 *   if (audio_decode_file("talk.flac", 3600, take, ctx, &info, err, sizeof err)) puts(err);
 *
 *   size_t frames;                  // or straight to Whisper's features, chunk by chunk:
 *   float *feat = audio_features_file("talk.flac", 3600, &mel_config, &frames, err, sizeof err);
 *
 * Decoding is libsndfile's (WAV, FLAC, Ogg Vorbis and Opus, MP3, AIFF, ... : whatever the
 * installed library reads), channels are averaged to mono, and other rates are resampled to
 * 16 kHz by libsoxr at its high quality (SOXR_HQ: 20-bit precision, linear phase), the
 * recipe of librosa.load and Hugging Face's audio loading. 16 kHz input passes untouched.
 *
 * The file is read in chunks of AUDIO_CHUNK frames: memory does not grow with its length
 * (what the sink keeps is its own). Refused, with one line in err: what libsndfile cannot
 * open or decode, rates outside AUDIO_MIN_RATE..AUDIO_MAX_RATE, more than AUDIO_MAX_CHANNELS
 * channels, NaN or infinite samples, no samples at all, audio longer than max_seconds
 * (declared in the header or found while decoding).
 *
 * Linked into the attend binary only, not libattend: libattend ships in a Python wheel that
 * must not depend on libsndfile and libsoxr (Python callers decode with their own tools and
 * pass samples). libsndfile keeps its last open error in a global: two threads failing to open
 * files at the same moment may see each other's message. */
#ifndef ATTEND_AUDIO_READ_H
#define ATTEND_AUDIO_READ_H

#include <stddef.h>
#include <stdint.h>

#include "mel.h"

#define AUDIO_MIN_RATE 1000
#define AUDIO_MAX_RATE 768000
#define AUDIO_MAX_CHANNELS 256
#define AUDIO_CHUNK 16384 /* frames decoded at a time */

/* What the file says of itself. */
typedef struct {
    int rate, channels;
    int64_t frames;     /* declared length in frames at rate; -1 if unknown */
    char format[64];    /* libsndfile's name of the container, e.g. "WAV (Microsoft)" */
} audio_info;

/* Receives n (> 0) samples at 16 kHz. Returns 0 for more; -1 stops decoding with the message
 * it put in err; 1 stops it without an error (the sink has what it needs). */
typedef int (*audio_sink)(void *ctx, const float *x, size_t n, char *err, size_t errlen);

/* Decode a file (path) or a file in memory (data, n bytes: an upload) into sink. max_seconds:
 * longer audio is refused (0: no limit). info (may be NULL) is filled once the header is read.
 * 0, or -1 with one line in err. */
int audio_decode_file(const char *path, double max_seconds, audio_sink sink, void *ctx, audio_info *info,
                      char *err, size_t errlen);
int audio_decode_memory(const void *data, size_t n, double max_seconds, audio_sink sink, void *ctx,
                        audio_info *info, char *err, size_t errlen);

/* The whole audio as 16 kHz mono samples (*n of them, malloc'ed); NULL with a message. */
float *audio_load_file(const char *path, double max_seconds, size_t *n, char *err, size_t errlen);
float *audio_load_memory(const void *data, size_t size, double max_seconds, size_t *n, char *err, size_t errlen);

/* Whisper's log-mel features of a file (mel.h, config c), decoded chunk by chunk into a mel
 * stream: memory is the frames, not the samples. [*n_frames][c->n_mels], malloc'ed; NULL with
 * a message. info and n_samples (16 kHz samples decoded) may be NULL. */
float *audio_features_file(const char *path, double max_seconds, const mel_config *c, size_t *n_frames,
                           audio_info *info, size_t *n_samples, char *err, size_t errlen);
float *audio_features_memory(const void *data, size_t size, double max_seconds, const mel_config *c,
                             size_t *n_frames, audio_info *info, size_t *n_samples, char *err, size_t errlen);

#endif
