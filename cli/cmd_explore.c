/* attend explore: translate (or force-decode) sentences and write one self-contained HTML
 * page with every attention matrix: head view, matrix view, grid of all heads, word
 * alignments. The page (python/attend/explore.html, compiled in as explore_html; the Python
 * package fills the same page) carries its own
 * CSS and JavaScript and reads its data from an inline JSON block; it loads nothing. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/align.h"
#include "cli.h"
#include "explore_audio.h"
#include "explore_json.h"
#include "json.h"
#include "options.h"
#include "page_file.h"

extern const char explore_html[]; /* build/cli/explore_html.c, from python/attend/explore.html */

/* A longer side makes a page no browser draws well (a 200-piece side is 40,000 cells per
 * head); such lines are refused, not cut. */
#define EXPLORE_MAX_PIECES 200
#define EXPLORE_MAX_SENTENCES 100

static void usage_explore(FILE *f) {
    fprintf(f,
            "usage: attend explore [-m MODEL.gguf] [options] [\"source sentence\"]\n"
            "       attend explore -m WHISPER.gguf [options] AUDIO\n"
            "\n"
            "Translate sentences (the argument, else each line of standard input) and write one\n"
            "self-contained HTML page that shows every attention matrix: a head view (lines\n"
            "from each token to what it attends to, one colour per head), the matrix of the\n"
            "chosen layer and head, every layer x head as small multiples, and the word\n"
            "alignment with each target token's log-probability. Open the page from disk in any\n"
            "browser; it needs no network. Keys on the page: arrows change head and layer.\n"
            "\n"
            "With a speech model (Whisper), AUDIO (any file libsndfile reads; - for standard\n"
            "input) is heard as attend transcribe --dump-attention hears it: the features of the\n"
            "whole audio, its first 30-second window (shorter audio padded).\n"
            "The page shows the log-mel spectrogram, the tokens placed where the model heard them,\n"
            "and every decoder layer and head's cross-attention over the 1500 encoder frames (20 ms\n"
            "each) under the spectrogram's time axis; the alignment heads' average first.\n"
            "\n"
            "options:\n"
            "  -m, --model FILE   checkpoint (default: $ATTEND_MODEL, else models/de-en.gguf)\n"
            "  -o, --output FILE  the page (default explore.html; - for standard output)\n"
            "      --target TEXT  force-decode this translation of the one source sentence\n"
            "      --prefix TEXT  every translation starts with TEXT and the search goes on\n"
            "                     from there (as attend translate --prefix)\n"
            "      --src-lang L   multilingual models (M2M-100, NLLB, mBART): the source\n"
            "                     language\n"
            "      --tgt-lang L   multilingual models: the target language\n"
            "      --task NAME    T5 models: write the task's prefix before the text; speech\n"
            "                     models: transcribe (default) or translate (into English)\n"
            "      --language L   speech models: the spoken language (default: detected)\n"
            "      --timestamps   speech models: decode with timestamp tokens\n"
            "      --max-duration S  speech models: refuse audio longer than S seconds\n"
            "                     (default 36000: 10 hours)\n"
            "      --max-length N tokens at most, the start counted (default: the model's)\n"
            "      --split MODE   sentences (default) or none: translate a SOURCE of several\n"
            "                     sentences sentence by sentence, or as one sequence\n"
            "      --split-lang L the splitting rules' language (default: --src-lang)\n"
            "      --beam N       translate with N beams (default: the model's setting)\n"
            "      --greedy       the same as --beam 1\n"
            "      --preset VIEW  alignment view listed first (default: the model's own, see\n"
            "                     attend info and attend align --help); the model's own,\n"
            "                     last:0, penultimate:avg and all:avg are always offered\n"
            "  -t, --threads N    threads (default: physical cores, or $OMP_NUM_THREADS)\n"
            "  -h, --help         this help\n"
            "\n"
            "Lines of more than %d pieces on either side are refused (the page would be too\n"
            "large to draw); at most %d sentences make one page.\n",
            EXPLORE_MAX_PIECES, EXPLORE_MAX_SENTENCES);
}

/* ---------------------------------------------------------------------------------------
 * input */

/* Lines of standard input (without their newlines) into a malloc'd array; NULL on error. */
static char **read_lines(int *n) {
    char **lines = NULL, *line = NULL;
    size_t cap = 0;
    ssize_t len;
    *n = 0;
    while ((len = getline(&line, &cap, stdin)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (*n >= EXPLORE_MAX_SENTENCES) {
            fprintf(stderr, "attend explore: more than %d lines on standard input; one page shows at most %d "
                            "sentences (split the input)\n", EXPLORE_MAX_SENTENCES, EXPLORE_MAX_SENTENCES);
            exit(EXIT_USAGE);
        }
        char **grown = realloc(lines, sizeof(char *) * (size_t)(*n + 1));
        if (!grown || !(grown[*n] = strdup(line))) {
            fprintf(stderr, "attend explore: out of memory\n");
            exit(EXIT_FAIL);
        }
        lines = grown;
        (*n)++;
    }
    free(line);
    return lines;
}

static int blank(const char *s) {
    for (; *s; s++)
        if (*s != ' ' && *s != '\t' && *s != '\r' && *s != '\n' && *s != '\f' && *s != '\v') return 0;
    return 1;
}

/* ---------------------------------------------------------------------------------------
 * Options */

typedef struct {
    cli_model_options common; /* -m, -t, --beam, --greedy, --src-lang, --tgt-lang */
    const char *source;       /* the sentence (NULL: the lines of standard input) */
    const char *output;       /* -o: the page (NULL: explore.html) */
    const char *target;       /* --target: force-decode this translation */
    const char *prefix;       /* --prefix: each translation starts with this text */
    const char *preset;       /* --preset: the view listed first */
    const char *language;     /* --language: speech models, the spoken language */
    int timestamps;           /* --timestamps: speech models, timestamp tokens */
    int max_length;           /* --max-length: tokens at most (0: the model's) */
    float max_seconds;        /* --max-duration: speech models, longer audio refused */
} explore_options;

/* The defaults: the model's settings, explore.html, the default view first. */
static explore_options explore_default_options(void) {
    explore_options o;
    memset(&o, 0, sizeof o);
    o.max_seconds = 36000; /* as attend transcribe: 10 hours */
    return o;
}

/* 0 or EXIT_USAGE. */
static int parse_explore(int argc, char **argv, explore_options *o) {
    *o = explore_default_options();
    cli_args a = {"explore", argc, argv, 0};
    for (a.i = 1; a.i < argc; a.i++) {
        int rc = cli_model_option(&a, &o->common);
        if (rc == CLI_OPT_OTHER && cli_is(&a, "-o", "--output")) rc = cli_take_str(&a, &o->output);
        if (rc == CLI_OPT_OTHER && cli_is(&a, NULL, "--target")) rc = cli_take_str(&a, &o->target);
        if (rc == CLI_OPT_OTHER && cli_is(&a, NULL, "--prefix")) rc = cli_take_str(&a, &o->prefix);
        if (rc == CLI_OPT_OTHER && cli_is(&a, NULL, "--preset")) rc = cli_take_str(&a, &o->preset);
        if (rc == CLI_OPT_OTHER && cli_is(&a, NULL, "--language")) rc = cli_take_str(&a, &o->language);
        if (rc == CLI_OPT_OTHER && cli_is(&a, NULL, "--max-length")) rc = cli_take_int(&a, 2, 1 << 20, &o->max_length);
        if (rc == CLI_OPT_OTHER && cli_is(&a, NULL, "--timestamps")) rc = (o->timestamps = 1, CLI_OPT_TAKEN);
        if (rc == CLI_OPT_OTHER && cli_is(&a, NULL, "--max-duration")) rc = cli_take_float(&a, 0.01, 1e9, &o->max_seconds);
        if (rc == CLI_OPT_OTHER)
            rc = cli_one_text(&a, &o->source, "one source sentence as an argument (quote it); several come "
                                              "one per line on standard input");
        if (rc != CLI_OPT_TAKEN) return rc;
    }
    return 0;
}

/* Options that do not go together, before anything is read. 0 or EXIT_USAGE. */
static int check_options(const explore_options *o) {
    char err[512];
    attend_view check;
    if (o->target && !o->source) {
        fprintf(stderr, "attend explore: --target needs the source sentence as an argument\n");
        return EXIT_USAGE;
    }
    if (o->target && o->prefix) {
        fprintf(stderr, "attend explore: --prefix starts a free translation; --target forces a whole one: not both\n");
        return EXIT_USAGE;
    }
    if (o->preset && attend_view_parse(o->preset, &check, err, sizeof err)) {
        fprintf(stderr, "attend explore: --preset: %s\n", err);
        return EXIT_USAGE;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * The page */

typedef struct {
    const explore_options *o;
    const char *const *sources; /* [n] the sentences */
    int n;
    attend_model *m;
    const attend_config *c;
    attend_params p;
    char *presets[EXPLORE_PRESETS]; /* the alignment views offered */
    int np;
} explore_run;

/* The model, its languages and the presets checked against it, the parameters. 0 or EXIT_USAGE. */
static int load_model(explore_run *x) {
    const explore_options *o = x->o;
    char err[512];
    x->c = attend_get_config(x->m);
    if (o->language || o->timestamps) {
        fprintf(stderr, "attend explore: --%s is for speech models (Whisper); a text model takes --src-lang and "
                        "--tgt-lang\n", o->language ? "language" : "timestamps");
        return EXIT_USAGE;
    }
    if (cli_check_languages("explore", x->m, o->common.src_lang, o->common.tgt_lang, 1) ||
        cli_check_task("explore", x->m, o->common.task))
        return EXIT_USAGE;
    x->np = explore_presets(o->preset, x->c->alignment_view, x->c->decoder_layers, x->presets);
    for (int k = 0; k < x->np; k++) {
        attend_view v;
        attend_view_parse(x->presets[k], &v, err, sizeof err);
        if (attend_view_check(&v, x->c->decoder_layers, x->c->decoder_heads, err, sizeof err)) {
            fprintf(stderr, "attend explore: --preset: %s\n", err);
            return EXIT_USAGE;
        }
    }
    x->p = cli_model_params(&o->common);
    x->p.max_length = o->max_length;
    x->p.want_attention = x->p.want_scores = 1;
    return 0;
}

/* The model file's name for the page's header. */
static const char *model_name(const explore_options *o) {
    const char *env = getenv("ATTEND_MODEL");
    const char *mp = o->common.model ? o->common.model : env && *env ? env : "de-en.gguf", *slash = strrchr(mp, '/');
    return slash ? slash + 1 : mp;
}

/* The page up to its sentences: the template up to the data, then the model's name, the
 * search settings, the shape and the presets. Returns where the template goes on. */
static const char *write_page_head(FILE *f, const explore_run *x) {
    const explore_options *o = x->o;
    const int beams = o->common.beams ? o->common.beams : x->c->num_beams;
    char settings[128];
    if (o->target) snprintf(settings, sizeof settings, "forced decoding of the given target");
    else if (beams > 1) snprintf(settings, sizeof settings, "beam search, %d beams", beams);
    else snprintf(settings, sizeof settings, "greedy search");
    const char *mark = strstr(explore_html, "@@DATA@@");
    fwrite(explore_html, 1, (size_t)(mark - explore_html), f);
    fputs("{\"model\":", f);
    json_str(f, model_name(o));
    fputs(",\"settings\":", f);
    json_str(f, settings);
    fprintf(f, ",\"config\":{\"encoder_layers\":%d,\"encoder_heads\":%d,\"decoder_layers\":%d,\"decoder_heads\":%d}",
            x->c->encoder_layers, x->c->encoder_heads, x->c->decoder_layers, x->c->decoder_heads);
    fputs(",\"presets\":", f);
    json_strs(f, (const char *const *)x->presets, x->np);
    fputs(",\"sentences\":[\n", f);
    return mark + strlen("@@DATA@@");
}

/* Sentence i (0-based) translated and written. The exit status: EXIT_FAIL stops the page. */
static int write_sentence(FILE *f, const explore_run *x, int i) {
    const char *source = x->sources[i], *target = x->o->target;
    char err[512];
    if (blank(source)) { /* as attend translate: an empty line, not translated */
        explore_json_blank(f, source);
        return EXIT_OK;
    }
    attend_result r;
    const char *targets[1] = {target}, *prefixes[1] = {x->o->prefix};
    attend_params p = x->p;
    if (x->o->prefix) p.target_prefix = prefixes;
    if (attend_translate(x->m, &source, NULL, 1, target ? targets : NULL, &p, &r, err, sizeof err)) {
        fprintf(stderr, "attend explore: line %d: %s\n", i + 1, err);
        return EXIT_FAIL;
    }
    int status = EXIT_OK;
    if (r.status) {
        fprintf(stderr, "attend explore: line %d: %s\n", i + 1, r.message);
        status = EXIT_FAIL;
    } else if (r.n_src > EXPLORE_MAX_PIECES || r.n_tgt > EXPLORE_MAX_PIECES) {
        fprintf(stderr, "attend explore: line %d is too long for the page: %d source and %d target pieces "
                        "(at most %d each); shorten or split it\n", i + 1, r.n_src, r.n_tgt, EXPLORE_MAX_PIECES);
        status = EXIT_USAGE;
    } else if (explore_json_sentence(f, source, &r, x->c, target != NULL, x->presets, x->np, err, sizeof err)) {
        fprintf(stderr, "attend explore: line %d: %s\n", i + 1, err);
        status = EXIT_FAIL;
    }
    attend_result_free(&r);
    return status;
}

/* The whole page to f; the exit status. */
static int write_page(FILE *f, const void *ctx) {
    const explore_run *x = ctx;
    const char *rest = write_page_head(f, x);
    int status = EXIT_OK;
    for (int i = 0; i < x->n && status == EXIT_OK; i++) {
        if (i) fputs(",\n", f);
        status = write_sentence(f, x, i);
    }
    fputs("\n]}", f);
    fputs(rest, f);
    return status;
}

/* The page to -o's file (page_file.h: whole or not at all), or to standard output. */
static int write_page_file(const explore_run *x) {
    const char *path = x->o->output ? x->o->output : "explore.html";
    const int status = page_write_file("explore", path, write_page, x);
    if (status == EXIT_OK && strcmp(path, "-"))
        fprintf(stderr, "attend explore: wrote %s (%d sentence%s)\n", path, x->n, x->n == 1 ? "" : "s");
    return status;
}

/* ---------------------------------------------------------------------------------------
 * explore */

/* A text model's page: the sentence, or the lines of standard input. The exit status. */
static int explore_text(attend_model *m, const explore_options *o) {
    explore_run x = {0};
    x.o = o;
    x.m = m;
    x.n = 1;
    char **lines = NULL;
    x.sources = &o->source;
    if (!o->source) {
        lines = read_lines(&x.n);
        x.sources = (const char *const *)lines;
        if (x.n == 0) {
            fprintf(stderr, "attend explore: no source sentence (give one, or lines on standard input)\n");
            return EXIT_USAGE;
        }
    }
    int status = load_model(&x);
    if (!status) status = write_page_file(&x);
    for (int i = 0; lines && i < x.n; i++) free(lines[i]);
    free(lines);
    return status;
}

/* A speech model's page (explore_audio.h): the audio file's first window. The exit status. */
static int explore_speech(attend_model *m, const explore_options *o) {
    const char *text_only = o->target ? "--target" : o->prefix ? "--prefix" : o->preset ? "--preset"
                          : o->common.src_lang ? "--src-lang" : o->common.tgt_lang ? "--tgt-lang"
                          : o->common.split_lang ? "--split-lang" : NULL;
    const char *task = o->common.task;
    if (text_only) {
        fprintf(stderr, "attend explore: %s is for text models; a speech model takes --language, --task "
                        "transcribe|translate and --timestamps\n", text_only);
        return EXIT_USAGE;
    }
    if (!o->source) {
        fprintf(stderr, "attend explore: which audio file? (a speech model explores one: attend explore -m "
                        "MODEL AUDIO, or - for standard input)\n");
        return EXIT_USAGE;
    }
    if (task && strcmp(task, "transcribe") && strcmp(task, "translate")) {
        fprintf(stderr, "attend explore: --task is transcribe or translate for a speech model, not '%s'\n", task);
        return EXIT_USAGE;
    }
    explore_audio_options a = {o->source, o->output, model_name(o), attend_default_speech_params(),
                               cli_model_params(&o->common), o->max_seconds};
    a.sp.language = o->language;
    a.sp.task = task && !strcmp(task, "translate") ? ATTEND_TASK_TRANSLATE : ATTEND_TASK_TRANSCRIBE;
    a.sp.timestamps = o->timestamps;
    a.p.task = NULL;
    a.p.max_length = o->max_length;
    return explore_audio(m, &a);
}

int cmd_explore(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        usage_explore(stdout);
        return EXIT_OK;
    }
    explore_options o;
    int status = parse_explore(argc, argv, &o);
    if (!status) status = check_options(&o);
    if (status) return status;
    attend_model *m = cli_load_model(o.common.model);
    status = attend_get_config(m)->audio ? explore_speech(m, &o) : explore_text(m, &o);
    attend_free(m);
    return status;
}
