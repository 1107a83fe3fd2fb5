/* The HTTP side of attend serve (serve.h), on http_server.h: its loop thread reads requests
 * whole and writes answers; a translation request is parsed here, handed to the scheduler of
 * the model it is routed to (a speech upload's form checked, then handed to its model's
 * worker, serve_speech.c), and answered once resumed, so a slow or
 * vanished client never holds up a model. The connection layer (limits, deadlines, errors
 * before routing, half-closed clients) is http_server.c's; an access log line per request
 * on stderr. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "explore_json.h"
#include "http_server.h"
#include "json.h"
#include "serve.h"

extern const char explore_html[]; /* build/cli/explore_html.c, from python/attend/explore.html */

struct serve_http {
    http_server *server;
    const serve_models *ms; /* each with its scheduler; the first answers what is not routed */
    const serve_options *o;
    char *model_json, *page; /* GET /v1/model and GET /, made once */
    size_t model_json_len, page_len;
    char *languages, *settings; /* GET /languages and GET /frontend/settings, made once */
    size_t languages_len, settings_len;
    pthread_mutex_t mu;
    int inflight;
    serve_limits *limits; /* --api-keys, --req-limit, --char-limit (serve_limits.c) */
    serve_files *files;   /* translated files kept for GET /download_file (serve_file.c) */
};

/* One request on one connection (*http_data(conn)). */
typedef struct {
    serve_http *h;
    http_conn *conn;
    double started;
    char *body; /* the request's body (taken from the connection), rewritten as JSON */
    size_t len;
    serve_job *job; /* with the scheduler, or answered */
    serve_job **parts; /* or, a list detected in several languages: a job per language (serve_split.c) */
    int n_parts, parts_left; /* parts_left: not yet answered (under h->mu) */
    int *part_of;            /* [n_q] the part of each entry */
    int n_q;
    serve_audio_job *audio; /* POST /v1/audio/...: with a speech worker, or answered */
    int retry_after;                  /* a 429's Retry-After (seconds) */
    char file_name[SERVE_FILE_NAME]; /* POST /translate_file: the upload's name */
} request;

/* ---------------------------------------------------------------------------------------
 * Answers */

static int is_post_route(const char *path, int *api);

/* The answer; body is malloc'd (taken) unless persistent. */
static void reply(request *x, int status, char *body, size_t len, int persistent, const char *type) {
    const char *headers[9] = {NULL}, **h = headers;
    char retry[16];
    int api;
    snprintf(retry, sizeof retry, "%d", x->retry_after > 0 ? x->retry_after : 1);
    if (x->h->o->allow_origin) *h++ = "Access-Control-Allow-Origin", *h++ = x->h->o->allow_origin;
    if (status == 503 || status == 429) *h++ = "Retry-After", *h++ = retry;
    if (status == 405) *h++ = "Allow", *h++ = is_post_route(http_path(x->conn), &api) ? "POST" : "GET";
    http_respond(x->conn, status, type, headers, body, len, persistent);
}

static void reply_json(request *x, int status, char *body, size_t len) {
    reply(x, status, body, len, 0, "application/json; charset=utf-8");
}

static int is_audio_path(const char *path) { return !strncmp(path, SERVE_AUDIO_PREFIX, strlen(SERVE_AUDIO_PREFIX)); }

/* An error in OpenAI's shape (the /v1/audio endpoints). */
static void reply_oai(request *x, const serve_oai_error *e) {
    size_t len = 0;
    char *body = serve_oai_error_body(e, &len);
    if (body) reply_json(x, e->status, body, len);
    else reply(x, 500, (char *)"", 0, 1, "application/json; charset=utf-8");
}

static void reply_error(request *x, int status, const char *msg) {
    if (is_audio_path(http_path(x->conn))) { /* the errors of every path in one shape */
        serve_oai_error e;
        serve_oai_fail(&e, status, NULL, NULL, "%s", msg);
        return reply_oai(x, &e);
    }
    size_t len = 0;
    char *body = serve_response_error(msg, &len);
    if (body) reply_json(x, status, body, len);
    else reply(x, 500, (char *)"", 0, 1, "application/json; charset=utf-8");
}

/* CORS preflight, only with --allow-origin. */
static void reply_preflight(request *x) {
    const char *headers[] = {"Access-Control-Allow-Origin", x->h->o->allow_origin, "Access-Control-Allow-Methods",
                             "GET, POST, OPTIONS", "Access-Control-Allow-Headers", "Content-Type", NULL};
    http_respond(x->conn, 204, NULL, headers, (char *)"", 0, 1);
}

/* ---------------------------------------------------------------------------------------
 * Translation requests: parse, queue; answer once resumed */

/* Called by the scheduler: the answer is ready, the connection goes on (on the loop). */
static void job_finished(serve_job *job) {
    request *x = job->user;
    http_resume(x->conn);
}

static void job_free(serve_job *job) {
    if (!job) return;
    serve_request_free(&job->req);
    free(job->body);
    free(job);
}

/* A JSON object or array under a form's Content-Type (curl -d sends that by default). */
static int looks_like_json(const request *x) {
    size_t i = 0;
    while (i < x->len && (x->body[i] == ' ' || x->body[i] == '\t' || x->body[i] == '\r' || x->body[i] == '\n')) i++;
    return i < x->len && (x->body[i] == '{' || x->body[i] == '[');
}

/* A LibreTranslate form body becomes the JSON text the parsers read. 0, or a status (400)
 * with a message in err. */
static int form_to_json(request *x, char *err, size_t errlen) {
    const char *type = http_header(x->conn, "Content-Type");
    const int form = type && !strncasecmp(type, "application/x-www-form-urlencoded", 33);
    const int multipart = type && !strncasecmp(type, "multipart/form-data", 19);
    if ((!form && !multipart) || looks_like_json(x)) return 0;
    if (multipart) { /* LibreTranslate's web page posts FormData */
        char *from_parts = serve_multipart_to_json(type, x->body ? x->body : "", x->len, err, errlen);
        if (!from_parts) return 400;
        free(x->body);
        x->body = from_parts, x->len = strlen(from_parts);
        return 0;
    }
    int nul = 0;
    char *json = serve_form_to_json(x->body ? x->body : "", x->len, &nul);
    if (!json) return snprintf(err, errlen, nul ? "q contains a NUL character" : "the form could not be read"), 400;
    free(x->body);
    x->body = json, x->len = strlen(json);
    return 0;
}
/* Keys and limits (serve_limits.c) on the body read as JSON: 0, or 403, 429 (with
 * x->retry_after) or 400 with err. */
static int gate(request *x, const serve_body *b, char *err, size_t errlen) {
    return serve_limits_check_json(x->h->limits, http_client(x->conn), b->root, &x->retry_after, err, errlen);
}

/* The body, read as JSON once for every step after it (x->body is freed). */
static serve_body take_body(request *x) {
    serve_body b = serve_body_parse(x->body ? x->body : "", x->len);
    free(x->body);
    x->body = NULL;
    return b;
}

/* POST /detect: answered here, at once (no model call). */
static void answer_detect(request *x) {
    char err[512], *out = NULL;
    size_t len = 0;
    serve_body b = {0};
    int status = serve_no_text_model(x->h->ms, err, sizeof err);
    if (!status) status = form_to_json(x, err, sizeof err);
    if (!status) b = take_body(x), status = gate(x, &b, err, sizeof err);
    if (!status) status = serve_detect(x->h->ms, &b, &out, &len, err, sizeof err);
    serve_body_free(&b);
    if (status == 200) reply_json(x, 200, out, len);
    else reply_error(x, status, err);
}

/* POST /translate_file: the multipart form becomes /translate's JSON (serve_file.c). 0, or a
 * status with err. */
static int file_to_json(request *x, char *err, size_t errlen) {
    const char *type = http_header(x->conn, "Content-Type");
    char *json = NULL;
    size_t len = 0;
    const int rc = serve_file_to_json(type, x->body ? x->body : "", x->len, &json, &len, x->file_name, err, errlen);
    if (rc) return rc;
    free(x->body);
    x->body = json, x->len = len;
    return 0;
}

/* Called by a part's scheduler: the answer is ready once every part's is. */
static void part_finished(serve_job *job) {
    request *x = job->user;
    pthread_mutex_lock(&x->h->mu);
    const int left = --x->parts_left;
    pthread_mutex_unlock(&x->h->mu);
    if (!left) http_resume(x->conn);
}

/* A job for body b: routed (*k, its model), parsed, with what "source": "auto" found. NULL
 * with *status and err. */
static serve_job *make_job(request *x, int kind, const serve_body *b, const serve_auto *a, int *k, int *status,
                           char *err, size_t errlen) {
    char why[448];
    *k = serve_route(x->h->ms, b->root, kind, why, sizeof why);
    if (*k < 0) {
        if (a->lang[0]) snprintf(err, errlen, "%s is not supported (detected by \"source\": auto): %.400s", a->lang, why);
        else snprintf(err, errlen, "%s", why);
        return *status = -*k, NULL;
    }
    serve_job *job = calloc(1, sizeof *job);
    if (!job) return *status = 500, snprintf(err, errlen, "out of memory"), NULL;
    const serve_model *sm = &x->h->ms->list[*k];
    *status = serve_request_parse(b, kind, sm->m, &sm->o, &job->req, err, errlen);
    if (*status) return job_free(job), NULL;
    if (a->lang[0]) {
        snprintf(job->req.detected, sizeof job->req.detected, "%s", a->lang);
        job->req.detected_confidence = a->confidence;
    }
    if (a->lang[0] && a->n && job->req.q_is_list && job->req.n_q == a->n) {
        if (!(job->req.detected_confs = malloc(sizeof(float) * (size_t)a->n)))
            return job_free(job), *status = 500, snprintf(err, errlen, "out of memory"), NULL;
        memcpy(job->req.detected_confs, a->confs, sizeof(float) * (size_t)a->n);
    }
    job->finish = job_finished;
    job->user = x;
    return job;
}

/* Hand a job to model k's scheduler; a full queue answers it 503 at once. */
static void submit(request *x, serve_job *job, int k) {
    if (!serve_sched_submit(x->h->ms->list[k].s, job)) return;
    job->http_status = 503;
    job->body = serve_response_error("the queue is full (see --max-queue, --max-wait) or the server is "
                                     "stopping; retry", &job->body_len);
    job->finish(job);
}

/* The jobs of the parts (serve_split.c), made before any is submitted. 0, or a status with err. */
static int make_parts(request *x, const serve_body *b, const serve_auto *a, int *model, char *err, size_t errlen) {
    if (!(x->part_of = malloc(sizeof(int) * (size_t)a->n))) return snprintf(err, errlen, "out of memory"), 500;
    x->n_q = a->n;
    const int n = serve_split_parts(a, x->part_of);
    if (n > SERVE_PARTS_MAX)
        return snprintf(err, errlen, "q's entries are in more than %d languages: send them separately",
                        SERVE_PARTS_MAX), 400;
    if (!(x->parts = calloc((size_t)n, sizeof *x->parts))) return snprintf(err, errlen, "out of memory"), 500;
    for (int p = 0, status = 0; p < n; p++) {
        serve_body sub;
        serve_auto sub_auto;
        if (serve_split_body(b, a, x->part_of, p, &sub, &sub_auto)) return snprintf(err, errlen, "out of memory"), 500;
        x->parts[p] = make_job(x, SERVE_LIBRE, &sub, &sub_auto, &model[p], &status, err, errlen);
        serve_body_free(&sub), serve_auto_free(&sub_auto);
        if (!x->parts[p]) return status;
        x->parts[p]->finish = part_finished;
        x->n_parts = p + 1;
    }
    int sentences = 0; /* the request's limit, not each part's (nor a 503 from its own parts) */
    for (int p = 0; p < n; p++) sentences += x->parts[p]->req.n;
    if (sentences > x->h->o->max_queue)
        return snprintf(err, errlen, "more than %d sentences in one request", x->h->o->max_queue), 400;
    return 0;
}

/* A list detected in several languages: a part per language, each to its model. */
static void start_parts(request *x, const serve_body *b, const serve_auto *a) {
    char err[512];
    int model[SERVE_PARTS_MAX];
    const int status = make_parts(x, b, a, model, err, sizeof err);
    if (status) return reply_error(x, status, err);
    x->parts_left = x->n_parts; /* before the first submit: a part may finish at once */
    for (int p = 0; p < x->n_parts; p++) submit(x, x->parts[p], model[p]);
}

/* The body has arrived: parse it and hand it to the scheduler (or answer an error). */
static void start_translation(request *x, int api) {
    char err[512];
    int status = serve_no_text_model(x->h->ms, err, sizeof err);
    if (!status) status = api == SERVE_LIBRE ? form_to_json(x, err, sizeof err)
                          : api == SERVE_FILE ? file_to_json(x, err, sizeof err)
                                              : 0;
    if (status) return reply_error(x, status, err);
    const int kind = api == SERVE_FILE ? SERVE_LIBRE : api;
    serve_auto a = {0};
    serve_body b = take_body(x);
    status = gate(x, &b, err, sizeof err);
    if (!status && kind == SERVE_LIBRE)
        status = serve_resolve_auto(x->h->ms, b.root, x->h->o->max_queue, &a, err, sizeof err);
    int k = 0;
    if (!status && a.n && !a.lang[0]) start_parts(x, &b, &a); /* the entries' languages differ */
    else if (!status) x->job = make_job(x, kind, &b, &a, &k, &status, err, sizeof err);
    serve_body_free(&b), serve_auto_free(&a);
    if (status) return reply_error(x, status, err);
    if (x->job) submit(x, x->job, k);
}

/* Resumed, split: the parts' answers merged in the entries' order. */
static void finish_parts(request *x) {
    int status = 500;
    size_t len = 0;
    char *body = serve_split_merge(x->parts, x->n_parts, x->part_of, x->n_q, &status, &len);
    if (body) reply_json(x, status, body, len);
    else reply_error(x, 500, "out of memory");
}

/* Resumed: the scheduler's answer. */
static void finish_translation(request *x) {
    if (x->parts) return finish_parts(x);
    serve_job *job = x->job;
    char *body = job->body;
    job->body = NULL;
    if (body && x->file_name[0] && job->http_status == 200) { /* /translate_file: keep it, answer its URL */
        char *url = serve_files_put(x->h->files, x->conn, x->h->o->host, serve_http_port(x->h), x->file_name, body,
                                    job->body_len, &job->body_len);
        free(body);
        if (!url) return reply_error(x, 500, "the translated file could not be kept (out of memory?)");
        body = url;
    }
    if (body) reply_json(x, job->http_status, body, job->body_len);
    else reply_error(x, 500, "out of memory");
}

/* ---------------------------------------------------------------------------------------
 * Speech requests: the form checked here, the audio transcribed by the model's worker */

/* Called by the worker: the answer is ready (on the loop). */
static void audio_finished(serve_audio_job *job) {
    request *x = job->user;
    http_resume(x->conn);
}

/* The key (Authorization: Bearer KEY, as OpenAI's clients send it, else the form's
 * api_key) and the rate through serve_limits: 0, or the status with e (401 for a missing
 * or unknown key, as OpenAI answers; 429 with x->retry_after). */
static int audio_gate(request *x, serve_audio_job *job, serve_oai_error *e) {
    const char *auth = http_header(x->conn, "Authorization");
    if (auth && !strncasecmp(auth, "Bearer ", 7)) snprintf(job->api_key, sizeof job->api_key, "%s", auth + 7);
    char err[512];
    cJSON *body = cJSON_CreateObject(); /* the key as a translation body carries it */
    if (!body || !cJSON_AddStringToObject(body, "api_key", job->api_key)) {
        cJSON_Delete(body);
        return serve_oai_fail(e, 500, NULL, NULL, "out of memory");
    }
    const int rc = serve_limits_check_json(x->h->limits, http_client(x->conn), body, &x->retry_after, err, sizeof err);
    cJSON_Delete(body);
    if (rc == 403) return serve_oai_fail(e, 401, NULL, "invalid_api_key", "%s (send it as Authorization: Bearer KEY)", err);
    if (rc == 429) return serve_oai_fail(e, 429, NULL, "rate_limit_exceeded", "%s", err);
    return rc ? serve_oai_fail(e, rc, NULL, NULL, "%s", err) : 0;
}

/* The body has arrived: the form into a job for the speech model's worker (or an error). */
static void start_audio(request *x, int api) {
    serve_audio_job *job = calloc(1, sizeof *job);
    if (!job) return reply_error(x, 500, "out of memory");
    x->audio = job;
    int k = -1;
    const int task = api == SERVE_AUDIO_TRANSLATE ? ATTEND_TASK_TRANSLATE : ATTEND_TASK_TRANSCRIBE;
    const int bad = serve_audio_parse(x->h->ms, http_header(x->conn, "Content-Type"), x->body, x->len, task, job, &k);
    x->body = NULL; /* the job's now */
    serve_oai_error gate_error;
    if (audio_gate(x, job, &gate_error)) return reply_oai(x, &gate_error);
    if (bad) return reply_oai(x, &job->error);
    job->finish = audio_finished;
    job->user = x;
    if (serve_speech_submit(x->h->ms->list[k].sp, job)) {
        serve_oai_fail(&job->error, 503, NULL, NULL, "the speech queue is full (see --max-audio-queue) or the "
                                                   "server is stopping; retry");
        audio_finished(job);
    }
}

/* Resumed: the worker's answer. */
static void finish_audio(request *x) {
    serve_audio_job *job = x->audio;
    if (job->error.status) return reply_oai(x, &job->error);
    char *body = job->answer;
    job->answer = NULL;
    reply(x, 200, body, job->answer_len, 0, job->type);
}

/* ---------------------------------------------------------------------------------------
 * Routing */

static int is_post_route(const char *path, int *api) {
    if (!strcmp(path, "/translate")) return *api = SERVE_LIBRE, 1;
    if (!strcmp(path, "/v1/translate")) return *api = SERVE_V1, 1;
    if (!strcmp(path, "/detect")) return *api = SERVE_DETECT, 1;
    if (!strcmp(path, "/translate_file")) return *api = SERVE_FILE, 1;
    if (!strcmp(path, SERVE_AUDIO_PREFIX "transcriptions")) return *api = SERVE_AUDIO, 1;
    if (!strcmp(path, SERVE_AUDIO_PREFIX "translations")) return *api = SERVE_AUDIO_TRANSLATE, 1;
    return 0;
}

static int is_get_route(const char *path) {
    return !strcmp(path, "/") || !strcmp(path, "/health") || !strcmp(path, "/v1/model") ||
           !strcmp(path, "/favicon.ico") || !strcmp(path, "/languages") || !strcmp(path, "/frontend/settings") ||
           !strncmp(path, "/download_file/", 15);
}

static void answer_get(request *x) {
    serve_http *h = x->h;
    const char *path = http_path(x->conn);
    if (!strcmp(path, "/v1/model"))
        return reply(x, 200, h->model_json, h->model_json_len, 1, "application/json; charset=utf-8");
    if (!strcmp(path, "/languages"))
        return reply(x, 200, h->languages, h->languages_len, 1, "application/json; charset=utf-8");
    if (!strcmp(path, "/frontend/settings"))
        return reply(x, 200, h->settings, h->settings_len, 1, "application/json; charset=utf-8");
    if (!strcmp(path, "/")) return reply(x, 200, h->page, h->page_len, 1, "text/html; charset=utf-8");
    if (!strncmp(path, "/download_file/", 15))
        return serve_files_download(h->files, x->conn, path + 15, h->o->allow_origin);
    if (!strcmp(path, "/favicon.ico")) return reply(x, 204, (char *)"", 0, 1, "image/x-icon"); /* none: no 404 */
    char *body = NULL;
    const int n = asprintf(&body, "{\"status\":\"ok\",\"pending\":%d}\n", serve_models_pending(h->ms));
    if (n < 0) return reply_error(x, 500, "out of memory");
    reply_json(x, 200, body, (size_t)n);
}

/* A whole request (http_config.on_request): its context, then its answer or its job. */
static void on_request(void *user, http_conn *conn) {
    serve_http *h = user;
    request *x = calloc(1, sizeof *x);
    if (!x) {
        size_t len = 0;
        char *body = serve_response_error("out of memory", &len);
        return http_respond(conn, 500, "application/json; charset=utf-8", NULL, body, body ? len : 0, !body);
    }
    x->h = h, x->conn = conn, x->started = serve_now();
    *http_data(conn) = x;
    x->body = http_body(conn, &x->len);
    http_take_body(conn);
    pthread_mutex_lock(&h->mu);
    h->inflight++;
    pthread_mutex_unlock(&h->mu);
    int api = SERVE_LIBRE;
    const char *method = http_method(conn), *path = http_path(conn);
    const int post = !strcmp(method, "POST"), get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    if (!strcmp(method, "OPTIONS") && h->o->allow_origin) return reply_preflight(x);
    if (!is_post_route(path, &api) && !is_get_route(path)) return reply_error(x, 404, "not found");
    if (is_post_route(path, &api) != post || (!post && !get))
        return reply_error(x, 405, post || get ? "method not allowed on this path" : "method not allowed");
    if (get) return answer_get(x);
    if (api == SERVE_DETECT) return answer_detect(x);
    if (api == SERVE_AUDIO || api == SERVE_AUDIO_TRANSLATE) return start_audio(x, api);
    start_translation(x, api);
}

static void on_resume(void *user, http_conn *conn) {
    (void)user;
    request *x = *http_data(conn);
    if (x->audio) finish_audio(x);
    else finish_translation(x);
}

/* The access log line, and the request's memory (http_config.on_done). */
static void on_done(void *user, http_conn *conn, int status, size_t sent, const char *why) {
    serve_http *h = user;
    request *x = *http_data(conn);
    if (h->o->access_log)
        fprintf(stderr, "%s \"%s %s\" %d %zu %.1fms%s%s%s\n", http_client(conn), http_method(conn), http_path(conn),
                status, sent, x ? (serve_now() - x->started) * 1000.0 : 0.0, *why ? " (" : "", why, *why ? ")" : "");
    if (!x) return; /* answered by the connection layer before it reached the server */
    job_free(x->job);
    for (int p = 0; p < x->n_parts; p++) job_free(x->parts[p]);
    free(x->parts), free(x->part_of);
    serve_audio_job_free(x->audio);
    free(x->body);
    free(x);
    *http_data(conn) = NULL;
    pthread_mutex_lock(&h->mu);
    h->inflight--;
    pthread_mutex_unlock(&h->mu);
}

/* ---------------------------------------------------------------------------------------
 * Start and stop */

/* GET /: the explore page, in live mode: no sentences yet, the page asks /v1/translate. */
static char *make_page(const attend_model *m, const char *name, const serve_options *o, size_t *len) {
    const attend_config *c = attend_get_config(m);
    const char *mark = strstr(explore_html, "@@DATA@@");
    char *presets[EXPLORE_PRESETS], *out = NULL;
    const int np = explore_presets(NULL, c->alignment_view, c->decoder_layers, presets);
    FILE *f = open_memstream(&out, len);
    if (!f || !mark) return f ? fclose(f), free(out), NULL : NULL;
    fwrite(explore_html, 1, (size_t)(mark - explore_html), f);
    fputs("{\"live\":true,\"model\":", f);
    json_str(f, name);
    const int beams = o->common.beams ? o->common.beams : c->generation_recorded ? c->num_beams : 1;
    fprintf(f, ",\"settings\":\"%s\"", beams > 1 ? "beam search (the server's settings)" : "greedy search");
    fprintf(f, ",\"config\":{\"encoder_layers\":%d,\"encoder_heads\":%d,\"decoder_layers\":%d,\"decoder_heads\":%d}",
            c->encoder_layers, c->encoder_heads, c->decoder_layers, c->decoder_heads);
    fputs(",\"presets\":", f);
    json_strs(f, (const char *const *)presets, np);
    fputs(",\"sentences\":[]}", f);
    fputs(mark + strlen("@@DATA@@"), f);
    if (fclose(f)) return free(out), NULL;
    return out;
}

/* GET / on a server of speech models only: where to send audio. */
static char *speech_page(size_t *len) {
    char *page = strdup("<!doctype html><meta charset=utf-8><title>attend serve</title>\n<p>This server "
                        "transcribes speech: POST /v1/audio/transcriptions and /v1/audio/translations "
                        "(docs/serve.md).</p>\n");
    *len = page ? strlen(page) : 0;
    return page;
}

/* http_config.body_limit: uploads to /v1/audio may be larger than other bodies. */
static long long body_limit(void *user, const http_conn *c) {
    const serve_http *h = user;
    return is_audio_path(http_path(c)) ? h->o->max_audio_body : h->o->max_body;
}

/* http_config.route_error_body: the HTTP layer's errors on /v1/audio in OpenAI's shape. */
static char *route_error_body(void *user, const http_conn *c, int status, const char *msg, size_t *len) {
    const serve_http *h = user;
    if (!is_audio_path(http_path(c))) return NULL;
    serve_oai_error e;
    if (status == 413)
        serve_oai_fail(&e, 413, "file", NULL, "the upload is larger than --max-audio-body (%lld bytes)",
                       h->o->max_audio_body);
    else
        serve_oai_fail(&e, status, NULL, NULL, "%s", msg);
    return serve_oai_error_body(&e, len);
}

/* The address to bind: IPv4 or IPv6, numeric. 0, or -1. */
static int make_address(const serve_options *o, struct sockaddr_storage *ss, int *v6) {
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
    *v6 = 0;
    if (inet_pton(AF_INET, o->host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)o->port);
        return 0;
    }
    if (inet_pton(AF_INET6, o->host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)o->port);
        *v6 = 1;
        return 0;
    }
    return -1;
}

static void free_http(serve_http *h) {
    serve_limits_free(h->limits), serve_files_free(h->files);
    free(h->model_json), free(h->page), free(h->languages), free(h->settings);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

serve_http *serve_http_start(const serve_models *ms, const serve_options *o, char *err, size_t errlen) {
    struct sockaddr_storage ss;
    int v6;
    if (make_address(o, &ss, &v6)) {
        snprintf(err, errlen, "--host %s: not a numeric IPv4 or IPv6 address", o->host);
        return NULL;
    }
    serve_http *h = calloc(1, sizeof *h);
    if (!h) return snprintf(err, errlen, "out of memory"), NULL;
    h->ms = ms, h->o = o;
    pthread_mutex_init(&h->mu, NULL);
    int t = 0; /* the first text model: the page, the settings' defaults */
    while (t < ms->n - 1 && ms->list[t].speech) t++;
    const serve_model *first = &ms->list[t];
    h->model_json = ms->n == 1 ? serve_response_model(first->m, first->name, &h->model_json_len)
                               : serve_models_json(ms, &h->model_json_len);
    h->page = first->speech ? speech_page(&h->page_len) : make_page(first->m, first->name, o, &h->page_len);
    h->languages = serve_models_languages(ms, &h->languages_len);
    h->settings = serve_libre_settings(first->m, &first->o, &h->settings_len);
    h->limits = serve_limits_new(o->api_keys, o->req_limit, o->char_limit, 0, err, errlen);
    h->files = serve_files_new();
    if (!h->limits || !h->files || !h->model_json || !h->page || !h->languages || !h->settings) {
        if (h->limits) snprintf(err, errlen, "out of memory"); /* else err is the keys file's message */
        return free_http(h), NULL;
    }
    const http_config cfg = {.max_head = 65536, .max_body = o->max_body, .head_timeout = o->head_timeout,
                             .idle_timeout = o->timeout, .max_connections = o->max_connections,
                             .max_per_address = o->max_per_address, .on_request = on_request,
                             .on_resume = on_resume, .on_done = on_done, .error_body = serve_response_error,
                             .body_limit = body_limit, .route_error_body = route_error_body,
                             .user = h, .verbose = o->verbose};
    char why[256] = "";
    h->server = http_start((struct sockaddr *)&ss, v6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in),
                           &cfg, why, sizeof why);
    if (!h->server) {
        snprintf(err, errlen, "cannot listen on %s port %d (%s)", o->host, o->port, why);
        return free_http(h), NULL;
    }
    return h;
}

int serve_http_port(const serve_http *h) { return http_port(h->server); }

void serve_http_quiesce(serve_http *h) { http_quiesce(h->server); }

int serve_http_inflight(serve_http *h) {
    pthread_mutex_lock(&h->mu);
    const int n = h->inflight;
    pthread_mutex_unlock(&h->mu);
    return n;
}

void serve_http_stop(serve_http *h) {
    http_stop(h->server);
    free_http(h);
}
