/* serve: attend serve, an HTTP translation server over one or several loaded models, and
 * speech to text over Whisper models (OpenAI's /v1/audio endpoints). The
 * parts, one job each: cmd_serve.c (options, start, wait for a signal, shut down),
 * http_server.c (connections, limits, deadlines), serve_http.c (routes, answers, the access
 * log), serve_models.c (which model a request goes to), serve_request.c
 * (a JSON body into a serve_request), serve_sched.c (the scheduler thread: requests arriving
 * together are translated as one batch), serve_response.c (results and errors as JSON),
 * serve_detect.c ("source": "auto"), serve_split.c (a list in several languages: a request
 * per language, the answers merged),
 * serve_audio.c (an audio upload's form into a job; OpenAI's errors), serve_speech.c (the
 * worker thread of each speech model). */
#ifndef ATTEND_CLI_SERVE_H
#define ATTEND_CLI_SERVE_H

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stddef.h>

#include "../model/align.h"
#include "../model/attend.h"
#include "options.h"

/* The command line (cmd_serve.c; every limit documented in attend serve --help). */
typedef struct {
    cli_model_options common;  /* -m, -t, --beam, --greedy, --src-lang, --tgt-lang */
    const char *host;          /* --host: the address to bind (127.0.0.1) */
    int port;                  /* --port (8080; 0: any free port, printed at start) */
    int max_batch_tokens;      /* --max-batch-tokens: source tokens a batch gathers */
    long long max_body;        /* --max-body: request body bytes (413 above) */
    const char *allow_origin;  /* --allow-origin: Access-Control-Allow-Origin (none unless given) */
    int max_queue;             /* --max-queue: sentences waiting (503 above) */
    int max_wait;              /* --max-wait: seconds of queued work, at the measured rate (503 above) */
    int timeout;               /* --timeout: seconds a request may wait in the queue; idle connections */
    int gather_ms;             /* --gather-ms: a batch gathers until no request came for this long */
    int max_connections;       /* --max-connections */
    int max_per_address;       /* --max-per-address: open connections from one address (0: no limit) */
    int head_timeout;          /* --head-timeout: seconds for a request's head to arrive whole */
    int access_log;            /* 0 with --no-access-log */
    int verbose;               /* -v: a line per batch on stderr */
    const char *languages;     /* --languages SRC-TGT: the pair of a model without language tokens */
    char pair[2][16];          /* that pair, from --languages or the model file's name ("" unknown) */
    const char *model_args[16]; /* every -m FILE[:SRC-TGT], in order (several: one server for all) */
    int n_model_args;
    const char *models_dir;     /* --models DIR: every .gguf in it, by name */
    const char *api_keys;      /* --api-keys FILE: a key required with each request (serve_limits.c) */
    int req_limit;             /* --req-limit: requests per client address per minute (0: none) */
    int char_limit;            /* --char-limit: characters of q per request (0: none) */
    double max_audio_seconds;  /* --max-audio-seconds: longer audio is refused (400) */
    long long max_audio_body;  /* --max-audio-body: bytes of an upload to /v1/audio (413 above) */
    int max_audio_queue;       /* --max-audio-queue: uploads waiting per speech model (503 above) */
} serve_options;

enum { SERVE_LIBRE = 0, SERVE_V1 = 1, SERVE_DETECT = 2, SERVE_FILE = 3, SERVE_AUDIO = 4, SERVE_AUDIO_TRANSLATE = 5 };
#define SERVE_AUDIO_PREFIX "/v1/audio/" /* OpenAI's speech endpoints: uploads, OpenAI's errors */

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
    char detected[32];  /* /translate "source": "auto": the language answered as detectedLanguage */
    float detected_confidence; /* and its confidence (0..100) */
    float *detected_confs; /* [n_q] a list's: each entry's own confidence (malloc'd), or NULL */
} serve_request;

/* A request's body read once as JSON (POST /translate, /translate_file's, /v1/translate,
 * /detect): the gate, "source": "auto", routing and the request all read this tree. */
typedef struct {
    cJSON *root; /* NULL: not valid JSON */
    int has_nul; /* a string of the text holds a NUL (serve_json_has_nul): refused, not cut */
} serve_body;
serve_body serve_body_parse(const char *body, size_t len);
void serve_body_free(serve_body *b);

/* Read a request body for api into *r; 0, or an HTTP status (400) with a one-line reason in
 * err. r is freed either way by serve_request_free. */
int serve_request_parse(const serve_body *b, int api, const attend_model *m, const serve_options *o,
                        serve_request *r, char *err, size_t errlen);
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
char *serve_form_to_json(const char *body, size_t len, int *nul);

/* LibreTranslate's other endpoints (serve_libre.c). */
/* The language pair in a model file's name ("de-en.gguf", "opus-mt-de-en"): 0 and pair
 * filled, or -1 (none found; pair untouched). */
int serve_pair_from_name(const char *name, char pair[2][16]);
/* "SRC-TGT" (--languages) into pair: 0, or -1 when it is not of that form. */
int serve_pair_parse(const char *arg, char pair[2][16]);
/* The English name of a language code, or the code itself. */
const char *serve_lang_name(const char *code);
/* GET /frontend/settings, made once at start (malloc'd). */
char *serve_libre_settings(const attend_model *m, const serve_options *o, size_t *len);
/* 1 when a string of the JSON text holds a NUL character (a \u0000 escape or a raw NUL
 * byte): cJSON's strings would end there and drop the rest. */
int serve_json_has_nul(const char *body, size_t len);

/* API keys and request limits (serve_limits.c): --api-keys, --req-limit, --char-limit. */
typedef struct serve_limits serve_limits;
enum { SERVE_LIMIT_SUBJECTS = 4096 }; /* client addresses whose rate is kept, at most */
/* Read the keys file (NULL: no keys); cap: the buckets kept (0: SERVE_LIMIT_SUBJECTS). NULL
 * with err (naming the file's line) when the file cannot be read or is malformed. */
serve_limits *serve_limits_new(const char *keys_path, int req_limit, int char_limit, int cap, char *err,
                               size_t errlen);
void serve_limits_free(serve_limits *l);
/* A request's JSON body from client (its address) through the gate: 0 (go on), 403 (no or an
 * unknown "api_key" while keys are required), 429 (past the key's or the address's rate;
 * *retry_after: seconds until a request is allowed again) or 400 (q past --char-limit, or not
 * a JSON object while a limit is on), with err. */
int serve_limits_check(serve_limits *l, const char *client, const char *body, size_t len, int *retry_after,
                       char *err, size_t errlen);
/* The same on a body already read (root: NULL when it is not JSON). */
int serve_limits_check_json(serve_limits *l, const char *client, const cJSON *root, int *retry_after, char *err,
                            size_t errlen);
/* Take one request from the bucket of subject (a client's address; per_minute tokens, refilled
 * at per_minute a minute) at time now (seconds): 0, or -1 with *retry_after (whole seconds,
 * >= 1). */
int serve_limits_take(serve_limits *l, const char *subject, int per_minute, double now, int *retry_after);
/* Buckets held now (at most the cap). */
int serve_limits_subjects(serve_limits *l);

/* A multipart/form-data body split into parts pointing into it (serve_multipart.c). */
typedef struct {
    const char *name, *filename; /* filename NULL for a plain field */
    size_t name_len, filename_len;
    const char *data;
    size_t len;
} serve_part;
enum { SERVE_PART_HEADERS = 8192, SERVE_FORM_PARTS = 16 };
/* The parts (at most max_parts), or -1 with err: not multipart/form-data, no boundary, a part
 * cut short, no closing delimiter, headers longer than SERVE_PART_HEADERS. */
int serve_multipart_parse(const char *content_type, const char *body, size_t len, serve_part *parts,
                          int max_parts, char *err, size_t errlen);

/* POST /translate_file and GET /download_file/NAME (serve_file.c). */
enum {
    SERVE_FILE_NAME = 48,                 /* bytes of an upload's (cleaned) name */
    SERVE_FILE_ID = SERVE_FILE_NAME + 17, /* "16 hex digits.NAME" */
    SERVE_FILES_KEPT = 64,                /* translated files kept at most */
    SERVE_FILES_BYTES = 64 << 20,         /* and their bytes */
    SERVE_FILES_SECONDS = 1800            /* each for this long */
};
extern const char *const SERVE_FILE_FORMATS[]; /* ".txt", ".html", ".htm", NULL */
/* The form of POST /translate_file as the JSON text /translate reads (*json malloc'd), the
 * upload's name cleaned into name: 0, or 400 (500) with err. */
int serve_file_to_json(const char *content_type, const char *body, size_t len, char **json, size_t *json_len,
                       char name[SERVE_FILE_NAME], char *err, size_t errlen);
/* A multipart form's plain fields as a JSON object's text (malloc'd; NULL with err): POST
 * /translate and /detect as LibreTranslate's web page sends them (FormData). */
char *serve_multipart_to_json(const char *content_type, const char *body, size_t len, char *err, size_t errlen);
typedef struct serve_files serve_files;
serve_files *serve_files_new(void);
void serve_files_free(serve_files *fs);
/* Keep the text of a /translate answer ({"translatedText": ...}) as the file name; its
 * answer {"translatedFileUrl": "http://HOST/download_file/ID"} (malloc'd), or NULL. HOST is
 * the request's Host header, else host:port (the address bound). */
struct http_conn;
char *serve_files_put(serve_files *fs, struct http_conn *conn, const char *host, int port, const char *name,
                      const char *answer, size_t answer_len, size_t *outlen);
/* Answer GET /download_file/ID: 200 with the file, or 404. */
void serve_files_download(serve_files *fs, struct http_conn *conn, const char *id, const char *allow_origin);

/* The models of one server (serve_models.c): each with its options (its own pair) and its
 * own scheduler, so batching stays per model. */
typedef struct serve_speech serve_speech;
typedef struct {
    attend_model *m;
    char name[128];  /* the file's base name without .gguf: /v1 "model" names it */
    serve_options o; /* the server's options, with this model's pair */
    serve_sched *s;  /* a text model's scheduler (NULL for a speech model) */
    int speech;      /* a speech model (Whisper): never routed text, only audio */
    int english_only; /* a speech model without languages to set or translate from (*.en) */
    serve_speech *sp; /* its worker (serve_speech.c) */
} serve_model;

typedef struct {
    serve_model *list;
    int n;
} serve_models;

/* The model a request body (JSON root, NULL when not JSON) goes to: its index, or -400 with
 * err (no model covers the pair; /v1 "model" names none). With one model always 0. */
int serve_route(const serve_models *ms, const cJSON *root, int api, char *err, size_t errlen);
/* 0, or 400 with err when every model is a speech model (nothing translates text). */
int serve_no_text_model(const serve_models *ms, char *err, size_t errlen);
/* GET /languages over every model; GET /v1/model (the first model's facts and "models"). */
char *serve_models_languages(const serve_models *ms, size_t *len);
char *serve_models_json(const serve_models *ms, size_t *len);
/* Language identification (serve_detect.c, CLD2 through langid.h), among the languages the
 * models translate from. POST /detect: 200 and *out (malloc'd), or a status with err. */
int serve_detect(const serve_models *ms, const serve_body *b, char **out, size_t *outlen, char *err, size_t errlen);
/* "source": "auto" on /translate, as serve_resolve_auto leaves it. */
typedef struct {
    char lang[32];     /* the language of every entry, put in place of auto ("": no auto, q of the
                        * wrong type, or a list whose entries differ) */
    float confidence;  /* its confidence (a list's: the first entry's) */
    int n;             /* q a list of strings: its entries, each detected (0 otherwise) */
    char (*langs)[32]; /* [n] each entry's language */
    float *confs;      /* [n] and its confidence */
} serve_auto;
/* "source": "auto" in a /translate body (root, NULL when not JSON) into *a, detected among
 * every source language of the server (as /detect: a language no model translates into the
 * target is then refused by routing, never translated as another). A string q: its language.
 * A list: each entry's (longer than 40 characters on its own, else all the entries together,
 * as LibreTranslate); when they agree the language replaces auto in root, else root keeps
 * auto and the caller splits the request (serve_split.c). A list of more than max_entries
 * entries is refused before any detection (each entry is at least one of a request's
 * max_entries sentences). 0 (also when there is no auto, or q is of the wrong type for
 * parsing to refuse), or 400/500 with err. */
int serve_resolve_auto(const serve_models *ms, cJSON *root, int max_entries, serve_auto *a, char *err, size_t errlen);
void serve_auto_free(serve_auto *a);

/* A /translate list whose entries were detected in several languages (serve_split.c): one
 * part per language, each a request of its own, the answers merged in the entries' order. */
enum { SERVE_PARTS_MAX = 64 }; /* languages in one request, at most (400 above) */
/* The parts: their count; part_of[i] (n entries) the part of entry i, numbered in order of
 * first appearance. */
int serve_split_parts(const serve_auto *a, int *part_of);
/* The body of part p: b's with q holding only that part's entries and source its language,
 * into *out; its detection into *sub (lang, and n confs: one per entry of the part; free
 * both). 0, or -1 out of memory. */
int serve_split_body(const serve_body *b, const serve_auto *a, const int *part_of, int p, serve_body *out,
                     serve_auto *sub);
/* The answer to the whole request from the parts' answers (each job's http_status and body):
 * the first part that failed answers for all, else one /translate answer, its lists in the
 * entries' order. malloc'd (NULL: out of memory) with *status and *len. */
char *serve_split_merge(serve_job *const *parts, int n_parts, const int *part_of, int n_q, int *status,
                        size_t *len);
/* Sentences queued or being translated, every scheduler together. */
int serve_models_pending(const serve_models *ms);

/* ---------------------------------------------------------------------------------------
 * Speech: POST /v1/audio/transcriptions and /v1/audio/translations (OpenAI's API) */

/* An error as OpenAI shapes it: {"error": {"message", "type", "param", "code"}}. */
typedef struct {
    int status;        /* the HTTP status (0: none) */
    char message[512];
    const char *param; /* the form field at fault, or NULL */
    const char *code;  /* OpenAI's code ("model_not_found"), or NULL */
} serve_oai_error;
/* Fill e; returns status. */
int serve_oai_fail(serve_oai_error *e, int status, const char *param, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* e as a JSON body (malloc'd), its "type" from the status. */
char *serve_oai_error_body(const serve_oai_error *e, size_t *len);

/* One audio request: its form, then its answer. */
typedef struct serve_audio_job {
    char *body;                 /* the whole form (owned; freed once decoded): file points into it */
    const char *file;
    size_t file_len;
    int task;                   /* ATTEND_TASK_TRANSCRIBE or _TRANSLATE */
    char language[16];          /* a code of the model, or "" (detected) */
    char format[16];            /* transcript_write's: json, text, srt, vtt, verbose_json */
    int words;                  /* timestamp_granularities[] has word */
    float temperature;          /* the form's: 0 (or none) falls back as OpenAI's API does */
    char api_key[256];          /* Authorization: Bearer KEY, else the form's api_key ("" none) */
    double queued_at;
    serve_oai_error error;      /* the answer when error.status is set */
    char *answer;               /* else 200 with this body (malloc'd) and type */
    size_t answer_len;
    const char *type;
    /* Called once from the worker thread when the answer is ready; the job belongs to the
     * caller again from then on. */
    void (*finish)(struct serve_audio_job *job);
    void *user;
    struct serve_audio_job *next;
} serve_audio_job;

/* The form of an audio request (multipart/form-data, body of len bytes, taken by the job
 * in every case) for task into job: 0 and *model (the speech model's index in ms), or an
 * HTTP status with job->error (serve_audio.c). */
int serve_audio_parse(const serve_models *ms, const char *content_type, char *body, size_t len, int task,
                      serve_audio_job *job, int *model);
void serve_audio_job_free(serve_audio_job *job);

/* The worker of one speech model (serve_speech.c): a bounded queue of jobs, transcribed one
 * at a time off the HTTP thread. */
serve_speech *serve_speech_start(attend_model *m, const serve_options *o, char *err, size_t errlen);
/* Queue a job: 0, or -1 when --max-audio-queue jobs wait already or the worker is stopping
 * (nothing happened: the caller answers 503). */
int serve_speech_submit(serve_speech *s, serve_audio_job *job);
/* Jobs queued or being transcribed (for /health). */
int serve_speech_pending(serve_speech *s);
/* Stop the transcription running (p.stop), answer every queued job 503, end the thread. */
void serve_speech_stop(serve_speech *s);
void serve_speech_free(serve_speech *s);

/* The HTTP side (serve_http.c). */
typedef struct serve_http serve_http;
serve_http *serve_http_start(const serve_models *ms, const serve_options *o, char *err, size_t errlen);
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
