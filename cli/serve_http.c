/* The HTTP side of attend serve (serve.h), on libmicrohttpd: one internal polling thread
 * reads requests and writes answers; a translation request is parsed here, handed to the
 * scheduler and its connection suspended until the answer is ready (the scheduler resumes
 * it), so a slow or vanished client never holds up the model. Limits: --max-body for bodies
 * (413), the header memory per connection, --timeout for idle connections (slow clients),
 * --max-connections; an access log line per request on stderr. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "explore_json.h"
#include "json.h"
#include "serve.h"

extern const char explore_html[]; /* build/cli/explore_html.c, from python/attend/explore.html */

struct serve_http {
    struct MHD_Daemon *d;
    attend_model *m;        /* the first model: /detect, the explore page */
    serve_models *t;        /* every model, each with its scheduler */
    const serve_options *o; /* the first model's options (the daemon's are every model's) */
    char *model_json, *page; /* GET /v1/model and GET /, made once */
    size_t model_json_len, page_len;
    char *languages, *settings; /* GET /languages and GET /frontend/settings, made once */
    size_t languages_len, settings_len;
    pthread_mutex_t mu;
    int inflight;
};

/* One request on one connection. */
typedef struct {
    serve_http *h;
    struct MHD_Connection *conn;
    double started;
    char client[64], method[16], path[96];
    char *body;
    size_t len, cap;
    int too_big;
    serve_job *job; /* with the scheduler, or answered */
    int ready;      /* the job's answer is there (h->mu) */
    int status;
    size_t sent;
} request;

/* ---------------------------------------------------------------------------------------
 * Answers */

static int is_post_route(const char *path, int *api);

/* Queue an answer; body is malloc'd (taken) unless persistent. */
static enum MHD_Result reply(request *x, int status, char *body, size_t len, int persistent, const char *type) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, body, persistent ? MHD_RESPMEM_PERSISTENT : MHD_RESPMEM_MUST_FREE);
    if (!r) {
        if (!persistent) free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (x->h->o->allow_origin) MHD_add_response_header(r, "Access-Control-Allow-Origin", x->h->o->allow_origin);
    if (status == 503) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    int api;
    if (status == 405) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, is_post_route(x->path, &api) ? "POST" : "GET");
    const enum MHD_Result rc = MHD_queue_response(x->conn, (unsigned)status, r);
    MHD_destroy_response(r);
    x->status = status;
    x->sent = len;
    return rc;
}

static enum MHD_Result reply_json(request *x, int status, char *body, size_t len) {
    return reply(x, status, body, len, 0, "application/json; charset=utf-8");
}

static enum MHD_Result reply_error(request *x, int status, const char *msg) {
    size_t len;
    char *body = serve_response_error(msg, &len);
    return body ? reply_json(x, status, body, len) : MHD_NO;
}

/* CORS preflight, only with --allow-origin. */
static enum MHD_Result reply_preflight(request *x) {
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", x->h->o->allow_origin);
    MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    MHD_add_response_header(r, "Access-Control-Allow-Headers", "Content-Type");
    const enum MHD_Result rc = MHD_queue_response(x->conn, 204, r);
    MHD_destroy_response(r);
    x->status = 204;
    return rc;
}

/* ---------------------------------------------------------------------------------------
 * Translation requests: parse, queue, suspend; answer once resumed */

/* Called by the scheduler: the answer is ready, the connection goes on. */
static void job_finished(serve_job *job) {
    request *x = job->user;
    pthread_mutex_lock(&x->h->mu);
    x->ready = 1;
    pthread_mutex_unlock(&x->h->mu);
    MHD_resume_connection(x->conn);
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
    const char *type = MHD_lookup_connection_value(x->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    const int form = type && !strncasecmp(type, "application/x-www-form-urlencoded", 33);
    if (!form || looks_like_json(x)) return 0;
    int nul = 0;
    char *json = serve_form_to_json(x->conn, x->body ? x->body : "", x->len, &nul);
    if (!json) return snprintf(err, errlen, nul ? "q contains a NUL character" : "the form could not be read"), 400;
    free(x->body);
    x->body = json, x->len = strlen(json);
    return 0;
}

/* POST /detect: answered here, at once (no model call). */
static enum MHD_Result answer_detect(request *x) {
    char err[512], *out = NULL;
    size_t len = 0;
    int status = form_to_json(x, err, sizeof err);
    if (!status) status = serve_libre_detect(x->body ? x->body : "", x->len, x->h->m, x->h->o, &out, &len, err, sizeof err);
    return status == 200 ? reply_json(x, 200, out, len) : reply_error(x, status, err);
}

/* The body has arrived: parse it and hand it to the scheduler (or answer an error). */
static enum MHD_Result start_translation(request *x, int api) {
    serve_http *h = x->h;
    char err[512];
    const int bad_form = api == SERVE_LIBRE ? form_to_json(x, err, sizeof err) : 0;
    if (bad_form) return reply_error(x, bad_form, err);
    serve_job *job = calloc(1, sizeof *job);
    if (!job) return reply_error(x, 500, "out of memory");
    const int which = serve_models_route(h->t, x->body ? x->body : "", x->len, api, err, sizeof err);
    const serve_model *v = &h->t->v[which < 0 ? 0 : which];
    const int rc = which < 0 ? -which
                             : serve_request_parse(x->body ? x->body : "", x->len, api, v->m, &v->o, &job->req, err, sizeof err);
    free(x->body);
    x->body = NULL;
    if (rc) {
        job_free(job);
        return reply_error(x, rc, err);
    }
    job->finish = job_finished;
    job->user = x;
    x->job = job;
    /* suspended before the scheduler sees it, so its resume always finds it suspended */
    MHD_suspend_connection(x->conn);
    if (serve_sched_submit(v->s, job)) {
        job->http_status = 503;
        job->body = serve_response_error("the queue is full or the server is stopping; retry", &job->body_len);
        job_finished(job);
    }
    return MHD_YES;
}

/* Resumed: the scheduler's answer, or (a wake-up without one) wait on. */
static enum MHD_Result finish_translation(request *x) {
    pthread_mutex_lock(&x->h->mu);
    const int ready = x->ready;
    pthread_mutex_unlock(&x->h->mu);
    if (!ready) return MHD_YES;
    serve_job *job = x->job;
    char *body = job->body;
    job->body = NULL;
    const enum MHD_Result rc = body ? reply_json(x, job->http_status, body, job->body_len)
                                    : reply_error(x, 500, "out of memory");
    return rc;
}

/* ---------------------------------------------------------------------------------------
 * Routing */

static int is_post_route(const char *path, int *api) {
    if (!strcmp(path, "/translate")) return *api = SERVE_LIBRE, 1;
    if (!strcmp(path, "/v1/translate")) return *api = SERVE_V1, 1;
    if (!strcmp(path, "/detect")) return *api = SERVE_DETECT, 1;
    return 0;
}

static int is_get_route(const char *path) {
    return !strcmp(path, "/") || !strcmp(path, "/health") || !strcmp(path, "/v1/model") ||
           !strcmp(path, "/favicon.ico") || !strcmp(path, "/languages") || !strcmp(path, "/frontend/settings");
}

static enum MHD_Result answer_get(request *x) {
    serve_http *h = x->h;
    if (!strcmp(x->path, "/v1/model"))
        return reply(x, 200, h->model_json, h->model_json_len, 1, "application/json; charset=utf-8");
    if (!strcmp(x->path, "/languages"))
        return reply(x, 200, h->languages, h->languages_len, 1, "application/json; charset=utf-8");
    if (!strcmp(x->path, "/frontend/settings"))
        return reply(x, 200, h->settings, h->settings_len, 1, "application/json; charset=utf-8");
    if (!strcmp(x->path, "/")) return reply(x, 200, h->page, h->page_len, 1, "text/html; charset=utf-8");
    if (!strcmp(x->path, "/favicon.ico")) return reply(x, 204, (char *)"", 0, 1, "image/x-icon"); /* none: no 404 */
    char *body = NULL;
    const int n = asprintf(&body, "{\"status\":\"ok\",\"pending\":%d}\n", serve_models_pending(h->t));
    return n < 0 ? MHD_NO : reply_json(x, 200, body, (size_t)n);
}

/* The first call for a request: its context, and the answers that need no body (GET,
 * errors, a declared body over the limit). Returns MHD_YES to read the body. */
static enum MHD_Result first_call(serve_http *h, struct MHD_Connection *conn, const char *url, const char *method,
                                  void **con_cls) {
    request *x = calloc(1, sizeof *x);
    if (!x) return MHD_NO;
    x->h = h, x->conn = conn, x->started = serve_now();
    snprintf(x->method, sizeof x->method, "%s", method);
    snprintf(x->path, sizeof x->path, "%s", url);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, x->client, sizeof x->client);
    else if (sa && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, x->client, sizeof x->client);
    *con_cls = x;
    pthread_mutex_lock(&h->mu);
    h->inflight++;
    pthread_mutex_unlock(&h->mu);
    int api;
    const int post = !strcmp(method, "POST"), get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
    if (!strcmp(method, "OPTIONS") && h->o->allow_origin) return reply_preflight(x);
    if (!is_post_route(url, &api) && !is_get_route(url)) return reply_error(x, 404, "not found");
    if (is_post_route(url, &api) != post || (!post && !get))
        return reply_error(x, 405, post || get ? "method not allowed on this path" : "method not allowed");
    if (get) return answer_get(x);
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > (unsigned long long)h->o->max_body)
        return reply_error(x, 413, "the body is larger than --max-body");
    return MHD_YES;
}

/* Keep a piece of the body (past --max-body: only note it). */
static int take_body(request *x, const char *data, size_t n) {
    if (x->too_big || x->len + n > (size_t)x->h->o->max_body) {
        x->too_big = 1;
        free(x->body);
        x->body = NULL;
        x->len = x->cap = 0;
        return 0;
    }
    if (x->len + n + 1 > x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 4096;
        while (cap < x->len + n + 1) cap *= 2;
        char *grown = realloc(x->body, cap);
        if (!grown) return -1;
        x->body = grown, x->cap = cap;
    }
    memcpy(x->body + x->len, data, n);
    x->len += n;
    x->body[x->len] = 0;
    return 0;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    request *x = *con_cls;
    if (!x) return first_call(cls, conn, url, method, con_cls);
    if (x->status) return MHD_YES; /* answered already (the rest of a refused body) */
    if (*upload_size) {
        const int rc = take_body(x, upload, *upload_size);
        *upload_size = 0;
        return rc ? MHD_NO : MHD_YES;
    }
    if (x->job) return finish_translation(x);
    if (x->too_big) return reply_error(x, 413, "the body is larger than --max-body");
    int api = SERVE_LIBRE;
    is_post_route(x->path, &api);
    return api == SERVE_DETECT ? answer_detect(x) : start_translation(x, api);
}

/* The access log line, and the request's memory. */
static void completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode toe) {
    serve_http *h = cls;
    request *x = *con_cls;
    (void)conn;
    if (!x) return;
    if (h->o->access_log) {
        static const char *const why[] = {"", " (error)", " (timed out)", " (server stopping)", " (read error)",
                                          " (client closed)"};
        fprintf(stderr, "%s \"%s %s\" %d %zu %.1fms%s\n", x->client[0] ? x->client : "-", x->method, x->path,
                x->status, x->sent, (serve_now() - x->started) * 1000.0, toe < 6 ? why[toe] : "");
    }
    job_free(x->job);
    free(x->body);
    free(x);
    *con_cls = NULL;
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

/* libmicrohttpd's own messages (clients that went away, ...), with -v only. */
static void mhd_log(void *cls, const char *fmt, va_list ap) {
    if (!((const serve_options *)cls)->verbose) return;
    fputs("attend serve: libmicrohttpd: ", stderr);
    vfprintf(stderr, fmt, ap);
}

serve_http *serve_http_start(serve_models *t, char *err, size_t errlen) {
    attend_model *m = t->v[0].m;
    const char *model_name = t->v[0].file;
    const serve_options *o = &t->v[0].o;
    struct sockaddr_storage ss;
    int v6;
    if (make_address(o, &ss, &v6)) {
        snprintf(err, errlen, "--host %s: not a numeric IPv4 or IPv6 address", o->host);
        return NULL;
    }
    serve_http *h = calloc(1, sizeof *h);
    if (!h) return snprintf(err, errlen, "out of memory"), NULL;
    h->m = m, h->t = t, h->o = o;
    pthread_mutex_init(&h->mu, NULL);
    h->model_json = serve_models_json(t, &h->model_json_len);
    h->page = make_page(m, model_name, o, &h->page_len);
    h->languages = serve_models_languages(t, &h->languages_len);
    h->settings = serve_libre_settings(m, o, &h->settings_len);
    /* poll, not epoll: with epoll (MHD_USE_AUTO's choice on Linux) libmicrohttpd 0.9.75 at
     * times left every connection waiting for seconds under load (tests/test_serve_load.py) */
    const unsigned flags = MHD_USE_POLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
                           (v6 ? MHD_USE_IPv6 : 0);
    if (h->model_json && h->page && h->languages && h->settings)
        h->d = MHD_start_daemon(flags, 0, NULL, NULL, handle, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, (void *)o,
                                MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                                MHD_OPTION_NOTIFY_COMPLETED, completed, h,
                                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->timeout,
                                MHD_OPTION_CONNECTION_LIMIT, (unsigned)o->max_connections,
                                MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)65536, MHD_OPTION_END);
    if (!h->d) {
        snprintf(err, errlen, "cannot listen on %s port %d (in use, or not an address of this machine?)", o->host,
                 o->port);
        free(h->model_json), free(h->page), free(h->languages), free(h->settings), free(h);
        return NULL;
    }
    return h;
}

int serve_http_port(const serve_http *h) {
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    return i ? i->port : -1;
}

void serve_http_quiesce(serve_http *h) {
    const MHD_socket fd = MHD_quiesce_daemon(h->d);
    if (fd != MHD_INVALID_SOCKET) close(fd);
}

int serve_http_inflight(serve_http *h) {
    pthread_mutex_lock(&h->mu);
    const int n = h->inflight;
    pthread_mutex_unlock(&h->mu);
    return n;
}

void serve_http_stop(serve_http *h) {
    MHD_stop_daemon(h->d);
    pthread_mutex_destroy(&h->mu);
    free(h->model_json);
    free(h->page);
    free(h->languages);
    free(h->settings);
    free(h);
}
