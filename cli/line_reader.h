/* line_reader: lines of a file descriptor through our own buffer, so attend translate knows
 * which lines are already here and can batch them without waiting for more (interactive use
 * stays one line in, one line out). A line longer than max_line is given as its first
 * max_line bytes, and the rest of it is read and dropped, so the buffer stays small however
 * long a line is.
 *
 *   line_reader r = {0};            // fd 0: standard input
 *   r.max_line = 4096;
 *   for (;;) {
 *       if (line_reader_take(&r, &s, &n)) { use s[0..n); continue; }
 *       if (r.eof || line_reader_fill(&r) < 0) break;
 *   }
 *   free(r.buf); */
#ifndef ATTEND_CLI_LINE_READER_H
#define ATTEND_CLI_LINE_READER_H

#include <stddef.h>

typedef struct {
    int fd;
    char *buf;
    size_t len, cap, start;
    size_t max_line; /* bytes kept of a longer line; the rest is read and dropped */
    int eof;
    int skipping;    /* inside the dropped rest of a line */
} line_reader;

/* Pull more bytes. Returns 1 if some arrived, 0 at end of input, -1 on error (errno set). */
int line_reader_fill(line_reader *r);
/* A complete line already buffered? Sets line and length (without \n or \r\n); the line
 * stays valid until the next fill. 1 if one was there, else 0. */
int line_reader_take(line_reader *r, char **line, size_t *n);
/* Is more input waiting on fd, readable without blocking? */
int line_reader_waiting(const line_reader *r);

#endif
