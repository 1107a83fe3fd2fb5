/* Reading lines through our own buffer (line_reader.h). */
#include "line_reader.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The buffer holds at most one partial line (at most max_line bytes) besides what arrives. */
int line_reader_fill(line_reader *r) {
    if (r->start > 0) {
        memmove(r->buf, r->buf + r->start, r->len - r->start);
        r->len -= r->start;
        r->start = 0;
    }
    if (r->len + 65536 > r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 1 << 17;
        char *p = realloc(r->buf, cap);
        if (!p) return -1;
        r->buf = p;
        r->cap = cap;
    }
    for (;;) {
        ssize_t k = read(r->fd, r->buf + r->len, r->cap - r->len);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return -1;
        if (k == 0) {
            r->eof = 1;
            return 0;
        }
        r->len += (size_t)k;
        return 1;
    }
}

/* A line longer than max_line is given as soon as its first max_line bytes are here; its
 * rest up to the \n is dropped as it arrives. */
int line_reader_take(line_reader *r, char **line, size_t *n) {
    if (!r->buf) return 0; /* nothing read yet (memchr on NULL is undefined even for 0 bytes) */
    if (r->skipping) {
        char *end = memchr(r->buf + r->start, '\n', r->len - r->start);
        r->start = end ? (size_t)(end - r->buf) + 1 : r->len;
        if (!end) return 0;
        r->skipping = 0;
    }
    char *s = r->buf + r->start;
    const size_t avail = r->len - r->start;
    char *nl = memchr(s, '\n', avail);
    size_t l = nl ? (size_t)(nl - s) : avail;
    if (l > r->max_line) {
        *line = s;
        *n = r->max_line;
        r->start += nl ? l + 1 : r->max_line;
        r->skipping = !nl;
        return 1;
    }
    if (!nl && !(r->eof && avail > 0)) return 0;
    r->start += l + (nl ? 1 : 0);
    if (l && s[l - 1] == '\r') l--;
    *line = s;
    *n = l;
    return 1;
}

int line_reader_waiting(const line_reader *r) {
    struct pollfd p = {r->fd, POLLIN, 0};
    return poll(&p, 1, 0) > 0;
}
