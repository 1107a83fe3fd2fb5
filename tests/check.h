/* The C tests' assertions: count passes and failures, report each failure with its place,
 * keep going. CHECK(cond) names the condition; CHECKF(cond, fmt, ...) says what went wrong.
 * A test ends with: printf("%d passed, %d failed\n", passed, failed); return failed != 0; */
#ifndef ATTEND_TESTS_CHECK_H
#define ATTEND_TESTS_CHECK_H

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int passed, failed;

/* A file of the checkout, e.g. repo_path("tests/data/tiny-v1.gguf"), found from the test
 * binary's own place (build/tests/, build-san/tests/, build-tsan/tests/: two folders below
 * the checkout's root), so the test runs from any working directory; rel as given when that
 * cannot be read. */
static inline const char *repo_path(const char *rel) {
    static char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return rel;
    buf[n] = 0;
    for (int up = 0; up < 3; up++) {
        char *slash = strrchr(buf, '/');
        if (!slash) return rel;
        *slash = 0;
    }
    size_t len = strlen(buf);
    if (len + 1 + strlen(rel) >= sizeof buf) return rel;
    buf[len] = '/';
    strcpy(buf + len + 1, rel);
    return buf;
}

#define CHECKF(cond, ...)                                          \
    do {                                                           \
        if (cond) {                                                \
            passed++;                                              \
        } else {                                                   \
            failed++;                                              \
            fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, __func__); \
            fprintf(stderr, __VA_ARGS__);                          \
            fputc('\n', stderr);                                   \
        }                                                          \
    } while (0)

#define CHECK(cond) CHECKF(cond, "check failed: %s", #cond)

#endif
