/* The C tests' assertions: count passes and failures, report each failure with its place,
 * keep going. CHECK(cond) names the condition; CHECKF(cond, fmt, ...) says what went wrong.
 * A test ends with: printf("%d passed, %d failed\n", passed, failed); return failed != 0; */
#ifndef ATTEND_TESTS_CHECK_H
#define ATTEND_TESTS_CHECK_H

#include <stdio.h>

static int passed, failed;

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
