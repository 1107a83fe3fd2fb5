/* attend serve: a translation server over one model or several (fixed at start: no request
 * names a file; /v1/translate may name one of the models). Options, start, wait for SIGTERM or SIGINT, then stop accepting, finish what is
 * in flight and exit 0. The parts: serve.h. */
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
            "  GET  /languages, GET /frontend/settings, POST /detect: the rest of LibreTranslate's API\n"
            "  GET  /health, GET /v1/model (the facts attend info prints), GET / (a live explore page)\n"
            "\n"
            "options:\n"
            "  -m, --model FILE        checkpoint (default: $ATTEND_MODEL, else models/de-en.gguf); repeat\n"
            "                          it to serve several; FILE=SRC-TGT names the pair of a file\n"
            "                          whose name carries none (docs/serve.md, \"Several models\")\n"
            "      --models DIR        serve every .gguf file in DIR too (sorted by name)\n"
            "      --host ADDR         numeric address to bind (default 127.0.0.1: this machine only)\n"
            "      --port N            port (default 8080; 0: any free port; the port is printed)\n"
            "  -t, --threads N         threads translating, per model (default: physical cores, or\n"
            "                          $OMP_NUM_THREADS)\n"
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
            "      --timeout S         seconds a request may wait in the queue (then 503) and an\n"
            "                          idle connection stays open (default 30)\n"
            "      --max-connections N open connections at most (default 512)\n"
            "      --allow-origin O    send Access-Control-Allow-Origin: O (default: no CORS header)\n"
            "      --no-access-log     no line per request on stderr\n"
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
    o.max_connections = 512;
    o.access_log = 1;
    return o;
}

/* One option of serve's own at a->i. */
static int take_serve_option(cli_args *a, serve_options *o) {
    int body;
    if (cli_is(a, NULL, "--host")) return cli_take_str(a, &o->host);
    if (cli_is(a, NULL, "--port")) return cli_take_int(a, 0, 65535, &o->port);
    if (cli_is(a, NULL, "--max-batch-tokens")) return cli_take_int(a, 1, 1 << 20, &o->max_batch_tokens);
    if (cli_is(a, NULL, "--gather-ms")) return cli_take_int(a, 0, 10000, &o->gather_ms);
    if (cli_is(a, NULL, "--max-queue")) return cli_take_int(a, 1, 1 << 20, &o->max_queue);
    if (cli_is(a, NULL, "--timeout")) return cli_take_int(a, 1, 86400, &o->timeout);
    if (cli_is(a, NULL, "--max-connections")) return cli_take_int(a, 1, 100000, &o->max_connections);
    if (cli_is(a, NULL, "--allow-origin")) return cli_take_str(a, &o->allow_origin);
    if (cli_is(a, NULL, "--languages")) return cli_take_str(a, &o->languages);
    if (cli_is(a, NULL, "--models")) return cli_take_str(a, &o->models_dir);
    if (cli_is(a, "-m", "--model")) { /* repeatable: several models (serve_models.c) */
        if (o->n_model_args == SERVE_MAX_MODELS)
            return fprintf(stderr, "attend serve: more than %d models\n", SERVE_MAX_MODELS), EXIT_USAGE;
        return cli_take_str(a, &o->model_args[o->n_model_args++]);
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
        int rc = take_serve_option(&a, o);
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

/* After SIGTERM or SIGINT: wait (up to --timeout) for the requests in flight, then stop. */
static void drain(serve_http *h, serve_models *t, const serve_options *o) {
    serve_http_quiesce(h);
    const double until = serve_now() + o->timeout;
    while (serve_http_inflight(h) > 0 && serve_now() < until) usleep(20000);
    serve_models_stop(t); /* answers whatever is still queued, in every model's scheduler */
    for (int i = 0; i < 50 && serve_http_inflight(h) > 0; i++) usleep(20000);
    serve_http_stop(h);
    /* the schedulers are freed only now (serve_models_free): a keep-alive client may have
     * asked until the line above */
}

/* Run until a signal; the exit status. */
static int run_server(serve_models *t, const serve_options *o) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL); /* every thread started from here on too */
    signal(SIGPIPE, SIG_IGN);
    char err[512];
    const int started = !serve_models_start(t, err, sizeof err);
    serve_http *h = started ? serve_http_start(t, err, sizeof err) : NULL;
    if (!h) {
        fprintf(stderr, "attend serve: %s\n", err);
        if (started) serve_models_stop(t);
        return EXIT_USAGE;
    }
    char names[2048] = "";
    for (int i = 0; i < t->n; i++) /* "de-en.gguf, tiny-m2m.gguf" */
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", t->v[i].file);
    fprintf(stderr, "attend serve: %s on http://%s%s%s:%d/ (%d threads%s)\n", names, strchr(o->host, ':') ? "[" : "",
            o->host, strchr(o->host, ':') ? "]" : "", serve_http_port(h),
            o->common.threads ? o->common.threads : attend_default_threads(), t->n > 1 ? " per model" : "");
    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "attend serve: %s: finishing the requests in flight\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    drain(h, t, o);
    fprintf(stderr, "attend serve: stopped\n");
    return EXIT_OK;
}

int cmd_serve(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        usage_serve(stdout);
        return EXIT_OK;
    }
    serve_options o;
    int status = parse_serve(argc, argv, &o);
    if (status) return status;
    serve_models t;
    status = serve_models_load(&t, &o);
    if (status) return status;
    status = run_server(&t, &o);
    serve_models_free(&t);
    return status;
}
