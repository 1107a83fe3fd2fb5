/* http_server (http_server.h): one epoll loop thread. A connection moves through
 * HEAD (reading a request head) -> BODY -> WAIT (handed to the caller) -> WRITE (its answer)
 * -> HEAD again (keep-alive) or CLOSE, or DRAIN (after an early error answer: the rest of
 * what the client sends is read and dropped for a while, so that it reads the answer
 * instead of a reset). A connection in WAIT is never freed before it is resumed: the caller
 * holds a pointer to it. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "http_parse.h"
#include "http_server.h"

enum { HEAD, BODY, WAIT, WRITE, DRAIN };

#define DRAIN_SECONDS 2.0
#define DRAIN_BYTES ((size_t)64 << 20)
#define READ_CHUNK 65536

struct http_conn {
    http_server *s;
    int fd, state;
    char client[64];
    char *in;                 /* bytes read and not used yet */
    size_t in_len, in_cap;
    http_head head;
    int have_head, head_ok;   /* a head read; and parsed (its path known) */
    long long max_body;       /* this request's body limit (http_config.body_limit) */
    char *body;               /* the request's body (NUL-terminated) */
    size_t body_len, body_cap;
    http_chunks chunks;
    char *out;                /* the answer being written */
    size_t out_len, out_sent;
    int status;               /* the answer's status, and its body's bytes (for on_done) */
    size_t sent;
    int close_after, read_closed, dead;
    double started, active;   /* a request's first byte; the last byte moved either way */
    size_t drained;
    void *data;
    int resumed;              /* set by http_resume (s->mu) */
    struct http_conn *prev, *next, *resume_next;
};

struct http_server {
    http_config cfg;
    int listen_fd, epoll_fd, wake_fd, port;
    pthread_t thread;
    pthread_mutex_t mu;       /* resume_head, stopping */
    http_conn *resume_head;
    int stopping, quiesce;
    http_conn *conns;
    int n_conns;
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void watch(http_conn *c, unsigned events) {
    struct epoll_event ev = {.events = events, .data.ptr = c};
    epoll_ctl(c->s->epoll_fd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* ---------------------------------------------------------------------------------------
 * Answers */

static const char *reason(int status) {
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 417: return "Expectation Failed";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
    }
}

void http_respond(http_conn *c, int status, const char *type, const char *const *headers, char *body, size_t len,
                  int persistent) {
    const int head_only = c->have_head && c->head.method && !strcmp(c->head.method, "HEAD");
    if (!c->have_head || !c->head.keep_alive || c->read_closed || status == 400 || status == 408 || status == 413 ||
        status == 431 || status == 501 || status == 505)
        c->close_after = 1;
    char *out = NULL;
    size_t out_len = 0;
    FILE *f = open_memstream(&out, &out_len);
    if (f) {
        fprintf(f, "HTTP/1.1 %d %s\r\nContent-Length: %zu\r\n", status, reason(status), len);
        if (type) fprintf(f, "Content-Type: %s\r\n", type);
        for (int i = 0; headers && headers[i] && headers[i + 1]; i += 2) fprintf(f, "%s: %s\r\n", headers[i], headers[i + 1]);
        fputs(c->close_after ? "Connection: close\r\n\r\n" : "\r\n", f);
        if (!head_only) fwrite(body, 1, len, f);
        if (fclose(f)) free(out), out = NULL;
    }
    if (!persistent) free(body);
    free(c->out);
    c->out = out, c->out_len = out ? out_len : 0, c->out_sent = 0;
    c->status = status, c->sent = len;
    c->state = WRITE;
    if (!out) c->close_after = 1;
    watch(c, EPOLLOUT);
}

/* An error the server answers itself, as the caller's JSON. */
static void respond_error(http_conn *c, int status, const char *msg) {
    size_t len = 0;
    const http_config *cfg = &c->s->cfg;
    char *body = c->head_ok && cfg->route_error_body ? cfg->route_error_body(cfg->user, c, status, msg, &len) : NULL;
    if (!body) body = cfg->error_body(msg, &len);
    http_respond(c, status, "application/json; charset=utf-8", NULL, body ? body : (char *)"", body ? len : 0,
                 body == NULL);
}

/* ---------------------------------------------------------------------------------------
 * Connections */

static void conn_free(http_conn *c) {
    http_server *s = c->s;
    epoll_ctl(s->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    if (c->prev) c->prev->next = c->next;
    else s->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    s->n_conns--;
    http_head_free(&c->head);
    free(c->in);
    free(c->body);
    free(c->out);
    free(c);
}

/* The request is over: the caller hears of it (once), and the connection's request state
 * is cleared for the next. */
static void request_over(http_conn *c, int status, const char *why) {
    if (c->have_head || c->status) c->s->cfg.on_done(c->s->cfg.user, c, status, status ? c->sent : 0, why);
    c->data = NULL;
    http_head_free(&c->head);
    c->have_head = c->head_ok = 0;
    free(c->body);
    c->body = NULL, c->body_len = c->body_cap = 0;
    memset(&c->chunks, 0, sizeof c->chunks);
    c->status = 0, c->sent = 0;
}

/* Close c now, telling the caller about a request it was handed and never answered. */
static void conn_close(http_conn *c, const char *why) {
    if (c->state == WAIT) { /* the caller still holds c: it goes when resumed */
        c->dead = 1;
        epoll_ctl(c->s->epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
        return;
    }
    request_over(c, 0, why); /* the caller hears only of a request it was handed or answered */
    conn_free(c);
}

static int count_from(const http_server *s, const char *client) {
    int n = 0;
    for (const http_conn *c = s->conns; c; c = c->next) n += !strcmp(c->client, client);
    return n;
}

static void client_text(const struct sockaddr_storage *ss, char *out, size_t cap) {
    out[0] = 0;
    if (ss->ss_family == AF_INET) inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, out, (socklen_t)cap);
    else if (ss->ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, out, (socklen_t)cap);
}

/* A connection for fd, watched for reading; NULL (fd closed) without memory. */
static http_conn *conn_new(http_server *s, int fd, const char *client) {
    http_conn *c = calloc(1, sizeof *c);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (!c || epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, fd, &ev)) {
        free(c), close(fd);
        return NULL;
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->s = s, c->fd = fd, c->state = HEAD, c->active = now();
    snprintf(c->client, sizeof c->client, "%s", client);
    c->next = s->conns;
    if (s->conns) s->conns->prev = c;
    s->conns = c;
    s->n_conns++;
    return c;
}

/* Why a new connection from client is refused, or NULL. */
static const char *over_limit(const http_server *s, const char *client) {
    if (s->n_conns >= s->cfg.max_connections) return "too many connections (see --max-connections); retry";
    if (s->cfg.max_per_address > 0 && count_from(s, client) >= s->cfg.max_per_address)
        return "too many connections from this address (see --max-per-address); retry";
    return NULL;
}

/* A refused connection gets its 503 the way any early error goes (written, then the close
 * lingers, so a client still sending reads the answer instead of a reset). Past twice the
 * connection limit, a flood, it is closed without one. */
static void accept_all(http_server *s) {
    for (;;) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        const int fd = accept4(s->listen_fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        char client[64];
        client_text(&ss, client, sizeof client);
        const char *why = over_limit(s, client);
        if (why && s->n_conns >= 2 * s->cfg.max_connections) {
            close(fd);
            continue;
        }
        http_conn *c = conn_new(s, fd, client);
        if (!c || !why) continue;
        if (s->cfg.verbose) fprintf(stderr, "attend serve: %s: connection refused: %s\n", client, why);
        size_t len = 0;
        char *body = s->cfg.error_body(why, &len);
        const char *headers[] = {"Retry-After", "1", NULL};
        http_respond(c, 503, "application/json; charset=utf-8", headers, body ? body : (char *)"", body ? len : 0,
                     body == NULL);
    }
}

/* ---------------------------------------------------------------------------------------
 * Reading a request */

static void hand_over(http_conn *c) {
    c->state = WAIT;
    watch(c, 0); /* nothing to read while the caller works: a half-close is noticed at the write */
    c->s->cfg.on_request(c->s->cfg.user, c);
}

/* Body bytes from c->in (Content-Length or chunked); hand the request over once whole. */
static void take_body_bytes(http_conn *c) {
    char err[256];
    size_t used = 0;
    if (c->head.chunked) {
        const long long r = http_chunks_feed(&c->chunks, c->in, c->in_len, &c->body, &c->body_len, &c->body_cap,
                                             c->max_body, err, sizeof err);
        if (r == -2) return respond_error(c, 413, "the body is larger than --max-body");
        if (r < 0) return respond_error(c, 400, err);
        used = (size_t)r;
    } else {
        const size_t want = (size_t)c->head.content_length - c->body_len;
        used = c->in_len < want ? c->in_len : want;
        if (c->body_len + used + 1 > c->body_cap) {
            size_t cap = c->body_len + used + 1;
            char *grown = realloc(c->body, cap);
            if (!grown) return respond_error(c, 500, "out of memory");
            c->body = grown, c->body_cap = cap;
        }
        memcpy(c->body + c->body_len, c->in, used);
        c->body_len += used;
        c->body[c->body_len] = 0;
    }
    memmove(c->in, c->in + used, c->in_len - used);
    c->in_len -= used;
    const int whole = c->head.chunked ? c->chunks.state == HTTP_CHUNKS_DONE
                                      : c->body_len == (size_t)c->head.content_length;
    if (whole) hand_over(c);
}

/* A head in c->in: parsed, checked, then its body read. */
static void take_head(http_conn *c) {
    const size_t end = http_head_end(c->in, c->in_len);
    if (!end) {
        if (c->in_len > c->s->cfg.max_head) respond_error(c, 431, "the request head is larger than 64 KiB");
        return;
    }
    char err[256];
    c->have_head = 1;
    const int bad = end > c->s->cfg.max_head ? 431 : http_head_parse(c->in, end, &c->head, err, sizeof err);
    memmove(c->in, c->in + end, c->in_len - end);
    c->in_len -= end;
    if (bad) return respond_error(c, bad, bad == 431 ? "the request head is larger than 64 KiB" : err);
    c->head_ok = 1;
    c->max_body = c->s->cfg.body_limit ? c->s->cfg.body_limit(c->s->cfg.user, c) : c->s->cfg.max_body;
    if (c->head.content_length > c->max_body) return respond_error(c, 413, "the body is larger than --max-body");
    c->state = BODY;
    if (c->head.expect_continue && (c->head.chunked || c->head.content_length > 0))
        send(c->fd, "HTTP/1.1 100 Continue\r\n\r\n", 25, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (!c->head.chunked && c->head.content_length <= 0) c->head.content_length = 0;
    take_body_bytes(c);
}

/* What is in c->in, as far as it goes. */
static void advance(http_conn *c) {
    if (c->state == HEAD && c->in_len) {
        if (!c->started) c->started = now();
        take_head(c);
    } else if (c->state == BODY) {
        take_body_bytes(c);
    }
}

static void on_readable(http_conn *c) {
    if (c->in_len + READ_CHUNK + 1 > c->in_cap) {
        char *grown = realloc(c->in, c->in_len + READ_CHUNK + 1);
        if (!grown) return conn_close(c, "out of memory");
        c->in = grown, c->in_cap = c->in_len + READ_CHUNK + 1;
    }
    const ssize_t n = recv(c->fd, c->in + c->in_len, READ_CHUNK, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (c->state == DRAIN) {
        c->drained += n > 0 ? (size_t)n : 0;
        if (n <= 0 || c->drained > DRAIN_BYTES) conn_free(c);
        return;
    }
    if (n <= 0) return conn_close(c, n == 0 ? "client closed" : "read error");
    c->in_len += (size_t)n;
    c->active = now();
    advance(c);
}

/* ---------------------------------------------------------------------------------------
 * Writing an answer */

/* The answer is out: the next request (keep-alive), the drain or the close. */
static void answer_sent(http_conn *c) {
    request_over(c, c->status, "");
    if (!c->close_after) {
        c->state = HEAD, c->started = 0;
        watch(c, EPOLLIN);
        if (c->in_len) advance(c); /* a pipelined request */
        return;
    }
    shutdown(c->fd, SHUT_WR);
    c->state = DRAIN, c->active = now(), c->drained = 0;
    watch(c, EPOLLIN);
}

static void on_writable(http_conn *c) {
    while (c->out_sent < c->out_len) {
        const ssize_t n = send(c->fd, c->out + c->out_sent, c->out_len - c->out_sent, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
        if (n <= 0) return conn_close(c, "write error");
        c->out_sent += (size_t)n;
        c->active = now();
    }
    answer_sent(c);
}

/* ---------------------------------------------------------------------------------------
 * Resuming, timers, the loop */

static void poke(http_server *s) {
    const uint64_t one = 1;
    if (write(s->wake_fd, &one, sizeof one) < 0) { /* full: the loop is awake anyway */
    }
}

void http_resume(http_conn *c) {
    http_server *s = c->s;
    pthread_mutex_lock(&s->mu);
    c->resumed = 1;
    c->resume_next = s->resume_head;
    s->resume_head = c;
    pthread_mutex_unlock(&s->mu);
    poke(s);
}

static void run_resumed(http_server *s) {
    uint64_t count;
    if (read(s->wake_fd, &count, sizeof count) < 0) { /* nothing to read: woken for another reason */
    }
    pthread_mutex_lock(&s->mu);
    http_conn *list = s->resume_head;
    s->resume_head = NULL;
    pthread_mutex_unlock(&s->mu);
    while (list) {
        http_conn *c = list;
        list = c->resume_next;
        c->resumed = 0;
        s->cfg.on_resume(s->cfg.user, c); /* answers: state WRITE */
        if (c->dead) {
            request_over(c, 0, "client gone");
            conn_free(c);
        } else if (c->state == WAIT) {
            respond_error(c, 500, "no answer was made");
        }
    }
}

/* Deadlines: a head not whole within head_timeout of its first byte (408), a stalled body
 * or answer, an idle keep-alive connection, a drain that has run its time. */
static void check_timers(http_server *s) {
    const double t = now();
    for (http_conn *c = s->conns, *next; c; c = next) {
        next = c->next;
        const double idle = t - c->active;
        if (c->state == HEAD && c->in_len && t - c->started > s->cfg.head_timeout) {
            if (s->cfg.verbose) fprintf(stderr, "attend serve: %s: request head not complete in time\n", c->client);
            respond_error(c, 408, "the request head did not arrive in time (see --head-timeout)");
        } else if ((c->state == HEAD || c->state == BODY || c->state == WRITE) && idle > s->cfg.idle_timeout) {
            conn_close(c, "timed out");
        } else if (c->state == DRAIN && idle > DRAIN_SECONDS) {
            conn_free(c);
        }
    }
}

static void *loop_main(void *arg) {
    http_server *s = arg;
    struct epoll_event events[64];
    double last_tick = now();
    for (;;) {
        pthread_mutex_lock(&s->mu);
        const int stopping = s->stopping, quiesce = s->quiesce;
        s->quiesce = 0;
        pthread_mutex_unlock(&s->mu);
        if (stopping) break;
        if (quiesce && s->listen_fd >= 0) {
            epoll_ctl(s->epoll_fd, EPOLL_CTL_DEL, s->listen_fd, NULL);
            close(s->listen_fd);
            s->listen_fd = -1;
        }
        const int n = epoll_wait(s->epoll_fd, events, 64, 200);
        for (int i = 0; i < n; i++) {
            void *p = events[i].data.ptr;
            if (p == (void *)&s->listen_fd) accept_all(s);
            else if (p == (void *)&s->wake_fd) run_resumed(s);
            else if (events[i].events & EPOLLOUT) on_writable(p);
            else if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) on_readable(p);
        }
        if (now() - last_tick > 0.2) check_timers(s), last_tick = now();
    }
    return NULL;
}

/* ---------------------------------------------------------------------------------------
 * Start and stop */

static int listen_on(http_server *s, const struct sockaddr *addr, socklen_t addrlen) {
    s->listen_fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    const int one = 1;
    if (s->listen_fd < 0) return -1;
    setsockopt(s->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(s->listen_fd, addr, addrlen) || listen(s->listen_fd, 1024)) return -1;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(s->listen_fd, (struct sockaddr *)&ss, &sl)) return -1;
    s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                             : ((struct sockaddr_in *)&ss)->sin_port);
    return 0;
}

static int add_watch(http_server *s, int fd, void *tag) {
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = tag};
    return epoll_ctl(s->epoll_fd, EPOLL_CTL_ADD, fd, &ev);
}

http_server *http_start(const struct sockaddr *addr, socklen_t addrlen, const http_config *cfg, char *err,
                        size_t errlen) {
    http_server *s = calloc(1, sizeof *s);
    if (!s) return snprintf(err, errlen, "out of memory"), NULL;
    s->cfg = *cfg;
    s->listen_fd = s->epoll_fd = s->wake_fd = -1;
    pthread_mutex_init(&s->mu, NULL);
    int ok = listen_on(s, addr, addrlen) == 0;
    if (!ok) snprintf(err, errlen, "cannot listen: %s", strerror(errno));
    if (ok) ok = (s->epoll_fd = epoll_create1(EPOLL_CLOEXEC)) >= 0 &&
                 (s->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) >= 0 &&
                 !add_watch(s, s->listen_fd, &s->listen_fd) && !add_watch(s, s->wake_fd, &s->wake_fd);
    if (ok && pthread_create(&s->thread, NULL, loop_main, s)) ok = 0;
    if (!ok) {
        if (!err[0]) snprintf(err, errlen, "cannot start the HTTP thread: %s", strerror(errno));
        if (s->listen_fd >= 0) close(s->listen_fd);
        if (s->epoll_fd >= 0) close(s->epoll_fd);
        if (s->wake_fd >= 0) close(s->wake_fd);
        pthread_mutex_destroy(&s->mu);
        free(s);
        return NULL;
    }
    return s;
}

int http_port(const http_server *s) { return s->port; }

void http_quiesce(http_server *s) {
    pthread_mutex_lock(&s->mu);
    s->quiesce = 1;
    pthread_mutex_unlock(&s->mu);
    poke(s);
    for (int i = 0; i < 100; i++) { /* closed by the loop: wait for it, so no new client gets in */
        pthread_mutex_lock(&s->mu);
        const int done = !s->quiesce;
        pthread_mutex_unlock(&s->mu);
        if (done) break;
        usleep(10000);
    }
}

void http_stop(http_server *s) {
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_mutex_unlock(&s->mu);
    poke(s);
    pthread_join(s->thread, NULL);
    run_resumed(s); /* answers made since the loop's last turn: not sent, only finished */
    while (s->conns) {
        s->conns->state = s->conns->state == WAIT ? HEAD : s->conns->state;
        conn_close(s->conns, "server stopping");
    }
    if (s->listen_fd >= 0) close(s->listen_fd);
    close(s->epoll_fd);
    close(s->wake_fd);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* ---------------------------------------------------------------------------------------
 * The request, for the handler */

const char *http_method(const http_conn *c) { return c->have_head && c->head.method ? c->head.method : "-"; }
const char *http_path(const http_conn *c) { return c->have_head && c->head.path ? c->head.path : "-"; }
const char *http_header(const http_conn *c, const char *name) {
    return c->have_head ? http_head_get(&c->head, name) : NULL;
}
const char *http_client(const http_conn *c) { return c->client; }
void **http_data(http_conn *c) { return &c->data; }

char *http_body(http_conn *c, size_t *len) {
    *len = c->body_len;
    return c->body;
}

void http_take_body(http_conn *c) {
    c->body = NULL;
    c->body_len = c->body_cap = 0;
}
