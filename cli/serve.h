/* serve: attend serve, an HTTP translation server over one loaded model or several. The parts, one job
 * each: cmd_serve.c (options, start, wait for a signal, shut down), serve_http.c (the
 * libmicrohttpd daemon: routes, bodies, limits, suspend/resume, access log), serve_request.c
 * (a JSON body into a serve_request), serve_sched.c (the scheduler thread: requests arriving
 * together are translated as one batch), serve_response.c (results and errors as JSON),
 * serve_models.c and serve_route.c (several models: loading, a scheduler each, which model
 * answers a request). */
#ifndef ATTEND_CLI_SERVE_H
#define ATTEND_CLI_SERVE_H

#include <pthread.h>
#include <stddef.h>

#include "../model/align.h"
#include "../model/attend.h"
#include "options.h"

enum { SERVE_MAX_MODELS = 64 };

/* The command line (cmd_serve.c; every limit documented in attend serve --help). */
typedef struct {
    cli_model_options common;  /* -m, -t, --beam, --greedy, --src-lang, --tgt-lang */
    const char *host;          /* --host: the address to bind (127.0.0.1) */
    int port;                  /* --port (8080; 0: any free port, printed at start) */
    int max_batch_tokens;      /* --max-batch-tokens: source tokens a batch gathers */
    long long max_body;        /* --max-body: request body bytes (413 above) */
    const char *allow_origin;  /* --allow-origin: Access-Control-Allow-Origin (none unless given) */
    int max_queue;             /* --max-queue: sentences waiting (503 above) */
    int timeout;               /* --timeout: seconds a request may wait in the queue; idle connections */
    int gather_ms;             /* --gather-ms: a batch gathers until no request came for this long */
    int max_connections;       /* --max-connections */
    int access_log;            /* 0 with --no-access-log */
    int verbose;               /* -v: a line per batch on stderr */
    const char *languages;     /* --languages SRC-TGT: the pair of a model without language tokens */
    char pair[2][16];          /* that pair, from --languages or the model file's name ("" unknown) */
    const char *model_args[SERVE_MAX_MODELS]; /* each -m FILE[=SRC-TGT] (serve_models.c) */
    int n_model_args;
    const char *models_dir;    /* --models DIR: every .gguf in it */
} serve_options;

enum { SERVE_LIBRE = 0, SERVE_V1 = 1, SERVE_DETECT = 2 };

/* One parsed translation request: its sentences and how to translate them. */
typedef struct {
    int api;            /* SERVE_LIBRE (POST /translate) or SERVE_V1 (POST /v1/translate) */
    int q_is_list;      /* "q" was a list: the answer is a list in the same order */
    int n_q;            /* entries of q */
    int n;              /* sentences: /translate splits each entry at newlines, /v1 does not */
    char **lines;       /* [n] malloc'd, NUL-terminated */
    size_t *lens;       /* [n] */
    int *q_of;          /* [n] the entry of q sentence i belongs to */
    char **targets;     /* [n] forced translations (/v1 "target_text"), or NULL */
    char **prefixes;    /* [n] target prefixes (/v1 "prefix"), or NULL */
    attend_params p;    /* the search settings (src_lang / tgt_lang point into langs) */
    char langs[2][64];  /* source and target language codes ("" when none) */
    char task[128];     /* /v1 "task" (T5's task_specific_params name), or "" */
    char key[512];      /* requests with equal keys are batched together */
    int alignment;      /* /v1: the word alignment of `view` */
    attend_view view;
    char view_name[64];
    int attention;      /* /v1: the attention matrices, compact as the explore page has them */
    int nbest;          /* /v1: the n-best list asked for */
    int html;           /* /translate "format": "html": each q entry an HTML fragment, kept
                         * whole (attend_translate_html) */
    int alternatives;   /* /translate "alternatives": N more translations from the n-best list */
    char detected[16];  /* /translate "source": "auto": the language answered as detectedLanguage */
} serve_request;

/* Parse a request body (body_len bytes) for api into *r; 0, or an HTTP status (400) with a
 * one-line reason in err. r is freed either way by serve_request_free. */
int serve_request_parse(const char *body, size_t body_len, int api, const attend_model *m,
                        const serve_options *o, serve_request *r, char *err, size_t errlen);
void serve_request_free(serve_request *r);

/* A request handed to the scheduler, and its answer. */
typedef struct serve_job {
    serve_request req;
    attend_result *res;          /* [req.n] filled by the scheduler (blank lines stay empty) */
    double queued_at;            /* seconds, monotonic */
    int tokens;                  /* source tokens, for the batch budget */
    int http_status;             /* the answer: status, JSON body (malloc'd) */
    char *body;
    size_t body_len;
    const attend_model *m;
    /* Called once from the scheduler thread when the answer is ready; the job belongs to
     * the caller again from then on (the scheduler never touches it after). */
    void (*finish)(struct serve_job *job);
    void *user;
    struct serve_job *next;
} serve_job;

typedef struct serve_sched serve_sched;

/* Start the scheduler thread; NULL with err. */
serve_sched *serve_sched_start(attend_model *m, const serve_options *o, char *err, size_t errlen);
/* Queue a job: 0, or -1 when the queue is full or the scheduler stopping (then nothing
 * happened: the caller answers 503). */
int serve_sched_submit(serve_sched *s, serve_job *job);
/* Sentences queued or being translated (for /health). */
int serve_sched_pending(serve_sched *s);
/* Finish every queued job, then end the thread; jobs submitted after are refused. */
void serve_sched_stop(serve_sched *s);
/* Free s, stopped, once nothing can submit to it any more. */
void serve_sched_free(serve_sched *s);

/* The answer to a finished job: job->http_status, body and body_len (serve_response.c). */
void serve_response_job(serve_job *job);
/* {"error": msg} as a malloc'd body; *len its bytes. */
char *serve_response_error(const char *msg, size_t *len);
/* GET /v1/model: the facts attend info prints, as JSON. */
char *serve_response_model(const attend_model *m, const char *name, size_t *len);

/* A LibreTranslate form body (application/x-www-form-urlencoded) as a JSON object's text
 * (malloc'd; NULL when it cannot be read), for serve_request_parse (serve_form.c). */
struct MHD_Connection;
char *serve_form_to_json(struct MHD_Connection *conn, const char *body, size_t len, int *nul);

/* LibreTranslate's other endpoints (serve_libre.c). */
/* The language pair in a model file's name ("de-en.gguf", "opus-mt-de-en"): 0 and pair
 * filled, or -1 (none found; pair untouched). */
int serve_pair_from_name(const char *name, char pair[2][16]);
/* "SRC-TGT" (--languages) into pair: 0, or -1 when it is not of that form. */
int serve_pair_parse(const char *arg, char pair[2][16]);
/* The English name of a language code, or the code itself. */
const char *serve_lang_name(const char *code);
/* GET /languages and GET /frontend/settings, made once at start (malloc'd). */
char *serve_libre_languages(const attend_model *m, const serve_options *o, size_t *len);
char *serve_libre_settings(const attend_model *m, const serve_options *o, size_t *len);
/* POST /detect: 200 and *out (malloc'd), or a status (400) with err. */
int serve_libre_detect(const char *body, size_t len, const attend_model *m, const serve_options *o, char **out,
                       size_t *outlen, char *err, size_t errlen);
/* 1 when a string of the JSON text holds a NUL character (a \u0000 escape or a raw NUL
 * byte): cJSON's strings would end there and drop the rest. */
int serve_json_has_nul(const char *body, size_t len);

/* The models a server holds, each with its own scheduler (serve_models.c). */
typedef struct {
    attend_model *m;
    char name[256];  /* the file's base name without .gguf: /v1/translate's "model" */
    char file[256];  /* the file's base name, as GET /v1/model names it */
    serve_options o; /* the server's options, with this model's pair and default languages */
    serve_sched *s;
} serve_model;

typedef struct {
    int n;
    serve_model *v;
} serve_models;

/* Load every model of o (-m, --models, else the default model): 0, or EXIT_USAGE after a
 * message on stderr (t is then freed). */
int serve_models_load(serve_models *t, const serve_options *o);
/* A scheduler per model: 0, or -1 with err (those started are stopped again). */
int serve_models_start(serve_models *t, char *err, size_t errlen);
void serve_models_stop(serve_models *t);
/* Schedulers freed (stopped before), models freed. */
void serve_models_free(serve_models *t);
/* Sentences pending in every scheduler. */
int serve_models_pending(const serve_models *t);
/* The model for a request body (JSON) of api: its index, or -status (-400) with err naming
 * the pairs (or names) there are. Bodies that are not JSON go to model 0, whose parser
 * answers them. */
int serve_models_route(const serve_models *t, const char *body, size_t len, int api, char *err, size_t errlen);
/* GET /languages over every model, GET /v1/model with a "models" list (malloc'd). */
char *serve_models_languages(const serve_models *t, size_t *len);
char *serve_models_json(const serve_models *t, size_t *len);

/* The HTTP side (serve_http.c). */
typedef struct serve_http serve_http;
serve_http *serve_http_start(serve_models *t, char *err, size_t errlen);
/* The port bound (useful with --port 0). */
int serve_http_port(const serve_http *h);
/* Stop accepting connections (the listening socket is closed). */
void serve_http_quiesce(serve_http *h);
/* Requests begun and not yet answered. */
int serve_http_inflight(serve_http *h);
/* Close every connection and free h (no request may be waiting on the scheduler). */
void serve_http_stop(serve_http *h);

/* Seconds on the monotonic clock. */
double serve_now(void);

#endif
