/* Whisper's log-mel features (audio/mel.c, audio/fft.c) without audio files: the FFT against a
 * naive DFT in long double, the filter bank against values worked out by hand, and the
 * spectrogram against a naive one (the recipe of mel.h written the slow way: numpy's reflect
 * padding, a direct DFT, every filter bin) at the edge lengths 0, 1, 159, 160, 399, 400, 401
 * samples, padded and not; streaming in any chunk size equal to one call bit for bit;
 * truncation; NaN and infinite samples and bad configurations refused with a message.
 * Usage: test_mel */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../audio/fft.h"
#include "../audio/mel.h"
#include "check.h"

/* ---------------------------------------------------------------------------------------
 * The FFT */

static void check_fft(int n) {
    double *x = malloc(sizeof(double) * n), *got = malloc(sizeof(double) * (n + 2));
    srand(n);
    for (int j = 0; j < n; j++) x[j] = rand() / (double)RAND_MAX - 0.5;
    fft_plan *p = fft_plan_new(n);
    CHECKF(p != NULL, "no plan for n = %d", n);
    if (p) {
        fft_real(p, x, got);
        double worst = 0, scale = 0;
        for (int j = 0; j < n; j++) scale += fabs(x[j]);
        for (int k = 0; k <= n / 2; k++) {
            long double re = 0, im = 0;
            for (int j = 0; j < n; j++) {
                const long double a = -2.0L * 3.14159265358979323846264338327950288L * ((long long)j * k % n) / n;
                re += x[j] * cosl(a);
                im += x[j] * sinl(a);
            }
            const double e = fmax(fabs(got[2 * k] - (double)re), fabs(got[2 * k + 1] - (double)im));
            worst = e > worst ? e : worst;
        }
        CHECKF(worst <= 1e-13 * scale, "n = %d: off the DFT by %g (scale %g)", n, worst, scale);
    }
    fft_plan_free(p);
    free(x);
    free(got);
}

static void test_fft(void) {
    /* powers of two, Whisper's 400 = 2^4 5^2, other small factors, a prime half-length (97) */
    static const int sizes[] = {2, 4, 6, 8, 10, 12, 18, 30, 64, 100, 194, 210, 256, 400, 512, 1000, 1536};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) check_fft(sizes[i]);
    CHECK(fft_plan_new(0) == NULL);
    CHECK(fft_plan_new(401) == NULL);
    CHECK(fft_plan_new(-4) == NULL);
    CHECK(fft_plan_new((1 << 20) + 2) == NULL);
}

/* ---------------------------------------------------------------------------------------
 * The filter bank */

static void test_filters(void) {
    float f80[80 * MEL_BINS], f128[128 * MEL_BINS];
    mel_filters(80, MEL_N_FFT, MEL_RATE, f80);
    mel_filters(128, MEL_N_FFT, MEL_RATE, f128);
    /* By hand, 80 mels: 8 kHz is 15 + ln(8) 27 / ln(6.4) = 45.24564 mels; 82 corners 0.558588
     * mels apart, so filter 0's are 0, 37.23921 and 74.47842 Hz (200/3 Hz per mel below 15).
     * Bin 1 is 40 Hz, past the peak: (74.47842 - 40) / 37.23921 = 0.925866 of it, times
     * 2 / 74.47842 (Slaney's norm) = 0.0248626. The others below the same way. */
    static const struct { int mels, m, b; double w; } hand[] = {
        {80, 0, 1, 0.02486259398417609},   {80, 1, 1, 0.00199082188809807},
        {80, 1, 2, 0.022871772096078016},  {80, 79, 199, 0.00044875902758905996},
        {80, 79, 200, 0.0},                {80, 40, 43, 0.014735565741439067},
        {80, 0, 0, 0.0},                   {128, 0, 1, 0.012373986332636972},
        {128, 1, 1, 0.030392564871355197}, {128, 1, 2, 0.0},
        {128, 127, 199, 0.0011142801987532548}, {128, 64, 42, 0.006749682704665269},
    };
    for (size_t i = 0; i < sizeof hand / sizeof hand[0]; i++) {
        const float *f = hand[i].mels == 80 ? f80 : f128;
        const double got = f[hand[i].m * MEL_BINS + hand[i].b];
        CHECKF(fabs(got - hand[i].w) <= 1e-7 * fabs(hand[i].w) + 1e-12, "%d mels, filter %d bin %d: %.9g, not %.9g",
               hand[i].mels, hand[i].m, hand[i].b, got, hand[i].w);
    }
    /* triangles: non-negative, one run of non-zero bins each; areas near 1 (Slaney's norm
     * makes each triangle's area 1) once a filter spans many 40 Hz bins (from filter 45 on,
     * past 1.4 kHz, within 3%; the narrow ones below are sampled too coarsely: 0.93 to 1.07) */
    int runs_ok = 1, area_ok = 1;
    for (int m = 0; m < 80; m++) {
        int runs = 0;
        double area = 0;
        for (int b = 0; b < MEL_BINS; b++) {
            const float w = f80[m * MEL_BINS + b];
            runs_ok &= w >= 0;
            runs += w > 0 && (b == 0 || f80[m * MEL_BINS + b - 1] == 0);
            area += w * 40.0;
        }
        runs_ok &= runs == 1;
        if (m >= 45) area_ok &= fabs(area - 1) < 0.03;
    }
    CHECK(runs_ok);
    CHECK(area_ok);
}

/* ---------------------------------------------------------------------------------------
 * The spectrogram against the recipe written the slow way */

static float *naive_features(const float *filters, int n_mels, const float *x, size_t n, size_t total, size_t *frames) {
    *frames = total / MEL_HOP;
    float *out = malloc(sizeof(float) * (*frames ? *frames : 1) * n_mels);
    double frame[MEL_N_FFT], power[MEL_BINS];
    float mx = -INFINITY;
    for (size_t k = 0; k < *frames; k++) {
        for (int j = 0; j < MEL_N_FFT; j++) {
            long long p = (long long)(k * MEL_HOP) + j - MEL_N_FFT / 2; /* numpy's reflect: a mirror */
            if (total == 1) p = 0;
            while (p < 0 || p >= (long long)total) p = p < 0 ? -p : 2 * ((long long)total - 1) - p;
            const double hann = 0.5 - 0.5 * cos(2 * M_PI * j / MEL_N_FFT);
            frame[j] = ((size_t)p < n ? x[p] : 0.0) * hann;
        }
        for (int b = 0; b < MEL_BINS; b++) {
            double re = 0, im = 0;
            for (int j = 0; j < MEL_N_FFT; j++) {
                re += frame[j] * cos(2 * M_PI * (double)((j * b) % MEL_N_FFT) / MEL_N_FFT);
                im -= frame[j] * sin(2 * M_PI * (double)((j * b) % MEL_N_FFT) / MEL_N_FFT);
            }
            power[b] = re * re + im * im;
        }
        for (int m = 0; m < n_mels; m++) {
            double acc = 0;
            for (int b = 0; b < MEL_BINS; b++) acc += filters[m * MEL_BINS + b] * power[b];
            const float v = (float)log10(acc > 1e-10 ? acc : 1e-10);
            out[k * n_mels + m] = v;
            mx = v > mx ? v : mx;
        }
    }
    for (size_t i = 0; i < *frames * n_mels; i++) out[i] = ((out[i] > mx - 8 ? out[i] : mx - 8) + 4) / 4;
    return out;
}

/* A test signal: a chirp, a tone and noise at very different levels (quiet bins matter). */
static float *signal_of(size_t n, unsigned seed) {
    float *x = malloc(sizeof(float) * (n ? n : 1));
    srand(seed);
    for (size_t i = 0; i < n; i++) {
        const double t = (double)i / MEL_RATE;
        x[i] = (float)(0.5 * sin(2 * M_PI * (200 + 3000 * t) * t) + 0.01 * sin(2 * M_PI * 5000 * t) +
                       1e-4 * (rand() / (double)RAND_MAX - 0.5));
    }
    return x;
}

static double max_diff(const float *a, const float *b, size_t n) {
    double d = 0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - b[i]));
    return d;
}

static void check_against_naive(const float *bank, size_t n, size_t pad_to) {
    float *x = signal_of(n, (unsigned)n);
    mel_config c = mel_default_config(bank, 80);
    c.pad_to = pad_to;
    c.truncate = 0;
    const size_t frames = mel_frame_count(&c, n);
    size_t want_frames;
    float *want = naive_features(bank, 80, x, n, n > pad_to ? n : pad_to, &want_frames);
    float *got = malloc(sizeof(float) * (frames ? frames : 1) * 80);
    char err[200] = "";
    const int rc = mel_log_spectrogram(&c, x, n, got, err, sizeof err);
    if (want_frames == 0) {
        CHECKF(rc == -1 && err[0], "%zu samples, pad to %zu: no frame, yet no error", n, pad_to);
    } else {
        CHECKF(rc == 0 && frames == want_frames, "%zu samples, pad to %zu: %s (%zu frames, want %zu)", n, pad_to, err,
               frames, want_frames);
        const double d = rc ? 1 : max_diff(got, want, frames * 80);
        CHECKF(d <= 2e-6, "%zu samples, pad to %zu: %g off the naive spectrogram", n, pad_to, d);
    }
    free(x);
    free(want);
    free(got);
}

static void test_spectrogram(const float *bank) {
    static const size_t lengths[] = {0, 1, 2, 159, 160, 199, 200, 201, 399, 400, 401, 1000, 4321};
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
        check_against_naive(bank, lengths[i], 0);    /* padding="longest": the signal alone */
        check_against_naive(bank, lengths[i], 4000); /* padded with zeros first, as to 30 s */
    }
    /* Whisper's window: 3000 frames whatever the length; silence is (log10(1e-10) + 4) / 4 */
    static const size_t edge[] = {0, 1, 399, 400, 401, 480000, 500000};
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) {
        float *x = signal_of(edge[i], 7);
        const mel_config c = mel_default_config(bank, 80);
        float *got = malloc(sizeof(float) * MEL_WINDOW_FRAMES * 80);
        char err[200] = "";
        CHECK(mel_frame_count(&c, edge[i]) == MEL_WINDOW_FRAMES);
        const int rc = mel_log_spectrogram(&c, x, edge[i], got, err, sizeof err);
        CHECKF(rc == 0, "%zu samples: %s", edge[i], err);
        int finite = 1, silent_tail = 1;
        for (size_t j = 0; j < (size_t)MEL_WINDOW_FRAMES * 80; j++) finite &= isfinite(got[j]) && got[j] <= 2.6f;
        for (size_t j = 10 * 80; edge[i] < 1000 && j < (size_t)MEL_WINDOW_FRAMES * 80; j++)
            silent_tail &= edge[i] ? got[j] == got[MEL_WINDOW_FRAMES * 80 - 1] : got[j] == -1.5f;
        CHECKF(finite && silent_tail, "%zu samples: values out of place", edge[i]);
        free(x);
        free(got);
    }
}

/* ---------------------------------------------------------------------------------------
 * Streaming, truncation, refusals */

static void test_stream(const float *bank) {
    const size_t n = 70000;
    float *x = signal_of(n, 3);
    mel_config c = mel_default_config(bank, 80);
    c.truncate = 0;
    c.pad_to = 0;
    const size_t frames = mel_frame_count(&c, n);
    float *once = malloc(sizeof(float) * frames * 80);
    char err[200] = "";
    CHECK(mel_log_spectrogram(&c, x, n, once, err, sizeof err) == 0);
    static const size_t chunks[] = {1, 7, 160, 401, 1000, 65537, 70000};
    for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
        mel_stream *s = mel_stream_new(&c, err, sizeof err);
        int pushed = 1;
        for (size_t at = 0; at < n; at += chunks[i])
            pushed &= mel_stream_push(s, x + at, n - at < chunks[i] ? n - at : chunks[i], err, sizeof err) == 0;
        CHECK(pushed);
        size_t got_frames;
        float *got = mel_stream_finish(s, &got_frames, err, sizeof err);
        CHECKF(got && got_frames == frames && !memcmp(got, once, sizeof(float) * frames * 80),
               "chunks of %zu: not the one-call features bit for bit", chunks[i]);
        CHECK(mel_stream_finish(s, &got_frames, err, sizeof err) == NULL && got_frames == 0);
        free(got);
        mel_stream_free(s);
    }
    /* truncation: 40 s cut to the first 30 s; without it the whole 40 s */
    const size_t long_n = 640000;
    float *y = signal_of(long_n, 5), *cut = malloc(sizeof(float) * 4000 * 80), *first = malloc(sizeof(float) * 3000 * 80);
    const mel_config win = mel_default_config(bank, 80);
    CHECK(mel_log_spectrogram(&win, y, long_n, cut, err, sizeof err) == 0);
    CHECK(mel_log_spectrogram(&win, y, MEL_WINDOW_SAMPLES, first, err, sizeof err) == 0);
    CHECK(!memcmp(cut, first, sizeof(float) * 3000 * 80));
    mel_config whole = win;
    whole.truncate = 0;
    CHECK(mel_frame_count(&whole, long_n) == 4000);
    CHECK(mel_log_spectrogram(&whole, y, long_n, cut, err, sizeof err) == 0);
    free(y);
    free(cut);
    free(first);
    free(once);
    free(x);
}

static void test_refusals(const float *bank) {
    char err[200] = "";
    mel_config c = mel_default_config(bank, 80);
    float x[1000] = {0}, out[3000 * 80];
    x[500] = NAN;
    CHECK(mel_log_spectrogram(&c, x, 1000, out, err, sizeof err) == -1 && strstr(err, "sample 500 "));
    x[500] = INFINITY;
    CHECK(mel_log_spectrogram(&c, x, 1000, out, err, sizeof err) == -1 && strstr(err, "not a finite number"));
    mel_stream *s = mel_stream_new(&c, err, sizeof err);
    size_t frames;
    CHECK(mel_stream_push(s, x, 1000, err, sizeof err) == -1);
    CHECK(mel_stream_push(s, x, 10, err, sizeof err) == -1 && strstr(err, "failed earlier"));
    CHECK(mel_stream_finish(s, &frames, err, sizeof err) == NULL && frames == 0);
    mel_stream_free(s);
    c.pad_to = 0;
    CHECK(mel_log_spectrogram(&c, x, 0, out, err, sizeof err) == -1 && strstr(err, "no audio samples"));
    c.n_mels = 0;
    CHECK(mel_stream_new(&c, err, sizeof err) == NULL && strstr(err, "mel filters"));
    float bad[80 * MEL_BINS];
    memcpy(bad, bank, sizeof bad);
    bad[5 * MEL_BINS + 3] = NAN;
    c = mel_default_config(bad, 80);
    CHECK(mel_stream_new(&c, err, sizeof err) == NULL && strstr(err, "filter 5, bin 3"));
    c = mel_default_config(NULL, 80);
    CHECK(mel_stream_new(&c, err, sizeof err) == NULL);
}

/* How long a 30-second window takes (printed, not checked: the sanitizer builds run here too). */
static void time_window(const float *bank) {
    float *x = signal_of(MEL_WINDOW_SAMPLES, 11), *out = malloc(sizeof(float) * MEL_WINDOW_FRAMES * 80);
    const mel_config c = mel_default_config(bank, 80);
    char err[200];
    double best = 1e9;
    for (int r = 0; r < 3; r++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        CHECK(mel_log_spectrogram(&c, x, MEL_WINDOW_SAMPLES, out, err, sizeof err) == 0);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        const double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) * 1e-6;
        best = ms < best ? ms : best;
    }
    printf("a 30-second window (3000 frames x 80 mels): %.1f ms, one thread (best of 3)\n", best);
    free(x);
    free(out);
}

int main(void) {
    static float bank[80 * MEL_BINS];
    mel_filters(80, MEL_N_FFT, MEL_RATE, bank);
    test_fft();
    test_filters();
    test_spectrogram(bank);
    test_stream(bank);
    test_refusals(bank);
    time_window(bank);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
