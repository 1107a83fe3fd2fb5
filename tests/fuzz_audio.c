/* libFuzzer target: audio files as uploads bring them, through the memory reader.
 *
 *   make fuzz-audio FUZZ_SECONDS=600   (seeds: tests/data/fuzz/audio, short WAV, FLAC, Ogg
 *                                       and float WAV files)
 *
 * audio_features_memory (audio/read.c: libsndfile, libsoxr, then audio/mel.c) must give either
 * features of the right shape, every value finite, or one line of error; the first input byte
 * picks 80 or 128 mels and a 30-second window or the whole audio. A 60-second limit keeps each
 * input short. libsndfile and libsoxr are not instrumented: what this finds in them are
 * crashes, not silent out-of-bounds reads. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../audio/read.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static float bank80[80 * MEL_BINS], bank128[128 * MEL_BINS];
    if (bank80[1] == 0) {
        mel_filters(80, MEL_N_FFT, MEL_RATE, bank80);
        mel_filters(128, MEL_N_FFT, MEL_RATE, bank128);
    }
    const uint8_t pick = size ? data[0] : 0;
    const int n_mels = pick & 1 ? 128 : 80;
    mel_config c = mel_default_config(n_mels == 80 ? bank80 : bank128, n_mels);
    c.truncate = !(pick & 2);
    char err[512] = "";
    size_t frames = 0, samples = 0;
    audio_info info;
    float *f = audio_features_memory(data + (size > 0), size - (size > 0), 60.0, &c, &frames, &info, &samples, err,
                                     sizeof err);
    if (!f) {
        if (!err[0] || strchr(err, '\n')) abort();
        return 0;
    }
    if (frames != mel_frame_count(&c, samples)) abort();
    for (size_t i = 0; i < frames * (size_t)n_mels; i++)
        if (!isfinite(f[i]) || f[i] > 1e6f) abort();
    free(f);
    return 0;
}
