/* cli/http_parse.c: request heads and chunked bodies. Known heads parse to known fields or
 * statuses; a chunked body decodes to the same bytes however its bytes are cut into reads;
 * 20,000 random and mutated inputs never crash and never read past their end (run under
 * the sanitizers by make sanitize). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/http_parse.h"
#include "check.h"

static int parse_status(const char *head, http_head *h) {
    char err[256];
    const size_t end = http_head_end(head, strlen(head));
    CHECK(end > 0);
    return http_head_parse(head, end, h, err, sizeof err);
}

static void test_heads(void) {
    http_head h;
    CHECK(parse_status("POST /translate?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\n", &h) == 0);
    CHECK(!strcmp(h.method, "POST") && !strcmp(h.path, "/translate") && h.content_length == 12 && h.keep_alive);
    CHECK(!strcmp(http_head_get(&h, "host"), "a"));
    http_head_free(&h);
    CHECK(parse_status("GET / HTTP/1.0\n\n", &h) == 0 && !h.keep_alive && h.content_length == -1);
    http_head_free(&h);
    static const struct {
        const char *head;
        int status;
    } bad[] = {
        {"GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
        {"GET / HTTP/2.0\r\n\r\n", 505},
        {"GET / FTP/1.1\r\n\r\n", 400},
        {"GET\r\n\r\n", 400},
        {"G(T / HTTP/1.1\r\n\r\n", 400},
        {"GET noslash HTTP/1.1\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nNo colon\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", 400},
        {"GET / HTTP/1.1\r\nExpect: magic\r\n\r\n", 417},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(parse_status(bad[i].head, &h) == bad[i].status);
        http_head_free(&h);
    }
}

/* body decoded with reads cut every `step` bytes: its length, or -1 / -2. */
static long long decode_in_steps(const char *in, size_t n, size_t step, char **out) {
    http_chunks c = {0};
    size_t len = 0, cap = 0;
    char err[128];
    *out = NULL;
    for (size_t i = 0; i < n && c.state != HTTP_CHUNKS_DONE;) {
        const size_t k = n - i < step ? n - i : step;
        const long long r = http_chunks_feed(&c, in + i, k, out, &len, &cap, 1 << 20, err, sizeof err);
        if (r < 0) return r;
        i += (size_t)r;
        if ((size_t)r < k && c.state != HTTP_CHUNKS_DONE) return -3; /* stopped early without finishing */
    }
    return c.state == HTTP_CHUNKS_DONE ? (long long)len : -4;
}

static void test_chunks(void) {
    const char *in = "5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nTrailer: x\r\n\r\n";
    for (size_t step = 1; step < 80; step++) {
        char *out;
        const long long n = decode_in_steps(in, strlen(in), step, &out);
        CHECK(n == 31 && !memcmp(out, "helloabcdefghijklmnopqrstuvwxyz", 31));
        free(out);
    }
    char *out;
    CHECK(decode_in_steps("3\r\nabcdef\r\n0\r\n\r\n", 17, 4, &out) == -1);
    free(out);
    CHECK(decode_in_steps("zz\r\nab\r\n", 8, 3, &out) == -1);
    free(out);
    CHECK(decode_in_steps("FFFFFFF\r\n", 9, 9, &out) == -4);
    free(out);
    CHECK(decode_in_steps("FFFFFFF\r\nabc", 12, 12, &out) == -4);
    free(out);
}

static void test_random(void) {
    static const char *seeds[] = {"POST /translate HTTP/1.1\r\nContent-Length: 5\r\n\r\n",
                                  "5\r\nhello\r\n0\r\n\r\n"};
    srand(7);
    for (int round = 0; round < 20000; round++) {
        char buf[256];
        size_t n = strlen(seeds[round % 2]);
        memcpy(buf, seeds[round % 2], n);
        for (int k = rand() % 6; k > 0; k--) buf[rand() % n] = (char)(rand() % 256);
        char *copy = malloc(n); /* exactly n bytes: the sanitizers see a read past the end */
        memcpy(copy, buf, n);
        http_head h;
        char err[128];
        const size_t end = http_head_end(copy, n);
        if (end) http_head_parse(copy, end, &h, err, sizeof err), http_head_free(&h);
        char *out;
        decode_in_steps(copy, n, 1 + (size_t)rand() % 7, &out);
        free(out);
        free(copy);
    }
}

int main(void) {
    test_heads();
    test_chunks();
    test_random();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
