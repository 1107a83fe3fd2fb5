/* Pages written through a temporary file (page_file.h). */
#include "page_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int page_write_file(const char *cmd, const char *path, page_writer write, const void *ctx) {
    if (!strcmp(path, "-")) {
        const int status = write(stdout, ctx);
        return cli_flush_stdout() && status == EXIT_OK ? EXIT_IO : status;
    }
    size_t plen = strlen(path) + 16;
    char *tmp = malloc(plen);
    if (!tmp) {
        fprintf(stderr, "attend %s: out of memory\n", cmd);
        return EXIT_FAIL;
    }
    snprintf(tmp, plen, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "attend %s: %s: %s\n", cmd, tmp, strerror(errno));
        free(tmp);
        return EXIT_IO;
    }
    int status = write(f, ctx);
    if (fclose(f) != 0) {
        fprintf(stderr, "attend %s: %s: %s\n", cmd, tmp, strerror(errno));
        if (status == EXIT_OK) status = EXIT_IO;
    }
    if (status == EXIT_OK && rename(tmp, path) != 0) {
        fprintf(stderr, "attend %s: %s: %s\n", cmd, path, strerror(errno));
        status = EXIT_IO;
    }
    if (status != EXIT_OK) remove(tmp);
    free(tmp);
    return status;
}
