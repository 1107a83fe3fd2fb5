/* tests/test_bpe.py's way into tokenizer/bpe.c (libattend.so exports only attend_*).
 *
 *   bpe_driver MODEL < requests > answers
 *
 * MODEL: a line "N M", then N lines "KIND HEX" (id i's flag and its token's bytes in hex, "-"
 * for none), then M lines "HEX" (merge r's "left right" in hex). A model that bpe_new refuses:
 * "refused: MESSAGE" on stdout, exit 0.
 * Requests, one per line:
 *   e HEX                 encode the bytes -> "RC ID ID ..." (RC: bpe_encode's return)
 *   d SKIP ID...          bpe_decode -> "HEX" of the text
 *   w SKIP SOP SOT ID...  bpe_whisper_decode -> "HEX"
 *   t HEX                 bpe_strip_timestamps -> "HEX" */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tokenizer/bpe.h"

static int nibble(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

/* hex text -> malloc'd bytes (NUL-terminated), length in *n; "-" -> NULL (no sscanf: it
 * measures the whole string each call, quadratic on a 1 MB line) */
static char *unhex(const char *h, size_t *n) {
    if (h[0] == '-') return NULL;
    size_t len = strspn(h, "0123456789abcdef") / 2;
    char *out = malloc(len + 1);
    for (size_t i = 0; i < len; i++) out[i] = (char)(nibble(h[2 * i]) << 4 | nibble(h[2 * i + 1]));
    out[len] = 0;
    *n = len;
    return out;
}

static void put_hex(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) printf("%02x", (unsigned char)s[i]);
    putchar('\n');
}

static char *read_line(FILE *f) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t got = getline(&line, &cap, f);
    if (got < 0) {
        free(line);
        return NULL;
    }
    line[strcspn(line, "\n")] = 0;
    return line;
}

static bpe_model *load(const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    int n, m;
    if (!f || fscanf(f, "%d %d\n", &n, &m) != 2) exit(2);
    char **tokens = calloc((size_t)n, sizeof *tokens), **merges = calloc((size_t)m + 1, sizeof *merges);
    unsigned char *kind = calloc((size_t)n, 1);
    size_t len;
    for (int i = 0; i < n; i++) {
        char *line = read_line(f), *sp = strchr(line, ' ');
        kind[i] = (unsigned char)atoi(line);
        tokens[i] = unhex(sp + 1, &len);
        free(line);
    }
    for (int r = 0; r < m; r++) {
        char *line = read_line(f);
        merges[r] = unhex(line, &len);
        free(line);
    }
    fclose(f);
    bpe_model *model = bpe_new((const char *const *)tokens, n, (const char *const *)merges, m, kind, err, errlen);
    for (int i = 0; i < n; i++) free(tokens[i]);
    for (int r = 0; r < m; r++) free(merges[r]);
    free(tokens);
    free(merges);
    free(kind);
    return model;
}

/* the ids after the first `skip` numbers of s */
static int *parse_ids(char *s, int skip, int *head, int *n) {
    int cap = 16, *ids = malloc(cap * sizeof *ids), k = 0;
    *n = 0;
    for (char *tok = strtok(s, " "); tok; tok = strtok(NULL, " ")) {
        if (k < skip) {
            head[k++] = atoi(tok);
            continue;
        }
        if (*n == cap) ids = realloc(ids, (size_t)(cap *= 2) * sizeof *ids);
        ids[(*n)++] = atoi(tok);
    }
    return ids;
}

static void answer(const bpe_model *m, char *line) {
    size_t len, out_len = 0;
    if (line[0] == 'e' || line[0] == 't') {
        char *text = unhex(line + 2, &len);
        if (line[0] == 't') {
            put_hex(text, bpe_strip_timestamps(text, len));
        } else {
            int *ids, n, rc = bpe_encode(m, text, len, &ids, &n);
            printf("%d", rc);
            for (int i = 0; i < n; i++) printf(" %d", ids[i]);
            putchar('\n');
            free(ids);
        }
        free(text);
        return;
    }
    int head[3] = {0, -1, -1}, n;
    int *ids = parse_ids(line + 2, line[0] == 'w' ? 3 : 1, head, &n);
    char *text = line[0] == 'w' ? bpe_whisper_decode(m, ids, n, head[0], head[1], head[2], &out_len)
                                : bpe_decode(m, ids, n, head[0], &out_len);
    put_hex(text ? text : "", text ? out_len : 0);
    free(text);
    free(ids);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: bpe_driver MODEL < requests\n");
        return 2;
    }
    char err[256];
    bpe_model *m = load(argv[1], err, sizeof err);
    if (!m) {
        printf("refused: %s\n", err);
        return 0;
    }
    for (char *line; (line = read_line(stdin)); free(line)) {
        answer(m, line);
        fflush(stdout);
    }
    bpe_free(m);
    return 0;
}
