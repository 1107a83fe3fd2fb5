/* Helpers shared by the attend subcommands. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* ---------------------------------------------------------------------------------------
 * Finding the model */

/* -m, else $ATTEND_MODEL, else the shipped model next to the binary: <bin>/../models (the
 * build tree) or <bin>/../share/attend (an install). */
static const char *default_model(char *buf, size_t n) {
    const char *env = getenv("ATTEND_MODEL");
    if (env && *env) return env;
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) return NULL;
    exe[k] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash) return NULL;
    *slash = 0;
    const char *rel[] = {"/../models/de-en.gguf", "/../share/attend/de-en.gguf"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(buf, n, "%s%s", exe, rel[i]);
        if (access(buf, R_OK) == 0) return buf;
    }
    return NULL;
}

attend_model *cli_load_model(const char *path) {
    char buf[PATH_MAX + 64], err[512];
    if (!path) path = default_model(buf, sizeof buf);
    if (!path) {
        fprintf(stderr, "attend: no model given: use -m MODEL.gguf or set ATTEND_MODEL\n");
        exit(EXIT_USAGE);
    }
    attend_model *m = attend_load(path, err, sizeof err);
    if (!m) {
        fprintf(stderr, "attend: %s: %s\n", path, err);
        exit(EXIT_MODEL);
    }
    return m;
}

int cli_parse_int(const char *opt, const char *s, int lo, int hi) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < lo || v > hi) {
        fprintf(stderr, "attend: %s: '%s' is not a number in %d..%d\n", opt, s, lo, hi);
        exit(EXIT_USAGE);
    }
    return (int)v;
}

