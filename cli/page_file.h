/* page_file: attend explore's pages written whole or not at all: through a temporary file
 * (PATH.tmp) renamed at the end, so that a failure leaves no half page; "-" writes to
 * standard output. */
#ifndef ATTEND_CLI_PAGE_FILE_H
#define ATTEND_CLI_PAGE_FILE_H

#include <stdio.h>

/* Writes the page to f; returns an exit status (EXIT_OK, or the failure after its message). */
typedef int (*page_writer)(FILE *f, const void *ctx);

/* write(f, ctx) into path ("-": standard output). The exit status: write's, or EXIT_IO after
 * "attend CMD: PATH: why" when the file cannot be written or renamed. */
int page_write_file(const char *cmd, const char *path, page_writer write, const void *ctx);

#endif
