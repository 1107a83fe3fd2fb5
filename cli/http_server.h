/* http_server: the HTTP/1.1 server under attend serve. One thread runs an epoll loop over
 * every connection; a request is handed over only once it is whole (head and body), and
 * may be answered later from another thread (http_resume), so a slow model never holds up
 * the loop and a slow client never holds up the model. Everything a client can get wrong
 * is answered here, as the caller's JSON error body: a head over max_head (431), a head
 * not complete within head_timeout seconds of its first byte (408, however slowly the bytes
 * trickle), a malformed request line, header, Content-Length or chunked encoding (400), a
 * body over max_body (413, then the rest of the body read and dropped before the close, so
 * the client sees the answer rather than a reset), too many connections in all or from one
 * address (503). A client that half-closes its side after a whole request still gets its
 * answer. Written for attend serve instead of libmicrohttpd 0.9.75, which answered these
 * cases with HTML, twice in one response, or not at all (docs/serve.md). */
#ifndef ATTEND_CLI_HTTP_SERVER_H
#define ATTEND_CLI_HTTP_SERVER_H

#include <stddef.h>
#include <sys/socket.h>

typedef struct http_server http_server;
typedef struct http_conn http_conn;

typedef struct {
    size_t max_head;      /* bytes of request line and headers (431 above) */
    long long max_body;   /* bytes of body (413 above) */
    int head_timeout;     /* seconds from a request's first byte to its blank line (408) */
    int idle_timeout;     /* seconds a connection may idle between requests or stall (closed) */
    int max_connections;  /* open connections (503 above) */
    int max_per_address;  /* open connections from one address (503 above; 0: no limit) */
    /* A whole request: answer it now (http_respond), or later from any thread (http_resume,
     * then on_resume answers). Called on the loop thread. */
    void (*on_request)(void *user, http_conn *c);
    void (*on_resume)(void *user, http_conn *c);
    /* The request is over: its answer sent (status, body bytes) or the client gone before
     * (status 0, why says what happened). The handler frees what hangs off *http_data(c). */
    void (*on_done)(void *user, http_conn *c, int status, size_t sent, const char *why);
    /* {"error": msg} for the errors the server answers itself (malloc'd) */
    char *(*error_body)(const char *msg, size_t *len);
    /* Optional, for a request whose head was read whole (its path known): its body limit in
     * place of max_body (a route taking uploads may allow more), and the body of an error
     * the server answers itself, so that a route keeps its own error shape (NULL from it:
     * error_body's). */
    long long (*body_limit)(void *user, const http_conn *c);
    char *(*route_error_body)(void *user, const http_conn *c, int status, const char *msg, size_t *len);
    void *user;
    int verbose; /* a line on stderr for each connection refused or dropped */
} http_config;

/* Listen on addr and start the loop thread; NULL with err. cfg is copied. */
http_server *http_start(const struct sockaddr *addr, socklen_t addrlen, const http_config *cfg, char *err,
                        size_t errlen);
int http_port(const http_server *s);
/* Stop accepting (the listening socket closed); requests in flight go on. */
void http_quiesce(http_server *s);
/* Close every connection (on_done for each request not answered), end the thread, free s.
 * No request may be waiting for http_resume. */
void http_stop(http_server *s);

/* The request (valid from on_request until on_done, on the loop thread). */
const char *http_method(const http_conn *c);
const char *http_path(const http_conn *c); /* without the query string */
const char *http_header(const http_conn *c, const char *name); /* case-insensitive; NULL: none */
const char *http_client(const http_conn *c);                    /* the peer's address, as text */
char *http_body(http_conn *c, size_t *len); /* NUL-terminated; the caller may take it (set *taken) */
void http_take_body(http_conn *c);          /* the body now belongs to the caller */
void **http_data(http_conn *c);             /* one pointer for the handler */
/* The answer: status, extra headers ("Name", "value" pairs ending with NULL; may be NULL),
 * the body (owned by the server from now on: freed with free() unless persistent). */
void http_respond(http_conn *c, int status, const char *type, const char *const *headers, char *body, size_t len,
                  int persistent);
/* From any thread: the request's answer is ready, on_resume will be called on the loop. */
void http_resume(http_conn *c);

#endif
