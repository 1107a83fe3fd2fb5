/* The public feature calls (attend.h: attend_mel_filters, attend_features, attend_transcribe):
 * samples into Whisper's log-mel features with audio/mel.c, in HF's [n_mels, frames] layout
 * the model reads. */
#include "attend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../audio/mel.h"
#include "attend_model.h"

int attend_mel_filters(const attend_model *am, float *out, char *err, size_t errlen) {
    const s2s_model *m = am->m;
    if (!m->c.family->audio) {
        snprintf(err, errlen, "a text model: it has no mel filters");
        return -1;
    }
    const int n = m->c.speech.n_mels;
    if (m->mel_filters) memcpy(out, m->mel_filters, sizeof(float) * (size_t)n * MEL_BINS);
    else mel_filters(n, MEL_N_FFT, MEL_RATE, out);
    return 0;
}

/* [frames][mels] -> [mels][frames] */
static void transpose(const float *in, int frames, int mels, float *out) {
    for (int f = 0; f < frames; f++)
        for (int r = 0; r < mels; r++) out[(size_t)r * frames + f] = in[(size_t)f * mels + r];
}

int attend_features(const attend_model *am, const float *samples, size_t n, float **mel, int *n_frames, char *err,
                    size_t errlen) {
    *mel = NULL;
    if (!am->m->c.family->audio) {
        snprintf(err, errlen, "a text model: it does not read audio");
        return -1;
    }
    const int mels = am->m->c.speech.n_mels;
    float *bank = malloc(sizeof(float) * (size_t)mels * MEL_BINS);
    if (!bank) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    attend_mel_filters(am, bank, err, errlen);
    mel_config c = mel_default_config(bank, mels);
    c.truncate = 0; /* longer than a window: the whole audio, one normalisation */
    const size_t frames = mel_frame_count(&c, n);
    float *fm = frames <= (size_t)1 << 28 ? malloc(sizeof(float) * frames * (size_t)mels) : NULL;
    *mel = fm ? malloc(sizeof(float) * frames * (size_t)mels) : NULL;
    int rc = -1;
    if (!*mel) snprintf(err, errlen, "out of memory (%zu frames)", frames);
    else if (mel_log_spectrogram(&c, samples, n, fm, err, errlen) == 0) {
        transpose(fm, (int)frames, mels, *mel);
        *n_frames = (int)frames;
        rc = 0;
    }
    if (rc) {
        free(*mel);
        *mel = NULL;
    }
    free(fm);
    free(bank);
    return rc;
}

int attend_transcribe(attend_model *am, const float *samples, size_t n, const attend_speech_params *sp,
                      const attend_params *p, attend_transcript *out, char *err, size_t errlen) {
    float *mel;
    int frames;
    memset(out, 0, sizeof *out);
    if (attend_features(am, samples, n, &mel, &frames, err, errlen)) return -1;
    attend_speech_params wsp = sp ? *sp : attend_default_speech_params();
    if (!wsp.audio_frames) wsp.audio_frames = (int)(n / 160 < 1u << 30 ? n / 160 : 1u << 30); /* HF's num_frames */
    const int rc = attend_transcribe_features(am, mel, frames, &wsp, p, out, err, errlen);
    free(mel);
    return rc;
}
