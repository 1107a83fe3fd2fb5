/* http_parse (http_parse.h): request heads and chunked bodies. Strict where leniency lets a
 * request be read two ways (conflicting lengths, Content-Length beside chunked, folded
 * headers, whitespace before a colon): such requests are refused rather than guessed at. */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_parse.h"

static int fail(char *err, size_t errlen, int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return status;
}

size_t http_head_end(const char *buf, size_t n) {
    for (size_t i = 0; i + 1 < n; i++) {
        if (buf[i] != '\n') continue;
        if (buf[i + 1] == '\n') return i + 2;
        if (buf[i + 1] == '\r' && i + 2 < n && buf[i + 2] == '\n') return i + 3;
    }
    return 0;
}

/* RFC 9110's token characters (methods, header names). */
static int is_token(const char *s) {
    if (!*s) return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("!#$%&'*+-.^_`|~", *s)) return 0;
    return 1;
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t') s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = 0;
    return s;
}

/* "GET /path?q HTTP/1.1" into h. */
static int parse_request_line(char *line, http_head *h, char *err, size_t errlen) {
    char *sp1 = strchr(line, ' '), *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
    if (!sp1 || !sp2 || strchr(sp2 + 1, ' ')) return fail(err, errlen, 400, "malformed request line");
    *sp1 = *sp2 = 0;
    h->method = line, h->target = sp1 + 1;
    const char *version = sp2 + 1;
    if (!is_token(h->method)) return fail(err, errlen, 400, "malformed method");
    if (strncmp(version, "HTTP/1.", 7) || !isdigit((unsigned char)version[7]) || version[8])
        return fail(err, errlen, strncmp(version, "HTTP/", 5) ? 400 : 505, "only HTTP/1.0 and HTTP/1.1 are served");
    h->minor = version[7] - '0';
    if (h->target[0] != '/' && strcmp(h->target, "*")) return fail(err, errlen, 400, "malformed request target");
    for (const char *p = h->target; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f) return fail(err, errlen, 400, "malformed request target");
    return 0;
}

/* The framing headers: Content-Length (digits only, one value), Transfer-Encoding
 * (chunked only, never beside a length), Connection, Expect. */
static int read_framing(http_head *h, char *err, size_t errlen) {
    h->content_length = -1;
    h->keep_alive = h->minor >= 1;
    for (int i = 0; i < h->n_headers; i++) {
        const char *name = h->names[i], *v = h->values[i];
        if (!strcasecmp(name, "Content-Length")) {
            long long n = 0;
            if (!*v || strspn(v, "0123456789") != strlen(v) || strlen(v) > 18)
                return fail(err, errlen, 400, "Content-Length must be a number of bytes (0 to 10^18)");
            n = atoll(v);
            if (h->content_length >= 0 && h->content_length != n)
                return fail(err, errlen, 400, "two different Content-Length headers");
            h->content_length = n;
        } else if (!strcasecmp(name, "Transfer-Encoding")) {
            if (strcasecmp(v, "chunked")) return fail(err, errlen, 501, "only the chunked transfer coding is served");
            h->chunked = 1;
        } else if (!strcasecmp(name, "Connection")) {
            if (strcasestr(v, "close")) h->keep_alive = 0;
            if (strcasestr(v, "keep-alive")) h->keep_alive = 1;
        } else if (!strcasecmp(name, "Expect")) {
            if (strcasecmp(v, "100-continue")) return fail(err, errlen, 417, "only Expect: 100-continue is served");
            h->expect_continue = 1;
        }
    }
    if (h->chunked && h->content_length >= 0)
        return fail(err, errlen, 400, "Content-Length and Transfer-Encoding: chunked together");
    return 0;
}

int http_head_parse(const char *buf, size_t n, http_head *h, char *err, size_t errlen) {
    memset(h, 0, sizeof *h);
    if (!(h->copy = malloc(n + 1))) return fail(err, errlen, 500, "out of memory");
    memcpy(h->copy, buf, n);
    h->copy[n] = 0;
    if (memchr(buf, 0, n)) return fail(err, errlen, 400, "a NUL byte in the request head");
    char *save = NULL, *line = strtok_r(h->copy, "\n", &save);
    for (int first = 1; line; line = strtok_r(NULL, "\n", &save), first = 0) {
        size_t len = strlen(line);
        if (len && line[len - 1] == '\r') line[--len] = 0;
        if (first) {
            const int rc = parse_request_line(line, h, err, errlen);
            if (rc) return rc;
            continue;
        }
        if (!len) break;
        if (line[0] == ' ' || line[0] == '\t') return fail(err, errlen, 400, "folded header lines are not served");
        char *colon = strchr(line, ':');
        if (!colon) return fail(err, errlen, 400, "a header line without a colon");
        *colon = 0;
        if (!is_token(line)) return fail(err, errlen, 400, "malformed header name");
        if (h->n_headers == HTTP_MAX_HEADERS) return fail(err, errlen, 431, "more than %d headers", HTTP_MAX_HEADERS);
        h->names[h->n_headers] = line;
        h->values[h->n_headers++] = trim(colon + 1);
    }
    if (!h->method) return fail(err, errlen, 400, "malformed request line");
    h->path = h->target;
    char *q = strchr(h->path, '?');
    if (q) *q = 0; /* routes are paths; no endpoint reads a query */
    return read_framing(h, err, errlen);
}

void http_head_free(http_head *h) {
    free(h->copy);
    memset(h, 0, sizeof *h);
}

const char *http_head_get(const http_head *h, const char *name) {
    for (int i = 0; i < h->n_headers; i++)
        if (!strcasecmp(h->names[i], name)) return h->values[i];
    return NULL;
}

/* ---------------------------------------------------------------------------------------
 * Chunked bodies */

enum { SIZE_LINE, DATA, DATA_END, TRAILERS };

static int append(const char *in, size_t n, char **out, size_t *len, size_t *cap) {
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 4096;
        while (c < *len + n + 1) c *= 2;
        char *grown = realloc(*out, c);
        if (!grown) return -1;
        *out = grown, *cap = c;
    }
    memcpy(*out + *len, in, n);
    *len += n;
    (*out)[*len] = 0;
    return 0;
}

/* One byte of a size line or a trailer line (lines are bounded: 1 KiB). */
static int line_byte(http_chunks *c, char b, char *err, size_t errlen) {
    if (++c->line > 1024) return fail(err, errlen, -1, "a chunk-size or trailer line over 1 KiB");
    if (c->state == TRAILERS) {
        if (b == '\n') c->state = c->line <= 2 ? HTTP_CHUNKS_DONE : TRAILERS, c->line = 0;
        return 0;
    }
    if (b == '\n') {
        if (!c->digits) return fail(err, errlen, -1, "a chunk without a size");
        c->state = c->left ? DATA : TRAILERS;
        c->line = 0;
        return 0;
    }
    if (c->digits >= 0 && isxdigit((unsigned char)b)) {
        if (++c->digits > 15) return fail(err, errlen, -1, "a chunk size over 15 hex digits");
        c->left = c->left * 16 + (unsigned)(isdigit((unsigned char)b) ? b - '0' : tolower((unsigned char)b) - 'a' + 10);
        return 0;
    }
    if (b == ';' || b == '\r' || b == ' ' || b == '\t') { /* an extension or the line's end: ignored */
        if (c->digits > 0) c->digits = -c->digits;
        return 0;
    }
    if (c->digits < 0) return 0; /* inside an extension */
    return fail(err, errlen, -1, "a malformed chunk size");
}

long long http_chunks_feed(http_chunks *c, const char *in, size_t n, char **out, size_t *len, size_t *cap,
                           long long max, char *err, size_t errlen) {
    size_t i = 0;
    while (i < n && c->state != HTTP_CHUNKS_DONE) {
        if (c->state == DATA) {
            size_t take = n - i < c->left ? n - i : (size_t)c->left;
            if ((long long)(*len + take) > max) return -2;
            if (append(in + i, take, out, len, cap)) return fail(err, errlen, -1, "out of memory");
            i += take, c->left -= take;
            if (!c->left) c->state = DATA_END, c->line = 0;
            continue;
        }
        const char b = in[i++];
        if (c->state == DATA_END) { /* the CRLF after a chunk's data */
            if (b == '\r' && c->line == 0) c->line = 1;
            else if (b == '\n') c->state = SIZE_LINE, c->line = 0, c->digits = 0, c->left = 0;
            else return fail(err, errlen, -1, "a chunk's data is longer than its size");
            continue;
        }
        if (line_byte(c, b, err, errlen)) return -1;
    }
    return (long long)i;
}
