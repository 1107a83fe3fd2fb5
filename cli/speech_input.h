/* speech_input: audio as a Whisper model hears it, for attend transcribe and attend serve
 * alike (so a file gives the same features, hence the same transcript, through both):
 * decoded by libsndfile and resampled to 16 kHz by libsoxr (audio/read.h), then the model's
 * log-mel features (its filter bank, attend_mel_filters) of the whole audio at once, as
 * attend_features computes them: up to 30 s one zero-padded window, longer audio every
 * frame (HF's truncation=False). */
#ifndef ATTEND_CLI_SPEECH_INPUT_H
#define ATTEND_CLI_SPEECH_INPUT_H

#include <stddef.h>

#include "../model/attend.h"

/* The features of a file (path) or of a file's bytes in memory (path NULL: data, size), in
 * HF's layout: attend_config.n_mels rows of *frames values (malloc'd). *seconds: the audio's
 * length (its 16 kHz samples / 16000). Audio longer than max_seconds is refused (0: no
 * limit). NULL with one line in err (what libsndfile or the limits refused; "out of memory"). */
float *speech_features(const attend_model *m, const char *path, const void *data, size_t size, double max_seconds,
                       int *frames, double *seconds, char *err, size_t errlen);

#endif
