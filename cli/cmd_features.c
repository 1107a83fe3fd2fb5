/* attend features: Whisper's log-mel features of an audio file (audio/read.h, audio/mel.h), as
 * Hugging Face's WhisperFeatureExtractor gives them to the model. No model needed. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../audio/read.h"
#include "cli.h"
#include "npz.h"

#define FEATURES_MAX_DURATION 36000.0 /* 10 hours: 1.15 GB of frames at 80 mels */
#define FEATURES_MAX_STDIN ((size_t)1 << 30) /* FILE "-" is read into memory, up to 1 GiB */

typedef struct {
    const char *file, *output;
    int n_mels, whole, no_pad;
    double max_seconds;
} features_options;

static void features_help(void) {
    printf("usage: attend features FILE [-o OUT.npy|OUT.npz] [--n-mels 80|128] [--whole] [--no-pad]\n"
           "                       [--max-duration S]\n"
           "\n"
           "Compute Whisper's log-mel features of an audio file, as Hugging Face's\n"
           "WhisperFeatureExtractor gives them to the model: an array [n_mels, frames], a frame\n"
           "every 10 ms. Any file libsndfile reads (WAV, FLAC, Ogg, MP3, AIFF, ...); channels are\n"
           "averaged, other rates resampled to 16 kHz (libsoxr, high quality). Without -o, one\n"
           "line describes the file and the features. FILE - reads standard input (into memory, at\n"
           "most 1 GiB). The recipe: docs/audio.md.\n"
           "\n"
           "options:\n"
           "  -o, --output OUT  write the features: OUT.npy, or OUT.npz with the array as\n"
           "                    input_features\n"
           "  --n-mels N        80 (Whisper up to large-v2) or 128 (large-v3). Default 80\n"
           "  --whole           one spectrogram of the whole audio, however long (Hugging Face's\n"
           "                    truncation=False); default: the first 30 s, shorter audio padded\n"
           "                    with silence to 30 s (3000 frames)\n"
           "  --no-pad          the whole audio without padding to 30 s (padding=\"longest\")\n"
           "  --max-duration S  refuse audio longer than S seconds (default %.0f: 10 hours)\n"
           "  -h, --help        this help\n",
           FEATURES_MAX_DURATION);
}

/* options into o; 0 or EXIT_USAGE after one line. */
static int parse_features(int argc, char **argv, features_options *o) {
    *o = (features_options){.n_mels = 80, .max_seconds = FEATURES_MAX_DURATION};
    for (int i = 1, opts = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const int has_value = opts && (!strcmp(a, "-o") || !strcmp(a, "--output") || !strcmp(a, "--n-mels") ||
                                       !strcmp(a, "--max-duration"));
        if (has_value && !v) {
            fprintf(stderr, "attend features: %s needs a value (see --help)\n", a);
            return EXIT_USAGE;
        }
        if (opts && !strcmp(a, "--")) opts = 0;
        else if (opts && (!strcmp(a, "-o") || !strcmp(a, "--output"))) o->output = argv[++i];
        else if (opts && !strcmp(a, "--n-mels")) o->n_mels = cli_parse_int(a, argv[++i], 80, 128);
        else if (opts && !strcmp(a, "--max-duration")) o->max_seconds = cli_parse_float(a, argv[++i], 0.01, 1e9);
        else if (opts && !strcmp(a, "--whole")) o->whole = 1;
        else if (opts && !strcmp(a, "--no-pad")) o->no_pad = o->whole = 1;
        else if (opts && cli_is_option(a)) return cli_unknown_option("features", a);
        else if (o->file) {
            fprintf(stderr, "attend features: one FILE only (see --help)\n");
            return EXIT_USAGE;
        } else o->file = a;
    }
    if (o->n_mels != 80 && o->n_mels != 128) {
        fprintf(stderr, "attend features: --n-mels: 80 or 128\n");
        return EXIT_USAGE;
    }
    if (!o->file) {
        fprintf(stderr, "attend features: which audio file? (see --help)\n");
        return EXIT_USAGE;
    }
    return 0;
}

/* f ([frames][n_mels]) as an .npy file of [n_mels][frames], written a mel row at a time. */
static int write_npy(const char *path, const float *f, size_t frames, int n_mels, char *err, size_t errlen) {
    char head[128];
    int n = snprintf(head, sizeof head, "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %zu), }", n_mels, frames);
    const int total = (10 + n + 1 + 63) / 64 * 64; /* magic, version, length, dict, '\n': whole 64s */
    float *row = malloc(sizeof(float) * (frames ? frames : 1));
    FILE *out = row ? fopen(path, "wb") : NULL;
    if (!out) {
        snprintf(err, errlen, "%s: %s", path, row ? strerror(errno) : "out of memory");
        free(row);
        return -1;
    }
    const unsigned char magic[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(total - 10), (unsigned char)((total - 10) >> 8)};
    fwrite(magic, 1, sizeof magic, out);
    fprintf(out, "%s%*s\n", head, total - 10 - n - 1, "");
    for (int m = 0; m < n_mels; m++) {
        for (size_t t = 0; t < frames; t++) row[t] = f[t * n_mels + m];
        fwrite(row, sizeof(float), frames, out);
    }
    free(row);
    const int bad = ferror(out) | fclose(out);
    if (bad) snprintf(err, errlen, "%s: write failed", path);
    return bad ? -1 : 0;
}

/* f as an .npz holding input_features [n_mels][frames]. */
static int write_npz(const char *path, const float *f, size_t frames, int n_mels, char *err, size_t errlen) {
    float *t = malloc(sizeof(float) * (frames ? frames : 1) * n_mels);
    if (!t) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int m = 0; m < n_mels; m++)
        for (size_t i = 0; i < frames; i++) t[(size_t)m * frames + i] = f[i * n_mels + m];
    npz_writer *z = npz_open(path, err, errlen);
    const int shape[2] = {n_mels, (int)frames};
    if (z) npz_add_f32(z, "input_features", t, 2, shape);
    free(t);
    return z ? npz_close(z, err, errlen) : -1;
}

unsigned char *cli_read_stdin(const char *cmd, size_t *n) {
    size_t cap = 1 << 16;
    unsigned char *buf = malloc(cap);
    *n = 0;
    while (buf) {
        if (*n == cap) {
            unsigned char *b = cap < FEATURES_MAX_STDIN ? realloc(buf, cap * 2) : NULL;
            if (!b) {
                fprintf(stderr, "attend %s: standard input: %s\n", cmd,
                        cap < FEATURES_MAX_STDIN ? "out of memory" : "more than 1 GiB");
                free(buf);
                return NULL;
            }
            buf = b;
            cap *= 2;
        }
        const size_t got = fread(buf + *n, 1, cap - *n, stdin);
        *n += got;
        if (got == 0) break;
    }
    if (buf && ferror(stdin)) {
        fprintf(stderr, "attend %s: reading standard input: %s\n", cmd, strerror(errno));
        free(buf);
        return NULL;
    }
    if (!buf) fprintf(stderr, "attend %s: out of memory\n", cmd);
    return buf;
}

static int ends_with(const char *s, const char *tail) {
    const size_t n = strlen(s), k = strlen(tail);
    return n >= k && !strcmp(s + n - k, tail);
}

int cmd_features(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        features_help();
        return EXIT_OK;
    }
    features_options o;
    int status = parse_features(argc, argv, &o);
    if (status) return status;
    if (o.output && !ends_with(o.output, ".npy") && !ends_with(o.output, ".npz")) {
        fprintf(stderr, "attend features: -o %s: the name must end in .npy or .npz\n", o.output);
        return EXIT_USAGE;
    }
    float *bank = malloc(sizeof(float) * MEL_BINS * (size_t)o.n_mels);
    if (!bank) {
        fprintf(stderr, "attend features: out of memory\n");
        return EXIT_FAIL;
    }
    mel_filters(o.n_mels, MEL_N_FFT, MEL_RATE, bank);
    mel_config c = mel_default_config(bank, o.n_mels);
    c.truncate = !o.whole;
    c.pad_to = o.no_pad ? 0 : MEL_WINDOW_SAMPLES;
    char err[512];
    audio_info info = {0};
    size_t frames = 0, samples = 0;
    float *f = NULL;
    if (!strcmp(o.file, "-")) {
        size_t size;
        unsigned char *data = cli_read_stdin("features", &size);
        if (!data) {
            free(bank);
            return EXIT_IO;
        }
        f = audio_features_memory(data, size, o.max_seconds, &c, &frames, &info, &samples, err, sizeof err);
        free(data);
    } else {
        f = audio_features_file(o.file, o.max_seconds, &c, &frames, &info, &samples, err, sizeof err);
    }
    if (!f) {
        fprintf(stderr, "attend features: %s: %s\n", o.file, err);
        status = EXIT_FAIL;
    } else if (o.output) {
        const int rc = ends_with(o.output, ".npy") ? write_npy(o.output, f, frames, o.n_mels, err, sizeof err)
                                                   : write_npz(o.output, f, frames, o.n_mels, err, sizeof err);
        if (rc) fprintf(stderr, "attend features: %s\n", err);
        status = rc ? EXIT_IO : 0;
    } else {
        printf("%s: %s, %d Hz, %d channel%s; %.2f s at 16 kHz used -> %zu frames x %d mels\n", o.file, info.format,
               info.rate, info.channels, info.channels == 1 ? "" : "s", (double)samples / MEL_RATE, frames, o.n_mels);
    }
    free(f);
    free(bank);
    return status;
}
