/* attend serve: a translation server over one model (fixed at start: no request names a file
 * or a model). Options, start, wait for SIGTERM or SIGINT, then stop accepting, finish what is
 * in flight and exit 0. The parts: serve.h. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "serve.h"

static void usage_serve(FILE *f) {
    fprintf(f,
            "usage: attend serve [-m MODEL.gguf] [options]\n"
            "\n"
            "Serve translations over HTTP (docs/serve.md). Requests that arrive together are\n"
            "translated together in one batch; every answer equals attend translate's for the\n"
            "same line and settings.\n"
            "\n"
            "  POST /translate      LibreTranslate's API: {\"q\": \"text\" or [...], \"source\", \"target\"}\n"
            "                       -> {\"translatedText\": ...}\n"
            "  POST /v1/translate   attend's own: search options, scores, log-probabilities, word\n"
            "                       alignments, attention matrices\n"
            "  GET  /languages, GET /frontend/settings, POST /detect, POST /translate_file (.txt,\n"
            "       .html; GET /download_file/NAME): the rest of LibreTranslate's API\n"
            "  GET  /health, GET /v1/model (the facts attend info prints), GET / (a live explore page)\n"
            "  POST /v1/audio/transcriptions, /v1/audio/translations  OpenAI's speech API, with a\n"
            "       Whisper model (-m whisper.gguf, alone or beside text models): multipart file,\n"
            "       model, language, response_format json|text|srt|vtt|verbose_json, temperature,\n"
            "       timestamp_granularities[]\n"
            "\n"
            "options:\n"
            "  -m, --model FILE        checkpoint (default: $ATTEND_MODEL, else models/de-en.gguf)\n"
            "      --host ADDR         numeric address to bind (default 127.0.0.1: this machine only)\n"
            "      --port N            port (default 8080; 0: any free port; the port is printed)\n"
            "  -t, --threads N         threads translating (default: physical cores, or $OMP_NUM_THREADS)\n"
            "      --compute T         f32 (default, exact), bf16 (AVX-512 BF16 CPUs: faster,\n"
            "                          approximate) or auto (= f32)\n"
            "      --beam N, --greedy  the default search (default: the model's setting)\n"
            "      --src-lang L, --tgt-lang L  default languages of a multilingual model\n"
            "      --languages SRC-TGT the language pair of a model without language tokens, for\n"
            "                          /languages and \"source\": \"auto\" (default: read from the\n"
            "                          file's name, e.g. de-en.gguf or opus-mt-de-en: docs/serve.md)\n"
            "      --task NAME         T5 models: the default task (attend info lists them)\n"
            "      --split MODE        sentences (default) or none: the default for requests\n"
            "                          (a request's \"split\": false turns it off)\n"
            "      --split-lang L      the splitting rules' language (default: the source's)\n"
            "      --max-batch-tokens N  source tokens gathered into one batch (default 2048)\n"
            "      --gather-ms N       a batch gathers requests until none has come for N ms, at\n"
            "                          most 8N ms after its first (default 5)\n"
            "      --max-body BYTES    largest request body (default 1048576; larger: 413)\n"
            "      --max-queue N       sentences waiting at most (default 1024; more: 503)\n"
            "      --max-wait S        refuse (503) while the queue holds more than S seconds\n"
            "                          of work at the rate measured so far (default 10)\n"
            "      --timeout S         seconds a request may wait in the queue (then 503) and an\n"
            "                          idle connection stays open (default 30)\n"
            "      --max-connections N open connections at most (default 512; more: 503)\n"
            "      --max-per-address N open connections from one address at most (default 128;\n"
            "                          more: 503; 0: no limit)\n"
            "      --head-timeout S    seconds for a request's head to arrive whole, counted from\n"
            "                          its first byte however slowly it trickles (default 10; 408)\n"
            "      --allow-origin O    send Access-Control-Allow-Origin: O (default: no CORS header)\n"
            "      --no-access-log     no line per request on stderr\n"
            "      --api-keys FILE     require an \"api_key\" with each translate, detect and file\n"
            "                          request: FILE has one key a line, optionally followed by\n"
            "                          its own requests per minute (KEY 120); # comments (else 403)\n"
            "      --req-limit N       requests per client address per minute (default: no limit;\n"
            "                          more: 429 with Retry-After); a key's own limit replaces it\n"
            "      --char-limit N      characters of q per request (default: no limit; more: 400)\n"
            "      --max-audio-seconds S  longest audio a speech request may send (default 3600;\n"
            "                          longer: 400)\n"
            "      --max-audio-body BYTES  largest upload to /v1/audio (default 26214400, 25 MiB,\n"
            "                          OpenAI's limit; larger: 413)\n"
            "      --max-audio-queue N uploads waiting per speech model (default 8; more: 503)\n"
            "  -v, --verbose           a line per batch on stderr (its sentences and requests)\n"
            "  -h, --help              this help\n"
            "\n"
            "SIGTERM or SIGINT: stop accepting, finish the requests in flight, exit 0.\n");
}

static serve_options serve_default_options(void) {
    serve_options o;
    memset(&o, 0, sizeof o);
    o.host = "127.0.0.1";
    o.port = 8080;
    o.max_batch_tokens = 2048;
    o.gather_ms = 5;
    o.max_body = 1 << 20;
    o.max_queue = 1024;
    o.timeout = 30;
    o.max_wait = 10;
    o.max_connections = 512;
    o.max_per_address = 128;
    o.head_timeout = 10;
    o.access_log = 1;
    o.max_audio_seconds = 3600;
    o.max_audio_body = 25 << 20;
    o.max_audio_queue = 8;
    return o;
}

/* One option of serve's own at a->i. */
static int take_serve_option(cli_args *a, serve_options *o) {
    int body;
    if (cli_is(a, "-m", "--model")) {
        if (o->n_model_args == (int)(sizeof o->model_args / sizeof o->model_args[0])) {
            fprintf(stderr, "attend serve: at most %d models (-m)\n", o->n_model_args);
            return EXIT_USAGE;
        }
        return cli_take_str(a, &o->model_args[o->n_model_args++]);
    }
    if (cli_is(a, NULL, "--models")) return cli_take_str(a, &o->models_dir);
    if (cli_is(a, NULL, "--host")) return cli_take_str(a, &o->host);
    if (cli_is(a, NULL, "--port")) return cli_take_int(a, 0, 65535, &o->port);
    if (cli_is(a, NULL, "--max-batch-tokens")) return cli_take_int(a, 1, 1 << 20, &o->max_batch_tokens);
    if (cli_is(a, NULL, "--gather-ms")) return cli_take_int(a, 0, 10000, &o->gather_ms);
    if (cli_is(a, NULL, "--max-queue")) return cli_take_int(a, 1, 1 << 20, &o->max_queue);
    if (cli_is(a, NULL, "--max-wait")) return cli_take_int(a, 1, 86400, &o->max_wait);
    if (cli_is(a, NULL, "--timeout")) return cli_take_int(a, 1, 86400, &o->timeout);
    if (cli_is(a, NULL, "--max-connections")) return cli_take_int(a, 1, 100000, &o->max_connections);
    if (cli_is(a, NULL, "--max-per-address")) return cli_take_int(a, 0, 100000, &o->max_per_address);
    if (cli_is(a, NULL, "--head-timeout")) return cli_take_int(a, 1, 3600, &o->head_timeout);
    if (cli_is(a, NULL, "--allow-origin")) return cli_take_str(a, &o->allow_origin);
    if (cli_is(a, NULL, "--languages")) return cli_take_str(a, &o->languages);
    if (cli_is(a, NULL, "--api-keys")) return cli_take_str(a, &o->api_keys);
    if (cli_is(a, NULL, "--req-limit")) return cli_take_int(a, 1, 1000000, &o->req_limit);
    if (cli_is(a, NULL, "--char-limit")) return cli_take_int(a, 1, 1 << 30, &o->char_limit);
    if (cli_is(a, NULL, "--max-audio-queue")) return cli_take_int(a, 1, 100000, &o->max_audio_queue);
    if (cli_is(a, NULL, "--max-audio-seconds")) {
        float seconds;
        const int rc = cli_take_float(a, 1, 1e7, &seconds);
        o->max_audio_seconds = seconds;
        return rc;
    }
    if (cli_is(a, NULL, "--max-audio-body")) {
        int bytes;
        const int rc = cli_take_int(a, 1, 1 << 30, &bytes);
        o->max_audio_body = bytes;
        return rc;
    }
    if (cli_is(a, NULL, "--max-body")) {
        const int rc = cli_take_int(a, 1, 1 << 30, &body);
        o->max_body = body;
        return rc;
    }
    if (cli_is(a, "-v", "--verbose")) {
        o->verbose = 1;
        return CLI_OPT_TAKEN;
    }
    if (cli_is(a, NULL, "--no-access-log")) {
        o->access_log = 0;
        return CLI_OPT_TAKEN;
    }
    return CLI_OPT_OTHER;
}

static int parse_serve(int argc, char **argv, serve_options *o) {
    *o = serve_default_options();
    cli_args a = {"serve", argc, argv, 0};
    for (a.i = 1; a.i < argc; a.i++) {
        int rc = take_serve_option(&a, o); /* -m first: serve takes several */
        if (rc == CLI_OPT_OTHER) rc = cli_model_option(&a, &o->common);
        if (rc == CLI_OPT_OTHER) {
            if (cli_is_option(argv[a.i])) return cli_unknown_option("serve", argv[a.i]);
            fprintf(stderr, "attend serve: takes no arguments, only options (see --help)\n");
            return EXIT_USAGE;
        }
        if (rc != CLI_OPT_TAKEN) return rc;
    }
    return 0;
}

/* A model's scheduler or speech worker freed (stopped first when stop). */
static void stop_worker(serve_model *sm, int stop) {
    if (sm->s && stop) serve_sched_stop(sm->s);
    if (sm->sp && stop) serve_speech_stop(sm->sp);
    serve_sched_free(sm->s), serve_speech_free(sm->sp);
    sm->s = NULL, sm->sp = NULL;
}

/* After SIGTERM or SIGINT: wait (up to --timeout) for the requests in flight, then stop. */
static void drain(serve_http *h, serve_models *ms, const serve_options *o) {
    serve_http_quiesce(h);
    const double until = serve_now() + o->timeout;
    while (serve_http_inflight(h) > 0 && serve_now() < until) usleep(20000);
    for (int k = 0; k < ms->n; k++) /* answers whatever is still queued */
        if (ms->list[k].speech) serve_speech_stop(ms->list[k].sp);
        else serve_sched_stop(ms->list[k].s);
    for (int i = 0; i < 50 && serve_http_inflight(h) > 0; i++) usleep(20000);
    serve_http_stop(h);
    /* only now: a keep-alive client may have asked until the line above */
    for (int k = 0; k < ms->n; k++) stop_worker(&ms->list[k], 0);
}

/* One scheduler per text model, one worker per speech model; 0, or -1 with err (those
 * started are stopped). */
static int start_schedulers(serve_models *ms, char *err, size_t errlen) {
    for (int k = 0; k < ms->n; k++) {
        serve_model *sm = &ms->list[k];
        if (sm->speech ? !!(sm->sp = serve_speech_start(sm->m, &sm->o, err, errlen))
                       : !!(sm->s = serve_sched_start(sm->m, &sm->o, err, errlen)))
            continue;
        while (k-- > 0) stop_worker(&ms->list[k], 1);
        return -1;
    }
    return 0;
}

/* The start line: each model, its pair, the address. */
static void print_start(const serve_models *ms, const serve_options *o, const serve_http *h) {
    for (int k = 0; ms->n > 1 && k < ms->n; k++) {
        const serve_model *sm = &ms->list[k];
        if (sm->speech) fprintf(stderr, "attend serve: %s: speech (POST /v1/audio/transcriptions)\n", sm->name);
        else if (attend_get_config(sm->m)->n_languages) fprintf(stderr, "attend serve: %s: multilingual\n", sm->name);
        else if (sm->o.pair[0][0]) fprintf(stderr, "attend serve: %s: %s-%s\n", sm->name, sm->o.pair[0], sm->o.pair[1]);
        else fprintf(stderr, "attend serve: %s: pair unknown (name it: -m FILE:SRC-TGT)\n", sm->name);
    }
    fprintf(stderr, "attend serve: %s on http://%s%s%s:%d/ (%d threads)\n",
            ms->n == 1 ? ms->list[0].name : "several models", strchr(o->host, ':') ? "[" : "", o->host,
            strchr(o->host, ':') ? "]" : "", serve_http_port(h),
            o->common.threads ? o->common.threads : attend_default_threads());
}

/* Run until a signal; the exit status. */
static int run_server(serve_models *ms, const serve_options *o) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* every thread started from here on too */
    signal(SIGPIPE, SIG_IGN);
    char err[512];
    serve_http *h = start_schedulers(ms, err, sizeof err) ? NULL : serve_http_start(ms, o, err, sizeof err);
    if (!h) {
        fprintf(stderr, "attend serve: %s\n", err);
        for (int k = 0; k < ms->n; k++) stop_worker(&ms->list[k], 1);
        return EXIT_USAGE;
    }
    print_start(ms, o, h);
    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "attend serve: %s: finishing the requests in flight\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    drain(h, ms, o);
    fprintf(stderr, "attend serve: stopped\n");
    return EXIT_OK;
}

/* The pair of a model without language tokens: FILE:SRC-TGT, --languages (one model only),
 * else the file's name (none is fine: /languages then lists nothing for it and "auto" is
 * refused). 0, or EXIT_USAGE with a message. */
static int find_pair(const attend_model *m, const char *name, const char *given, serve_options *o) {
    const int multi = attend_get_config(m)->n_languages > 0;
    if (given && multi) {
        fprintf(stderr, "attend serve: %s: %s: this model names its own languages (attend info lists them)\n", name,
                given);
        return EXIT_USAGE;
    }
    if (given && serve_pair_parse(given, o->pair)) {
        fprintf(stderr, "attend serve: %s: give the pair as SRC-TGT, e.g. de-en\n", given);
        return EXIT_USAGE;
    }
    if (!given && !multi) serve_pair_from_name(name, o->pair);
    return 0;
}

/* --models DIR: every *.gguf in it, sorted by name, added to the -m list after the -m
 * arguments (paths malloc'd: cmd_serve frees them). 0, or EXIT_USAGE with a message. */
static int add_models_dir(serve_options *o) {
    struct dirent **names;
    const int n = scandir(o->models_dir, &names, NULL, alphasort);
    if (n < 0) {
        fprintf(stderr, "attend serve: --models %s: %s\n", o->models_dir, strerror(errno));
        return EXIT_USAGE;
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        const size_t len = strlen(names[i]->d_name);
        char *path = NULL;
        if (!rc && len > 5 && !strcmp(names[i]->d_name + len - 5, ".gguf") &&
            asprintf(&path, "%s/%s", o->models_dir, names[i]->d_name) > 0) {
            if (o->n_model_args < (int)(sizeof o->model_args / sizeof o->model_args[0]))
                o->model_args[o->n_model_args++] = path;
            else
                fprintf(stderr, "attend serve: --models %s: at most %d models\n", o->models_dir, o->n_model_args),
                    free(path), rc = EXIT_USAGE;
        }
        free(names[i]);
    }
    free(names);
    if (!rc && !o->n_model_args) fprintf(stderr, "attend serve: --models %s: no .gguf file in it\n", o->models_dir);
    return rc ? rc : o->n_model_args ? 0 : EXIT_USAGE;
}

/* -m FILE:SRC-TGT: the file and the pair (NULL when the argument names a file as it is). */
static const char *split_pair(const char *arg, char *path, size_t cap) {
    snprintf(path, cap, "%s", arg);
    char *colon = strrchr(path, ':'), pair[2][16];
    if (!colon || access(path, F_OK) == 0) return NULL;
    *colon = 0;
    if (serve_pair_parse(colon + 1, pair) && access(path, F_OK) != 0) { /* no FILE:PAIR either */
        *colon = ':';
        return NULL; /* the loader names the file it did not find */
    }
    return arg + (colon - path) + 1; /* a pair, or what find_pair says is not one */
}

/* An English-only Whisper (*.en): attend_config does not say so (its tokenizer lists the
 * language tokens all the same); attend_detect_language does, refusing such a model before
 * it reads any features. */
static int english_only(attend_model *m) {
    char err[256] = "";
    const char *code;
    return attend_detect_language(m, NULL, NULL, &code, NULL, err, sizeof err) && strstr(err, "English-only");
}

/* Load model k of the -m list into sm: its name, its options and pair. 0 or EXIT_USAGE. */
static int load_one(const serve_options *o, int k, serve_model *sm) {
    char buf[4200], file[4200];
    const char *given = o->n_model_args ? split_pair(o->model_args[k], file, sizeof file) : NULL;
    const char *arg = o->n_model_args ? file : o->common.model;
    const char *path = cli_model_path(arg, buf, sizeof buf), *slash = strrchr(path, '/');
    snprintf(sm->name, sizeof sm->name, "%s", slash ? slash + 1 : path);
    sm->m = cli_load_model(path);
    sm->o = *o;
    sm->speech = attend_get_config(sm->m)->audio != 0;
    sm->english_only = sm->speech && english_only(sm->m);
    if (sm->speech) return given ? fprintf(stderr, "attend serve: %s: a speech model has no language pair\n", sm->name),
                                   EXIT_USAGE : 0;
    if (!given && o->n_model_args <= 1) given = o->languages;
    int status = 0;
    if (o->n_model_args <= 1 && (o->common.src_lang || o->common.tgt_lang))
        status = cli_check_languages("serve", sm->m, o->common.src_lang, o->common.tgt_lang, 0);
    if (!status && cli_check_task("serve", sm->m, o->common.task)) status = EXIT_USAGE;
    if (!status) status = find_pair(sm->m, sm->name, given, &sm->o);
    return status;
}

/* Two models of one name (the same file twice, or one name in two folders): /v1's "model"
 * could not tell them apart, and one of them would never be asked. */
static int name_taken(const serve_models *ms, int k) {
    for (int i = 0; i < k; i++)
        if (!strcmp(ms->list[i].name, ms->list[k].name)) {
            fprintf(stderr, "attend serve: two models named %s: each needs a name of its own\n", ms->list[k].name);
            return EXIT_USAGE;
        }
    return 0;
}

/* Load every model of o's list and serve them until SIGTERM or SIGINT. The exit status. */
static int serve_all(const serve_options *o) {
    serve_models ms = {calloc((size_t)(o->n_model_args ? o->n_model_args : 1), sizeof(serve_model)),
                       o->n_model_args ? o->n_model_args : 1};
    if (!ms.list) return fprintf(stderr, "attend serve: out of memory\n"), EXIT_FAIL;
    int status = 0, loaded = 0;
    for (; !status && loaded < ms.n; loaded++) {
        status = load_one(o, loaded, &ms.list[loaded]);
        if (!status) status = name_taken(&ms, loaded);
    }
    if (!status) status = run_server(&ms, o);
    for (int k = 0; k < loaded; k++) attend_free(ms.list[k].m);
    free(ms.list);
    return status;
}

int cmd_serve(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        usage_serve(stdout);
        return EXIT_OK;
    }
    serve_options o;
    int status = parse_serve(argc, argv, &o);
    const int from_argv = o.n_model_args; /* those past it are add_models_dir's, malloc'd */
    if (!status && o.models_dir) status = add_models_dir(&o);
    if (!status && o.languages && o.n_model_args > 1) {
        fprintf(stderr, "attend serve: --languages names one model's pair: with several, give each as -m FILE:SRC-TGT\n");
        status = EXIT_USAGE;
    }
    if (!status) status = serve_all(&o);
    for (int k = from_argv; k < o.n_model_args; k++) free((void *)o.model_args[k]);
    return status;
}
