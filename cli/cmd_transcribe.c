/* attend transcribe: speech to text (and to English) with a Whisper checkpoint: each input is
 * one 30-second window of log-mel features (.npy, as `attend features` writes them), decoded
 * as HF's generate() decodes it (model/speech_api.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "json.h"
#include "npz.h"
#include "npy_read.h"
#include "options.h"
#include "output.h"
#include "speech_input.h"
#include "transcript_write.h"

typedef struct {
    cli_model_options common;
    attend_params p;
    attend_speech_params sp;
    const char *output;    /* txt | json | srt | vtt | verbose_json */
    const char *dump_path; /* --dump-attention */
    int dump_logits;
    int max_length;
    double max_seconds;    /* --max-duration */
    int timing;         /* --timing */
    double load_seconds;
    char **files;
    int n_files;
    float temperatures[16]; /* --temperature: its list (sp.temperatures points here) */
} transcribe_options;

static void transcribe_help(void) {
    printf("usage: attend transcribe -m WHISPER.gguf [options] AUDIO|FEATURES.npy|-...\n"
           "\n"
           "Transcribe (or translate into English) speech with a Whisper checkpoint exported by\n"
           "tools/export_whisper.py. AUDIO: any file libsndfile reads (WAV, FLAC, Ogg, MP3, ...;\n"
           "- reads standard input), mixed to mono and resampled to 16 kHz (libsoxr), turned into\n"
           "Whisper's log-mel features as HF's WhisperFeatureExtractor does (docs/audio.md).\n"
           "FEATURES.npy: such features already, [n_mels, frames] float32 (HF's input_features,\n"
           "100 frames a second, as attend features -o writes them). Up to 3000 frames (30 s) are one\n"
           "window; longer audio is decoded window by window as HF's long-form generate() does\n"
           "(timestamps on; each window starts where the last complete segment ended). One\n"
           "output per input, in order.\n"
           "\n"
           "options:\n"
           "  -m, --model FILE       the Whisper .gguf\n"
           "  --language CODE|auto   the spoken language (multilingual models; default auto:\n"
           "                         detected from the window, HF's detect_language; without\n"
           "                         --task, the language the checkpoint's forced_decoder_ids\n"
           "                         fix, if they fix one)\n"
           "  --task transcribe|translate  transcribe or translate into English (default: HF's\n"
           "                         task=None: the checkpoint's forced task with --language auto,\n"
           "                         none if it forces none; transcribe with a language given)\n"
           "  --timestamps           timestamp tokens (segments with their times)\n"
           "  --word-timestamps      each word's times too, read from the cross-attention of the\n"
           "                         model's alignment heads as HF's return_token_timestamps reads\n"
           "                         them: json gives each segment's words (word, start, end,\n"
           "                         probability), verbose_json OpenAI's \"words\"; txt, srt and\n"
           "                         vtt stay as they are. Turns --timestamps on, as HF's pipeline\n"
           "                         does for return_timestamps=\"word\" (docs/whisper.md)\n"
           "  --beam N, --greedy     beam search with N beams, or greedy (the model's default)\n"
           "  --max-length N         tokens at most, the prompt included (default: the model's)\n"
           "  --temperature T[,T...] 0 (default): the search above; T > 0: sampling at T (top-k 50);\n"
           "                         a list (OpenAI's 0,0.2,0.4,0.6,0.8,1): temperature fallback as\n"
           "                         HF's generate does it, window by window, while a threshold\n"
           "                         below says so (docs/whisper.md)\n"
           "  --compression-ratio-threshold X  fall back when the zlib ratio of a window's tokens\n"
           "                         is above X (OpenAI: 2.4; default off, as HF)\n"
           "  --logprob-threshold X  fall back when a window's average log-probability is below X\n"
           "                         (OpenAI: -1; default off)\n"
           "  --no-speech-threshold X  skip a window as silence when its no-speech probability is\n"
           "                         above X and its average log-probability below\n"
           "                         --logprob-threshold (OpenAI: 0.6; default off)\n"
           "  --seed N               sampling's seed (default 0)\n"
           "  --output FORMAT        txt: the text, one line per input (default); json: one object\n"
           "                         per input: file, language, duration, text, segments (start,\n"
           "                         end, text, avg_logprob, temperature, compression_ratio,\n"
           "                         no_speech_prob, tokens); srt, vtt: subtitles, one cue\n"
           "                         per segment; verbose_json: OpenAI's (as attend serve answers\n"
           "                         /v1/audio/transcriptions). srt, vtt and verbose_json turn\n"
           "                         --timestamps on\n"
           "  --dump-attention FILE  each input one window: every attention matrix to FILE.npz;\n"
           "                         json then gives the window's tokens after <|startoftranscript|>\n"
           "  --dump-logits          with --dump-attention: the raw logits of every step too\n"
           "  --max-duration S       refuse audio longer than S seconds (default 36000: 10 hours)\n"
           "  --timing               after each input, on stderr: seconds to load the model,\n"
           "                         in the encoder, in the decoder, the decoder steps and the\n"
           "                         encoder passes\n"
           "  -t, --threads N        threads (default: one per core)\n"
           "  -h, --help             this help\n");
}

/* --temperature T[,T...]: numbers >= 0, at most 16. */
static int take_temperatures(cli_args *a, transcribe_options *o) {
    const char *v;
    int rc = cli_take_str(a, &v);
    if (rc != CLI_OPT_TAKEN) return rc;
    int n = 0;
    for (const char *at = v; n < 16;) {
        char *end;
        const double t = strtod(at, &end);
        if (end == at || !(t >= 0 && t <= 100) || (*end && *end != ',')) break;
        o->temperatures[n++] = (float)t;
        if (!*end) {
            o->sp.temperatures = o->temperatures, o->sp.n_temperatures = n;
            return CLI_OPT_TAKEN;
        }
        at = end + 1;
    }
    fprintf(stderr, "attend transcribe: --temperature takes numbers 0..100, comma-separated (at most 16), not '%s'\n",
            v);
    return EXIT_USAGE;
}

/* The fallback's thresholds and the seed; CLI_OPT_OTHER if not one of them. */
static int take_threshold(cli_args *a, transcribe_options *o) {
    attend_speech_params *sp = &o->sp;
    if (cli_is(a, NULL, "--compression-ratio-threshold"))
        return sp->use_compression_ratio = 1, cli_take_float(a, 0, 1e6, &sp->compression_ratio_threshold);
    if (cli_is(a, NULL, "--logprob-threshold"))
        return sp->use_logprob = 1, cli_take_float(a, -1e6, 0, &sp->logprob_threshold);
    if (cli_is(a, NULL, "--no-speech-threshold"))
        return sp->use_no_speech = 1, cli_take_float(a, 0, 1, &sp->no_speech_threshold);
    if (cli_is(a, NULL, "--seed")) {
        int seed;
        const int rc = cli_take_int(a, 0, 2147483647, &seed);
        o->p.seed = (unsigned long long)seed;
        return rc;
    }
    return CLI_OPT_OTHER;
}

static int take_transcribe_option(cli_args *a, transcribe_options *o) {
    const char *v;
    int rc;
    if (cli_is(a, NULL, "--temperature")) return take_temperatures(a, o);
    if ((rc = take_threshold(a, o)) != CLI_OPT_OTHER) return rc;
    if (cli_is(a, NULL, "--language")) return cli_take_str(a, &o->sp.language);
    if (cli_is(a, NULL, "--timestamps")) return o->sp.timestamps = 1, CLI_OPT_TAKEN;
    if (cli_is(a, NULL, "--word-timestamps")) return o->sp.word_timestamps = o->sp.timestamps = 1, CLI_OPT_TAKEN;
    if (cli_is(a, NULL, "--max-length")) return cli_take_int(a, 2, 1 << 20, &o->max_length);
    if (cli_is(a, NULL, "--dump-attention")) return cli_take_str(a, &o->dump_path);
    if (cli_is(a, NULL, "--dump-logits")) return o->dump_logits = 1, CLI_OPT_TAKEN;
    if (cli_is(a, NULL, "--max-duration")) {
        float s;
        if ((rc = cli_take_float(a, 0.01, 1e9, &s)) == CLI_OPT_TAKEN) o->max_seconds = s;
        return rc;
    }
    if (cli_is(a, NULL, "--timing")) return o->timing = 1, CLI_OPT_TAKEN;
    if (cli_is(a, NULL, "--output")) {
        if ((rc = cli_take_str(a, &o->output)) != CLI_OPT_TAKEN) return rc;
        static const char *const formats[] = {"txt", "json", "srt", "vtt", "verbose_json", NULL};
        for (int i = 0; formats[i]; i++)
            if (!strcmp(o->output, formats[i])) return CLI_OPT_TAKEN;
        fprintf(stderr, "attend transcribe: --output is txt, json, srt, vtt or verbose_json, not '%s'\n", o->output);
        return EXIT_USAGE;
    }
    if (cli_is(a, NULL, "--task")) {
        if ((rc = cli_take_str(a, &v)) != CLI_OPT_TAKEN) return rc;
        if (!strcmp(v, "transcribe") || !strcmp(v, "translate")) {
            o->sp.task = !strcmp(v, "translate") ? ATTEND_TASK_TRANSLATE : ATTEND_TASK_TRANSCRIBE;
            return CLI_OPT_TAKEN;
        }
        fprintf(stderr, "attend transcribe: --task is transcribe or translate, not '%s'\n", v);
        return EXIT_USAGE;
    }
    return CLI_OPT_OTHER;
}

static int transcribe_parse(int argc, char **argv, transcribe_options *o) {
    cli_args a = {"transcribe", argc, argv, 0};
    int opts = 1;
    for (a.i = 1; a.i < argc; a.i++) {
        if (opts && !strcmp(argv[a.i], "--")) {
            opts = 0;
            continue;
        }
        int rc = CLI_OPT_OTHER;
        if (opts) rc = take_transcribe_option(&a, o);
        if (opts && rc == CLI_OPT_OTHER) rc = cli_model_option(&a, &o->common);
        if (opts && rc == CLI_OPT_OTHER && cli_is_option(argv[a.i])) return cli_unknown_option("transcribe", argv[a.i]);
        if (rc == CLI_OPT_OTHER) {
            argv[1 + o->n_files++] = argv[a.i];
            continue;
        }
        if (rc != CLI_OPT_TAKEN) return rc;
    }
    o->files = argv + 1;
    if (o->n_files == 0) {
        fprintf(stderr, "attend transcribe: no input (FEATURES.npy...; see --help)\n");
        return EXIT_USAGE;
    }
    return 0;
}

/* Features from path ([n_mels, frames]), checked against the model; window: exactly one
 * window's frames. 0 or an exit status. */
static int read_features(const attend_config *c, const char *path, int window, float **mel, int *frames) {
    char err[512];
    int rows, cols;
    if (npy_read_f32(path, mel, &rows, &cols, err, sizeof err)) {
        fprintf(stderr, "attend transcribe: %s\n", err);
        return EXIT_IO;
    }
    *frames = cols;
    if (rows != c->n_mels || (window && cols != c->audio_frames)) {
        fprintf(stderr, "attend transcribe: %s: features [%d, %d]; this model reads [%d, %s] (%d mel bins%s)\n",
                path, rows, cols, c->n_mels, window ? "3000" : "frames", c->n_mels,
                window ? ", one 30-second window with --dump-attention" : "");
        free(*mel);
        *mel = NULL;
        return EXIT_USAGE;
    }
    for (long i = 0; i < (long)rows * cols; i++)
        if (!((*mel)[i] > -1e30f && (*mel)[i] < 1e30f)) {
            fprintf(stderr, "attend transcribe: %s: value %ld is not a finite number\n", path, i);
            free(*mel);
            *mel = NULL;
            return EXIT_USAGE;
        }
    return 0;
}

/* --word-timestamps: a segment's words (each with the space before it, as the text has it). */
static void write_words(const attend_transcript *t, const attend_segment *s) {
    fputs(", \"words\": [", stdout);
    for (int k = 0; k < s->n_words; k++) {
        const attend_word *w = &t->words[s->first_word + k];
        fputs(k ? ", {\"word\": " : "{\"word\": ", stdout);
        json_str(stdout, w->word);
        printf(", \"start\": %.2f, \"end\": %.2f, \"probability\": %.4f}", w->start, w->end, w->probability);
    }
    putchar(']');
}

static void write_segments(const attend_transcript *t, int words) {
    fputs(", \"segments\": [", stdout);
    for (int i = 0; i < t->n_segments; i++) {
        const attend_segment *s = &t->segments[i];
        printf("%s{\"start\": %.2f, \"end\": %.2f, \"text\": ", i ? ", " : "", s->start, s->end);
        json_str(stdout, s->text);
        printf(", \"avg_logprob\": %.6g, \"temperature\": %g, \"compression_ratio\": %.6g, \"no_speech_prob\": %.6g",
               s->avg_logprob, s->temperature, s->compression_ratio, s->no_speech_prob);
        fputs(", \"tokens\": [", stdout);
        for (int k = 0; k < s->n_ids; k++) printf("%s%d", k ? ", " : "", s->ids[k]);
        putchar(']');
        if (words) write_words(t, s);
        putchar('}');
    }
    putchar(']');
}

/* srt, vtt, verbose_json: transcript_write.h's formats. */
static void write_other(attend_model *m, const transcribe_options *o, const attend_transcript *t, double seconds) {
    transcript_write_options w = transcript_default_write_options();
    w.task = o->sp.task == ATTEND_TASK_TRANSLATE ? "translate" : "transcribe";
    w.duration = seconds;
    w.words = o->sp.word_timestamps;
    w.timestamp_begin = transcript_timestamp_begin(m);
    transcript_write(stdout, t, o->output, &w);
}

static void write_transcript(const transcribe_options *o, const char *file, attend_transcript *t) {
    const char *text = t->text;
    while (*text == ' ') text++; /* the text starts with the space of its first word */
    if (!strcmp(o->output, "txt")) {
        cli_one_line(t->text);
        printf("%s\n", text);
        return;
    }
    fputs("{\"file\": ", stdout);
    json_str(stdout, file);
    fputs(", \"language\": ", stdout);
    json_str(stdout, t->language);
    printf(", \"duration\": %.2f, \"text\": ", t->duration);
    json_str(stdout, text);
    write_segments(t, o->sp.word_timestamps);
    fputs("}\n", stdout);
}

static void write_result(const transcribe_options *o, const char *file, const char *lang, attend_result *r) {
    const char *t = r->text;
    while (*t == ' ') t++; /* the text of a window starts with the space of its first word */
    if (!strcmp(o->output, "txt")) {
        cli_one_line(r->text);
        printf("%s\n", t);
        return;
    }
    fputs("{\"file\": ", stdout);
    json_str(stdout, file);
    fputs(", \"language\": ", stdout);
    json_str(stdout, lang);
    fputs(", \"text\": ", stdout);
    json_str(stdout, t);
    fputs(", \"tokens\": [", stdout);
    for (int i = 0; i < r->n_tgt; i++) printf("%s%d", i ? ", " : "", r->tgt_ids[i]);
    printf("], \"score\": %.6g}\n", r->score);
}

static int ends_with(const char *s, const char *tail);
static int read_audio(attend_model *m, const transcribe_options *o, const char *file, float **mel, int *frames,
                      double *seconds);

/* --dump-attention: one window (an audio file's first 30 s) decoded as one result, its
 * matrices written out. */
static int transcribe_window(attend_model *m, const transcribe_options *o, const char *file) {
    const attend_config *c = attend_get_config(m);
    float *mel = NULL;
    double seconds;
    int frames, status = ends_with(file, ".npy") ? read_features(c, file, 1, &mel, &frames)
                                                 : read_audio(m, o, file, &mel, &frames, &seconds);
    if (status) return status;
    if (frames > c->audio_frames) /* the first window: its frames of each mel row, moved together */
        for (int r = 1; r < c->n_mels; r++)
            memmove(mel + (size_t)r * c->audio_frames, mel + (size_t)r * frames, sizeof(float) * c->audio_frames);
    attend_result r;
    const char *lang = NULL;
    char err[512];
    const float *mels[1] = {mel};
    if (attend_decode_features(m, mels, 1, &o->sp, &o->p, &r, &lang, err, sizeof err)) {
        fprintf(stderr, "attend transcribe: %s: %s\n", file, err);
        free(mel);
        return EXIT_FAIL;
    }
    write_result(o, file, lang, &r);
    if (o->dump_path) {
        npz_writer *z = npz_open(o->dump_path, err, sizeof err);
        if (z) cli_dump_result(z, c, 0, &r, o->dump_logits);
        if (!z || npz_close(z, err, sizeof err)) {
            fprintf(stderr, "attend transcribe: %s\n", err);
            status = EXIT_IO;
        }
    }
    attend_result_free(&r);
    free(mel);
    return status;
}

static int ends_with(const char *s, const char *tail) {
    const size_t n = strlen(s), k = strlen(tail);
    return n >= k && !strcmp(s + n - k, tail);
}

/* An audio file (or "-": standard input) as the model's features [n_mels, frames] (the
 * server reads uploads the same way: speech_input.h); *seconds its length. 0 or an exit
 * status. */
static int read_audio(attend_model *m, const transcribe_options *o, const char *file, float **mel, int *frames,
                      double *seconds) {
    char err[512] = "";
    if (!strcmp(file, "-")) {
        size_t size;
        unsigned char *data = cli_read_stdin("transcribe", &size);
        *mel = data ? speech_features(m, NULL, data, size, o->max_seconds, frames, seconds, err, sizeof err) : NULL;
        free(data);
    } else {
        *mel = speech_features(m, file, NULL, 0, o->max_seconds, frames, seconds, err, sizeof err);
    }
    if (!*mel && err[0]) fprintf(stderr, "attend transcribe: %s: %s\n", file, err);
    return *mel ? 0 : EXIT_FAIL;
}

static double seconds_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* --timing: where an input's time went (tools/bench_whisper.py reads this line) */
static void print_timing(const transcribe_options *o, const char *file) {
    const attend_stats *st = o->p.stats;
    fprintf(stderr,
            "attend transcribe: %s: timing: load %.4f s, encoder %.4f s, decoder %.4f s, %lld steps, "
            "%lld encoder passes\n",
            file, o->load_seconds, st->encode_seconds, st->decode_seconds, st->steps, st->encoder_passes);
}

static int transcribe_one(attend_model *m, const transcribe_options *o, const char *file) {
    if (o->p.stats) memset(o->p.stats, 0, sizeof *o->p.stats);
    if (o->dump_path) {
        const int status = transcribe_window(m, o, file);
        if (!status && o->timing) print_timing(o, file);
        return status;
    }
    float *mel = NULL;
    int frames;
    double seconds = 0; /* .npy: the features' own length */
    int status = ends_with(file, ".npy") ? read_features(attend_get_config(m), file, 0, &mel, &frames)
                                         : read_audio(m, o, file, &mel, &frames, &seconds);
    if (status) return status;
    attend_transcript t;
    char err[512];
    attend_speech_params sp = o->sp;
    /* an audio file's frames of sound (HF's num_frames), which word times keep within */
    if (seconds > 0) sp.audio_frames = (int)(llround(seconds * 16000) / 160);
    if (attend_transcribe_features(m, mel, frames, &sp, &o->p, &t, err, sizeof err)) {
        fprintf(stderr, "attend transcribe: %s: %s\n", file, err);
        free(mel);
        return EXIT_FAIL;
    }
    if (!strcmp(o->output, "txt") || !strcmp(o->output, "json")) write_transcript(o, file, &t);
    else write_other(m, o, &t, seconds);
    if (o->timing) print_timing(o, file);
    attend_transcript_free(&t);
    free(mel);
    return 0;
}

int cmd_transcribe(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        transcribe_help();
        return EXIT_OK;
    }
    transcribe_options o = {.sp = attend_default_speech_params(), .output = "txt", .max_seconds = 36000};
    int status = transcribe_parse(argc, argv, &o);
    if (status) return status;
    if (strcmp(o.output, "txt") && strcmp(o.output, "json")) {
        if (o.dump_path) {
            fprintf(stderr, "attend transcribe: --dump-attention writes txt or json, not --output %s\n", o.output);
            return EXIT_USAGE;
        }
        o.sp.timestamps = 1; /* subtitles and segments need times */
    }
    if (o.dump_path && o.sp.word_timestamps) {
        fprintf(stderr, "attend transcribe: --dump-attention writes one window's result, without words: "
                        "leave out --word-timestamps\n");
        return EXIT_USAGE;
    }
    const unsigned long long seed = o.p.seed;
    if (o.sp.use_no_speech && !o.sp.use_logprob) {
        fprintf(stderr, "attend transcribe: --no-speech-threshold needs --logprob-threshold (HF's rule reads both)\n");
        return EXIT_USAGE;
    }
    o.p = cli_model_params(&o.common);
    o.p.seed = seed;
    o.p.max_length = o.max_length;
    o.p.want_attention = o.dump_path != NULL;
    o.p.want_logits = o.dump_logits;
    o.p.want_scores = strcmp(o.output, "txt") || o.dump_path;
    attend_stats stats;
    if (o.timing) o.p.stats = &stats;
    const double t0 = seconds_now();
    attend_model *m = cli_load_model(o.common.model);
    o.load_seconds = seconds_now() - t0;
    if (!attend_get_config(m)->audio) {
        fprintf(stderr, "attend transcribe: %s is a text model (%s): use attend translate\n",
                o.common.model ? o.common.model : "the model", attend_get_config(m)->architecture);
        attend_free(m);
        return EXIT_USAGE;
    }
    for (int i = 0; i < o.n_files && !status; i++) {
        status = transcribe_one(m, &o, o.files[i]);
        if (!status) status = cli_flush_stdout();
    }
    attend_free(m);
    return status;
}
