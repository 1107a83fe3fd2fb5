/* A multipart/form-data body (RFC 7578, as browsers and LibreTranslate's clients send POST
 * /translate_file) split into its parts (serve.h). The whole body is in memory already
 * (--max-body bounds it), so the parser only points into it: no copies, no allocation, and
 * every read bounded by the body's length. Anything not of that form (no boundary, a part
 * cut short, no closing delimiter, headers past SERVE_PART_HEADERS bytes, too many parts) is
 * an error for a 400, never a guess. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "serve.h"

#define BOUNDARY_MAX 70 /* RFC 2046 */

/* The boundary parameter of a Content-Type into out ("--" before it). 0, or -1. */
static int find_boundary(const char *type, char *out, size_t outlen) {
    if (!type || strncasecmp(type, "multipart/form-data", 19)) return -1;
    const char *p = type + 19;
    while ((p = strchr(p, ';'))) {
        p++;
        while (*p == ' ' || *p == '\t') p++;
        if (strncasecmp(p, "boundary=", 9)) continue;
        p += 9;
        const int quoted = *p == '"';
        p += quoted;
        size_t n = quoted ? strcspn(p, "\"") : strcspn(p, "; \t");
        if (n == 0 || n > BOUNDARY_MAX || (quoted && p[n] != '"') || n + 3 > outlen) return -1;
        snprintf(out, outlen, "--%.*s", (int)n, p);
        return 0;
    }
    return -1;
}

/* A parameter (name="..." or name=token) of a Content-Disposition line [p, end) into *v,*n. */
static void disposition_param(const char *p, const char *end, const char *param, const char **v, size_t *n) {
    const size_t plen = strlen(param);
    for (const char *s = p; s + plen + 1 < end; s++) {
        if ((s[-1] != ';' && s[-1] != ' ' && s[-1] != '\t') || strncasecmp(s, param, plen) || s[plen] != '=')
            continue;
        const char *val = s + plen + 1;
        if (val < end && *val == '"') {
            const char *close = memchr(val + 1, '"', (size_t)(end - val - 1));
            if (!close) return;
            *v = val + 1, *n = (size_t)(close - val - 1);
        } else {
            const char *stop = val;
            while (stop < end && *stop != ';' && *stop != ' ' && *stop != '\t') stop++;
            *v = val, *n = (size_t)(stop - val);
        }
        return;
    }
}

/* The headers of one part, [p, end): its name and filename. 0, or -1 (no form-data name). */
static int read_part_headers(const char *p, const char *end, serve_part *part) {
    while (p < end) {
        const char *eol = memmem(p, (size_t)(end - p), "\r\n", 2);
        if (!eol) eol = end;
        if (eol - p > 20 && !strncasecmp(p, "Content-Disposition:", 20)) {
            const char *v = p + 20;
            while (v < eol && (*v == ' ' || *v == '\t')) v++;
            if (eol - v < 9 || strncasecmp(v, "form-data", 9)) return -1;
            disposition_param(v + 9, eol, "name", &part->name, &part->name_len);
            disposition_param(v + 9, eol, "filename", &part->filename, &part->filename_len);
        }
        p = eol + 2;
    }
    return part->name ? 0 : -1;
}

/* One part at *p (just after a delimiter's CRLF): headers, blank line, data up to the next
 * delimiter; *p moves past that delimiter. 0, 1 (the closing delimiter followed), or -1. */
static int read_part(const char **p, const char *end, const char *delim, serve_part *part, char *err,
                     size_t errlen) {
    memset(part, 0, sizeof *part);
    const size_t window = (size_t)(end - *p) < SERVE_PART_HEADERS + 4 ? (size_t)(end - *p) : SERVE_PART_HEADERS + 4;
    const char *blank = (*p + 2 <= end && !memcmp(*p, "\r\n", 2)) ? *p - 2 : memmem(*p, window, "\r\n\r\n", 4);
    if (!blank) return snprintf(err, errlen, "a part's headers are cut short or longer than %d bytes",
                                SERVE_PART_HEADERS), -1;
    if (read_part_headers(*p, blank, part)) return snprintf(err, errlen, "a part has no form-data name"), -1;
    const char *data = blank + 4;
    char needle[BOUNDARY_MAX + 8];
    const size_t nlen = (size_t)snprintf(needle, sizeof needle, "\r\n%s", delim);
    const char *next = memmem(data, (size_t)(end - data), needle, nlen);
    if (!next) return snprintf(err, errlen, "a part is cut short (no delimiter after it)"), -1;
    part->data = data, part->len = (size_t)(next - data);
    const char *after = next + nlen;
    if (end - after >= 2 && !memcmp(after, "--", 2)) return *p = after + 2, 1;
    while (after < end && (*after == ' ' || *after == '\t')) after++; /* transport padding */
    if (end - after < 2 || memcmp(after, "\r\n", 2)) return snprintf(err, errlen, "a delimiter is cut short"), -1;
    *p = after + 2;
    return 0;
}

int serve_multipart_parse(const char *content_type, const char *body, size_t len, serve_part *parts,
                          int max_parts, char *err, size_t errlen) {
    char delim[BOUNDARY_MAX + 4];
    if (find_boundary(content_type, delim, sizeof delim))
        return snprintf(err, errlen, "the body must be multipart/form-data with a boundary"), -1;
    const char *end = body + len, *first = memmem(body, len, delim, strlen(delim));
    if (!first) return snprintf(err, errlen, "the multipart body has no delimiter"), -1;
    const char *p = first + strlen(delim);
    if (end - p < 2 || memcmp(p, "\r\n", 2)) return snprintf(err, errlen, "the multipart body has no part"), -1;
    p += 2;
    for (int n = 0;;) {
        if (n == max_parts) return snprintf(err, errlen, "more than %d parts in the form", max_parts), -1;
        const int rc = read_part(&p, end, delim, &parts[n], err, errlen);
        if (rc < 0) return -1;
        n++;
        if (rc == 1) return n;
    }
}
