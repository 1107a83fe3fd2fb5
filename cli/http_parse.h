/* http_parse: an HTTP/1.1 request head, and a chunked body, read from bytes (http_server.c's
 * parsers, kept apart so that they can be tested and fuzzed on their own). */
#ifndef ATTEND_CLI_HTTP_PARSE_H
#define ATTEND_CLI_HTTP_PARSE_H

#include <stddef.h>

#define HTTP_MAX_HEADERS 100

typedef struct {
    char *method, *target, *path; /* path: the target without its query */
    int minor;                    /* HTTP/1.minor */
    int n_headers;
    char *names[HTTP_MAX_HEADERS], *values[HTTP_MAX_HEADERS];
    long long content_length; /* -1: none */
    int chunked;
    int keep_alive;    /* the connection may carry another request after this one */
    int expect_continue;
    char *copy;        /* the head's text, which the pointers above point into */
} http_head;

/* The length of the head at buf (through its blank line), 0 when it is not complete yet. */
size_t http_head_end(const char *buf, size_t n);
/* Parse the head buf[0..n) (n from http_head_end) into h: 0, or an HTTP status (400, 431,
 * 501, 505) with a reason in err. h->copy is malloc'd either way (http_head_free). */
int http_head_parse(const char *buf, size_t n, http_head *h, char *err, size_t errlen);
void http_head_free(http_head *h);
const char *http_head_get(const http_head *h, const char *name);

/* A chunked body, decoded as its bytes arrive. */
typedef struct {
    int state;           /* where in a chunk: size line, data, CRLF after data, trailers, done */
    unsigned long long left; /* data bytes left in this chunk */
    int digits, line;    /* size digits seen; bytes of the current line (bounded) */
} http_chunks;

/* Decode in[0..n): data bytes are appended to *out (its length *len; at most max in all).
 * Returns the bytes of in consumed (the rest belongs to the next request), or -1 with err
 * (a malformed encoding: 400), or -2 (the body would pass max: 413). c->state ==
 * HTTP_CHUNKS_DONE once the body is complete. *out grows by realloc (NUL-terminated). */
enum { HTTP_CHUNKS_DONE = 5 };
long long http_chunks_feed(http_chunks *c, const char *in, size_t n, char **out, size_t *len, size_t *cap,
                           long long max, char *err, size_t errlen);

#endif
