/* Helpers shared by the attend subcommands. */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* ---------------------------------------------------------------------------------------
 * Finding the model */

/* -m, else $ATTEND_MODEL, else the shipped model next to the binary: <bin>/../models (the
 * build tree) or <bin>/../share/attend (an install). NULL when none is there; the places
 * looked at are then written to looked (for the error message). */
static const char *default_model(char *buf, size_t n, char *looked, size_t nl) {
    const char *env = getenv("ATTEND_MODEL");
    if (env && *env) return env;
    snprintf(looked, nl, "(could not read /proc/self/exe)");
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0) return NULL;
    exe[k] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash) return NULL;
    *slash = 0;
    const char *rel[] = {"/../models/de-en.gguf", "/../share/attend/de-en.gguf"};
    size_t used = 0;
    looked[0] = 0;
    for (size_t i = 0; i < 2; i++) {
        snprintf(buf, n, "%s%s", exe, rel[i]);
        if (access(buf, R_OK) == 0) {
            char *real = realpath(buf, NULL); /* the path without "bin/.." for messages */
            if (real && strlen(real) < n) snprintf(buf, n, "%s", real);
            free(real);
            return buf;
        }
        int w = snprintf(looked + used, nl - used, "%s%s", i ? ", " : "", buf);
        if (w > 0 && used + (size_t)w < nl) used += (size_t)w;
    }
    return NULL;
}

const char *cli_model_path(const char *path, char *buf, size_t n) {
    char looked[2 * PATH_MAX + 64];
    if (path) return path;
    path = default_model(buf, n, looked, sizeof looked);
    if (!path) {
        fprintf(stderr, "attend: no model given and no shipped model found (looked for %s): use -m "
                        "MODEL.gguf or set ATTEND_MODEL\n", looked);
        exit(EXIT_USAGE);
    }
    return path;
}

/* The model is memory-mapped: if another process truncates the file while attend runs, the
 * next read of a page past the new end raises SIGBUS. Say so and exit with the model
 * status instead of dying with "Bus error". The message is built before, as a handler may
 * only call async-signal-safe functions. */
static char sigbus_msg[PATH_MAX + 160];
static size_t sigbus_len;

static void on_sigbus(int sig) {
    (void)sig;
    ssize_t w = write(STDERR_FILENO, sigbus_msg, sigbus_len);
    (void)w;
    _exit(EXIT_MODEL);
}

static void watch_model_file(const char *path) {
    int n = snprintf(sigbus_msg, sizeof sigbus_msg,
                     "attend: %s: the model file shrank while in use (truncated or rewritten in place); "
                     "replace model files by renaming a new file over the old one\n", path);
    sigbus_len = n < 0 ? 0 : (size_t)n < sizeof sigbus_msg ? (size_t)n : sizeof sigbus_msg - 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigbus;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}

attend_model *cli_load_model(const char *path) { return cli_load_model_with(path, 0); }

static const char *compute_type; /* --compute; NULL: the default */

int cli_set_compute(const char *opt, const char *name) {
    if (strcmp(name, "f32") && strcmp(name, "bf16") && strcmp(name, "auto")) {
        fprintf(stderr, "attend: %s %s: must be f32, bf16 or auto\n", opt, name);
        return EXIT_USAGE;
    }
    compute_type = name;
    return 0;
}

const char *cli_compute(void) { return compute_type; }

attend_model *cli_load_model_with(const char *path, int inspect_only) {
    char buf[PATH_MAX + 64], err[512];
    path = cli_model_path(path, buf, sizeof buf);
    watch_model_file(path);
    attend_load_params lp = attend_default_load_params();
    lp.inspect_only = inspect_only;
    lp.compute_type = compute_type;
    attend_model *m = attend_load_with(path, &lp, err, sizeof err);
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

float cli_parse_float(const char *opt, const char *s, double lo, double hi) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || end == s || !(v >= lo && v <= hi)) {
        fprintf(stderr, "attend: %s: '%s' is not a number in %g..%g\n", opt, s, lo, hi);
        exit(EXIT_USAGE);
    }
    return (float)v;
}

/* ---------------------------------------------------------------------------------------
 * Options and standard output */

int cli_wants_help(int argc, char **argv) {
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return 1;
    return 0;
}

int cli_is_option(const char *a) { return a[0] == '-' && a[1]; }

int cli_unknown_option(const char *cmd, const char *opt) {
    fprintf(stderr, "attend %s: unknown option %s (see --help)\n", cmd, opt);
    return EXIT_USAGE;
}

/* Is code one of the model's languages? */
static int has_language(const attend_config *c, const char *code) {
    for (int i = 0; i < c->n_languages; i++)
        if (!strcmp(c->languages[i], code)) return 1;
    return 0;
}

static void print_languages(const attend_config *c) {
    for (int i = 0; i < c->n_languages; i++) fprintf(stderr, "%s%s", i ? " " : "", c->languages[i]);
    fprintf(stderr, "\n");
}

int cli_check_task(const char *cmd, const attend_model *m, const char *task) {
    const attend_config *c = attend_get_config(m);
    for (int i = 0; task && i < c->n_tasks; i++)
        if (!strcmp(c->tasks[i], task)) return 0;
    if (!task) return 0;
    fprintf(stderr, "attend %s: --task '%s' is not a task of this model; it has: %s", cmd, task,
            c->n_tasks ? "" : "none");
    for (int i = 0; i < c->n_tasks; i++) fprintf(stderr, "%s%s", i ? " " : "", c->tasks[i]);
    fprintf(stderr, "\n");
    return EXIT_USAGE;
}

int cli_check_languages(const char *cmd, const attend_model *m, const char *src, const char *tgt, int need_src) {
    const attend_config *c = attend_get_config(m);
    if (c->n_languages == 0) {
        /* a Marian model's --tgt-lang is a >>xx<< code, a T5 model's (MADLAD-400) a <2xx>
         * code: the library checks its pieces */
        if (!src && (!tgt || !strcmp(c->architecture, "marian") || !strcmp(c->architecture, "t5"))) return 0;
        fprintf(stderr, "attend %s: --src-lang/--tgt-lang: this %s model has no languages to choose\n", cmd,
                c->architecture);
        return EXIT_USAGE;
    }
    const char *opts[2] = {"--src-lang", "--tgt-lang"}, *vals[2] = {src, tgt};
    for (int k = 0; k < 2; k++) {
        if (!vals[k] && (k == 1 || need_src)) {
            fprintf(stderr, "attend %s: this model is multilingual: give %s, one of: ", cmd, opts[k]);
            print_languages(c);
            return EXIT_USAGE;
        }
        if (vals[k] && !has_language(c, vals[k])) {
            fprintf(stderr, "attend %s: %s '%s' is not a language of this model; it has: ", cmd, opts[k], vals[k]);
            print_languages(c);
            return EXIT_USAGE;
        }
    }
    return 0;
}

/* A command that flushed standard output itself and failed leaves only the error flag
 * (glibc drops the buffer, so this fflush succeeds): errno then still holds that write's
 * error, as nothing after it fails. */
static int stdout_reported;

int cli_flush_stdout(void) {
    const int before = errno;
    errno = 0;
    const int failed = fflush(stdout) != 0, e = failed ? errno : before;
    if (!failed && !ferror(stdout)) return 0;
    if (!stdout_reported && e != EPIPE)
        fprintf(stderr, "attend: writing standard output: %s\n", e ? strerror(e) : "write error");
    stdout_reported = 1;
    return EXIT_IO;
}
