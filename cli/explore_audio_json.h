/* explore_audio_json: one window of speech as the speech explore page reads it
 * (python/attend/explore_audio.html; python/attend/_explore_audio.py writes the same object).
 *
 * Arrays of numbers travel as base64 of little-endian bytes, which the page decodes into typed
 * arrays: the spectrogram as float32, exactly; the cross-attention as one byte per weight,
 * each row (a token's weights over the encoder frames) scaled to its own maximum, the maxima
 * as float32 (a weight comes back as byte / 255 * max: within max / 510 of the model's). When
 * every head's rows together would pass EXPLORE_AUDIO_MAX_CELLS bytes, the frames are pooled:
 * each column the mean of `pool` neighbouring frames, pool the smallest divisor of the 1500
 * frames that fits (a 30-second window at 40 ms, 60 ms, ... a column). $ATTEND_EXPLORE_MAX_CELLS
 * sets another budget (larger pages keep more detail; the tests reach pooling with a small
 * model through it). */
#ifndef ATTEND_CLI_EXPLORE_AUDIO_JSON_H
#define ATTEND_CLI_EXPLORE_AUDIO_JSON_H

#include <stdio.h>

#include "../model/attend.h"

#define EXPLORE_AUDIO_MAX_CELLS (16u << 20) /* bytes of cross-attention on one page */

/* What the page shows of one window. */
typedef struct {
    const char *model;     /* the header: the model file's name */
    const char *settings;  /* the search, in words ("greedy search", "beam search, 5 beams") */
    const char *file;      /* the audio file's name */
    const char *language;  /* the window's language code (given or detected) */
    int language_given;    /* 1: --language; 0: detected (or English-only) */
    const attend_speech_params *sp;
    const float *mel;      /* [n_mels][audio_frames] log-mel features of the window */
    long long samples;     /* 16 kHz samples of the whole audio (the window holds 30 s at most) */
    /* the window decoded with scores and every decoder head's cross-attention as head_cross
     * (attend_params.cross_heads naming each (layer, head) in order: cross's layout) */
    const attend_result *r;
    char *const *texts;    /* [r->n_tgt] each token's text ("" for special tokens) */
    const attend_transcript *t; /* its words (n_words 0: none yet) */
} explore_audio_page;

/* The smallest divisor of frames with layers * heads * rows * (frames / pool) within
 * EXPLORE_AUDIO_MAX_CELLS (frames itself when none does). */
int explore_audio_pool(int layers, int heads, int rows, int frames);
/* The page's JSON object. 0, or -1 with err (out of memory). */
int explore_audio_json(FILE *f, const attend_config *c, const explore_audio_page *pg, char *err, size_t errlen);

#endif
