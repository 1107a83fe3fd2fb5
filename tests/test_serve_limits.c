/* attend serve's gate and form parser, without a server: the token bucket on a clock the test
 * moves (a burst of N, then one per 60/N s, Retry-After exact, no burst of 2N across a
 * minute), the bounded table, the keys file's errors, the character count, and the multipart
 * parser on valid, cut and hostile bodies. The sources are included for their static parts. */
#include "../cli/serve_limits.c"
#include "../cli/serve_multipart.c"

#include <stdlib.h>
#include <unistd.h>

#include "check.h"

double serve_now(void) { return 0; } /* the gate's clock: the bucket tests pass their own */

/* ---------------------------------------------------------------------------------------
 * Token buckets */

static void test_bucket(void) {
    char err[256];
    serve_limits *l = serve_limits_new(NULL, 3, 0, 0, err, sizeof err);
    int retry = -1;
    for (int i = 0; i < 3; i++) CHECKF(!serve_limits_take(l, "x", 3, 100.0, &retry), "burst request %d", i);
    CHECK(serve_limits_take(l, "x", 3, 100.0, &retry) == -1 && retry == 20);
    CHECK(serve_limits_take(l, "x", 3, 110.5, &retry) == -1 && retry == 10); /* 9.5 s: rounded up */
    CHECK(serve_limits_take(l, "y", 3, 110.5, &retry) == 0);                 /* another address: its own */
    CHECK(serve_limits_take(l, "x", 3, 119.99, &retry) == -1 && retry == 1);
    CHECK(serve_limits_take(l, "x", 3, 120.0, &retry) == 0);
    CHECK(serve_limits_take(l, "x", 3, 120.0, &retry) == -1);
    /* hammering every 0.1 s for ten minutes: 3 at once, then one per 20 s, never 2N in a minute */
    serve_limits *h = serve_limits_new(NULL, 0, 0, 0, err, sizeof err);
    int allowed[6000] = {0}, total = 0;
    for (int t = 0; t < 6000; t++) total += allowed[t] = !serve_limits_take(h, "z", 3, t / 10.0, &retry);
    CHECKF(total == 3 + 599 / 20, "%d allowed in ten minutes", total);
    int most = 0;
    for (int t = 0; t + 600 <= 6000; t++) {
        int n = 0;
        for (int k = t; k < t + 600; k++) n += allowed[k];
        if (n > most) most = n;
    }
    CHECKF(most <= 2 * 3 - 1, "%d allowed in one minute", most); /* a bucket's most: N, then N-1 refilled */
    CHECK(serve_limits_take(h, "z", 0, 0, &retry) == 0 && retry == 0); /* no limit */
    serve_limits_free(h);
    serve_limits_free(l);
}

/* The table holds at most cap subjects; a flood drops the oldest, never grows it. */
static void test_table_bound(void) {
    char err[256], subject[32];
    serve_limits *l = serve_limits_new(NULL, 1, 0, 4, err, sizeof err);
    int retry;
    CHECK(serve_limits_take(l, "victim", 1, 0.0, &retry) == 0);
    CHECK(serve_limits_take(l, "victim", 1, 0.5, &retry) == -1);
    for (int i = 0; i < 1000; i++) {
        snprintf(subject, sizeof subject, "10.0.%d.%d", i / 256, i % 256);
        serve_limits_take(l, subject, 1, 1.0 + i * 0.001, &retry);
    }
    CHECKF(serve_limits_subjects(l) == 4, "%d subjects", serve_limits_subjects(l));
    CHECK(serve_limits_take(l, "10.0.3.231", 1, 2.0, &retry) == -1); /* the newest is still held */
    serve_limits_free(l);
}

/* ---------------------------------------------------------------------------------------
 * The keys file and the check */

static serve_limits *limits_from(const char *text, int req_limit, int char_limit, char *err, size_t errlen) {
    char path[] = "/tmp/attend-keys-XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) return NULL;
    const ssize_t n = write(fd, text, strlen(text));
    close(fd);
    serve_limits *l = n == (ssize_t)strlen(text) ? serve_limits_new(path, req_limit, char_limit, 0, err, errlen) : NULL;
    unlink(path);
    return l;
}

static void test_keys_file(void) {
    char err[512] = "";
    serve_limits *l = limits_from("# keys\n\nalpha\nbeta 2   # two a minute\n  gamma\t5\r\n", 0, 0, err, sizeof err);
    CHECKF(l && l->n_keys == 3, "%s", err);
    if (l) CHECK(!strcmp(l->keys[2].key, "gamma") && l->keys[2].per_minute == 5 && l->keys[0].per_minute == 0);
    serve_limits_free(l);
    static const char *const bad[][2] = {
        {"alpha\nbeta 0\n", ":2:"}, {"alpha\nbeta x\n", ":2:"}, {"a 1 2\n", ":1:"},
        {"a\n\na\n", ":3: the key is given twice"},
        {"# nothing\n", "no key"}, {"k -5\n", ":1:"}, {"k 99999999999999999999\n", ":1:"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        serve_limits *b = limits_from(bad[i][0], 0, 0, err, sizeof err);
        CHECKF(!b && strstr(err, bad[i][1]), "file %zu: %s", i, err);
        serve_limits_free(b);
    }
    CHECK(!serve_limits_new("/nonexistent/keys", 0, 0, 0, err, sizeof err) && strstr(err, "/nonexistent/keys"));
}

static int check(serve_limits *l, const char *client, const char *body, int *retry, char *err) {
    return serve_limits_check(l, client, body, strlen(body), retry, err, 256);
}

static void test_check(void) {
    char err[256];
    int retry;
    serve_limits *l = limits_from("open\nslow 1\n", 2, 5, err, sizeof err);
    CHECK(check(l, "1.1.1.1", "{\"q\":\"a\"}", &retry, err) == 403);
    CHECK(check(l, "1.1.1.1", "{\"q\":\"a\",\"api_key\":\"wrong\"}", &retry, err) == 403);
    CHECK(check(l, "1.1.1.1", "{\"q\":\"a\",\"api_key\":\"\"}", &retry, err) == 403);
    CHECK(check(l, "1.1.1.1", "{\"q\":\"a\",\"api_key\":7}", &retry, err) == 403);
    CHECK(check(l, "1.1.1.1", "not json", &retry, err) == 400);
    CHECK(check(l, "1.1.1.1", "{\"q\":\"äöüßé\",\"api_key\":\"open\"}", &retry, err) == 0); /* 5 chars, 10 bytes */
    CHECK(check(l, "2.2.2.2", "{\"q\":[\"abc\",\"déf\"],\"api_key\":\"open\"}", &retry, err) == 400 &&
          strstr(err, "(6)") && strstr(err, "(5)"));
    CHECK(check(l, "1.1.1.1", "{\"q\":\"a\",\"api_key\":\"open\"}", &retry, err) == 0);
    CHECK(check(l, "1.1.1.1", "{\"q\":\"a\",\"api_key\":\"open\"}", &retry, err) == 429 && retry == 30);
    CHECK(check(l, "1.1.1.1", "{\"q\":\"a\",\"api_key\":\"slow\"}", &retry, err) == 0); /* its own bucket */
    CHECK(check(l, "3.3.3.3", "{\"q\":\"a\",\"api_key\":\"slow\"}", &retry, err) == 429 && retry == 60);
    serve_limits_free(l);
    serve_limits *none = serve_limits_new(NULL, 0, 0, 0, err, sizeof err);
    for (int i = 0; i < 100; i++) CHECK(check(none, "1.1.1.1", "anything", &retry, err) == 0);
    serve_limits_free(none);
}

/* Eight threads on one table: a key's bucket of 1000 gives exactly 1000 of 4000, however the
 * takes interleave, while the threads' addresses churn the small table (never dropping the
 * key's bucket, which lives with the key). */
typedef struct {
    serve_limits *l;
    int id, allowed;
} taker;

static void *take_many(void *arg) {
    taker *t = arg;
    char client[32], err[256];
    int retry;
    for (int i = 0; i < 500; i++) {
        snprintf(client, sizeof client, "10.%d.%d.%d", t->id, i / 256, i % 256);
        t->allowed += !check(t->l, client, "{\"q\":\"a\",\"api_key\":\"shared\"}", &retry, err);
        serve_limits_take(t->l, client, 1, 5.0 + i, &retry);
    }
    return NULL;
}

static void test_threads(void) {
    char err[256];
    serve_limits *l = limits_from("shared 1000\n", 0, 0, err, sizeof err);
    l->cap = 16; /* the table is made with SERVE_LIMIT_SUBJECTS slots: use 16 of them */
    pthread_t th[8];
    taker t[8];
    for (int i = 0; i < 8; i++) t[i] = (taker){l, i, 0}, pthread_create(&th[i], NULL, take_many, &t[i]);
    int total = 0;
    for (int i = 0; i < 8; i++) pthread_join(th[i], NULL), total += t[i].allowed;
    CHECKF(total == 1000, "%d of 4000 allowed", total);
    CHECK(serve_limits_subjects(l) == 16);
    serve_limits_free(l);
}

/* ---------------------------------------------------------------------------------------
 * Multipart */

#define TYPE "multipart/form-data; boundary=XyZ"
#define FORM                                                                            \
    "preamble\r\n--XyZ\r\nContent-Disposition: form-data; name=\"source\"\r\n\r\nde\r\n" \
    "--XyZ\r\ncontent-disposition: form-data; name=\"file\"; filename=\"a b.txt\"\r\n"    \
    "Content-Type: text/plain\r\n\r\nHallo\r\nWelt\r\n\r\n--XyZ--\r\n"

static void test_multipart(void) {
    serve_part p[SERVE_FORM_PARTS];
    char err[256];
    const size_t len = strlen(FORM);
    CHECK(serve_multipart_parse(TYPE, FORM, len, p, SERVE_FORM_PARTS, err, sizeof err) == 2);
    CHECK(p[0].name_len == 6 && !memcmp(p[0].name, "source", 6) && !p[0].filename && p[0].len == 2);
    CHECK(p[1].filename_len == 7 && !memcmp(p[1].filename, "a b.txt", 7));
    CHECK(p[1].len == 13 && !memcmp(p[1].data, "Hallo\r\nWelt\r\n", 13));
    CHECK(serve_multipart_parse("multipart/form-data; boundary=\"XyZ\"", FORM, len, p, 16, err, sizeof err) == 2);
    /* every cut of the body short of its closing delimiter is refused */
    int cut_ok = 1;
    for (size_t n = 0; n < len - 4; n++) {
        char *copy = malloc(n ? n : 1); /* exactly n bytes: ASan catches a read past them */
        memcpy(copy, FORM, n);
        if (serve_multipart_parse(TYPE, copy, n, p, 16, err, sizeof err) != -1) cut_ok = 0;
        free(copy);
    }
    CHECK(cut_ok);
    static const char *const types[] = {NULL, "", "multipart/form-data", "multipart/form-data; boundary=",
                                        "multipart/form-data; boundary=\"XyZ", "text/plain; boundary=XyZ",
                                        "multipart/form-data; boundary=0123456789012345678901234567890123456789"
                                        "0123456789012345678901234567890123456789"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        CHECKF(serve_multipart_parse(types[i], FORM, len, p, 16, err, sizeof err) == -1, "type %zu", i);
    CHECK(serve_multipart_parse(TYPE, FORM, len, p, 1, err, sizeof err) == -1 && strstr(err, "more than 1"));
    /* headers past the bound */
    const size_t big = SERVE_PART_HEADERS * 2;
    char *huge = malloc(big + 64);
    int n = sprintf(huge, "--XyZ\r\nX-A: ");
    memset(huge + n, 'a', big);
    memcpy(huge + n + big, "\r\n\r\nx\r\n--XyZ--", 14);
    CHECK(serve_multipart_parse(TYPE, huge, n + big + 14, p, 16, err, sizeof err) == -1 && strstr(err, "longer"));
    free(huge);
    static const char *const hostile[] = {
        "--XyZ--",
        "--XyZ\r\n\r\n\r\n--XyZ--",
        "--XyZ\r\nContent-Disposition: attachment; name=\"a\"\r\n\r\nx\r\n--XyZ--",
        "--XyZ\r\nContent-Disposition: form-data; name=\"a\r\n\r\nx\r\n--XyZ--",
        "--XyZ\r\nContent-Disposition: form-data\r\n\r\nx\r\n--XyZ--",
        "--XyZ\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nx\r\n--XyZjunk",
    };
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++)
        CHECKF(serve_multipart_parse(TYPE, hostile[i], strlen(hostile[i]), p, 16, err, sizeof err) == -1, "body %zu",
               i);
    /* random bytes around the delimiter: never a crash, never a part outside the body */
    srand(7);
    char buf[256];
    int inside = 1;
    for (int round = 0; round < 20000; round++) {
        const size_t m = (size_t)(rand() % 256);
        for (size_t k = 0; k < m; k++) buf[k] = "-XyZ\r\n\"=; form-datanamefile:Content-Disposition"[rand() % 47];
        const int np = serve_multipart_parse(TYPE, buf, m, p, 16, err, sizeof err);
        for (int k = 0; k < np; k++) inside &= p[k].data >= buf && p[k].data + p[k].len <= buf + m;
    }
    CHECK(inside);
}

int main(void) {
    test_bucket();
    test_table_bound();
    test_keys_file();
    test_check();
    test_threads();
    test_multipart();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
