/* Audio into a Whisper model's features (speech_input.h). */
#include "speech_input.h"

#include <stdio.h>
#include <stdlib.h>

#include "../audio/read.h"

float *speech_features(const attend_model *m, const char *path, const void *data, size_t size, double max_seconds,
                       int *frames, double *seconds, char *err, size_t errlen) {
    const attend_config *c = attend_get_config(m);
    float *bank = malloc(sizeof(float) * (size_t)c->n_mels * MEL_BINS), *fm = NULL, *mel = NULL;
    size_t n = 0, samples = 0;
    if (!bank) return snprintf(err, errlen, "out of memory"), NULL;
    if (attend_mel_filters(m, bank, err, errlen)) return free(bank), NULL;
    mel_config mc = mel_default_config(bank, c->n_mels);
    mc.truncate = 0; /* the whole audio: longer than a window is decoded window by window */
    fm = path ? audio_features_file(path, max_seconds, &mc, &n, NULL, &samples, err, errlen)
              : audio_features_memory(data, size, max_seconds, &mc, &n, NULL, &samples, err, errlen);
    free(bank);
    if (!fm) return NULL;
    mel = malloc(sizeof(float) * n * (size_t)c->n_mels);
    for (size_t f = 0; mel && f < n; f++) /* frame-major -> HF's [n_mels, frames] */
        for (int r = 0; r < c->n_mels; r++) mel[(size_t)r * n + f] = fm[f * (size_t)c->n_mels + r];
    free(fm);
    if (!mel) return snprintf(err, errlen, "out of memory"), NULL;
    *frames = (int)n;
    *seconds = samples / 16000.0;
    return mel;
}
