/* attend translate --format html and --document: HTML in, HTML out, through
 * attend_translate_html (tags placed by the word alignments; docs/markup.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "output.h"
#include "translate.h"

/* The largest --document read: a page is far smaller; a bigger file is refused, not cut. */
#define MAX_DOCUMENT (256 << 20)

int translate_html_lines(attend_model *m, const attend_params *p, char **lines, const size_t *lens, int n,
                         long long first_line) {
    const char **todo = malloc(sizeof(char *) * (size_t)(n + 1));
    size_t *todo_len = malloc(sizeof(size_t) * (size_t)(n + 1));
    char **out = calloc((size_t)n + 1, sizeof(char *));
    int *cut = calloc((size_t)n + 1, sizeof(int)), k = 0, status = 0;
    char err[512];
    if (!todo || !todo_len || !out || !cut) {
        fprintf(stderr, "attend: out of memory\n");
        status = EXIT_FAIL;
    }
    for (int i = 0; !status && i < n; i++)
        if (!cli_is_blank(lines[i], lens[i])) {
            if (lens[i] > SPLIT_MAX_LINE)
                fprintf(stderr, "attend: line %lld: longer than %d bytes; translated its first %d\n",
                        first_line + i + 1, SPLIT_MAX_LINE, SPLIT_MAX_LINE);
            todo[k] = lines[i], todo_len[k++] = lens[i] > SPLIT_MAX_LINE ? SPLIT_MAX_LINE : lens[i];
        }
    if (!status && k && attend_translate_html(m, todo, todo_len, k, 0, p, out, cut, err, sizeof err)) {
        fprintf(stderr, "attend: lines %lld-%lld: %s\n", first_line + 1, first_line + n, err);
        status = EXIT_FAIL;
    }
    for (int i = 0, j = 0; !status && i < n; i++) {
        const int blank = cli_is_blank(lines[i], lens[i]);
        if (!blank && cut[j]) fprintf(stderr, "attend: line %lld: a sentence was cut to the model's length\n",
                                      first_line + i + 1);
        if (!blank) cli_one_line(out[j]);
        fputs(blank ? "" : out[j++], stdout);
        fputc('\n', stdout);
    }
    for (int j = 0; out && j < k; j++) free(out[j]);
    free(todo), free(todo_len), free(out), free(cut);
    return status ? status : cli_flush_stdout();
}

/* The whole of path ("-": standard input) into *buf (malloc'd), *len. 0 or an exit status. */
static int read_all(const char *path, char **buf, size_t *len) {
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) {
        fprintf(stderr, "attend: --document %s: %s\n", path, strerror(errno));
        return EXIT_IO;
    }
    size_t cap = 1 << 16, n = 0, got;
    char *b = malloc(cap);
    while (b && (got = fread(b + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap && cap < MAX_DOCUMENT + 1) {
            char *c = realloc(b, cap * 2);
            if (!c) free(b);
            b = c, cap *= 2;
        } else if (n == cap) {
            break;
        }
    }
    const int bad = ferror(f), big = n > MAX_DOCUMENT;
    if (f != stdin) fclose(f);
    if (!b || bad || big) {
        fprintf(stderr, "attend: --document %s: %s\n", path,
                !b ? "out of memory" : bad ? "read error" : "larger than 256 MiB");
        free(b);
        return !b ? EXIT_FAIL : EXIT_IO;
    }
    *buf = b, *len = n;
    return 0;
}

int translate_html_document(attend_model *m, const attend_params *p, const char *path) {
    char *doc = NULL, *out = NULL, err[512];
    size_t len = 0;
    int cut = 0, status = read_all(path, &doc, &len);
    const char *docs[1] = {doc};
    if (!status && attend_translate_html(m, docs, &len, 1, 1, p, &out, &cut, err, sizeof err)) {
        fprintf(stderr, "attend: --document %s: %s\n", path, err);
        status = EXIT_FAIL;
    }
    if (!status && cut) fprintf(stderr, "attend: --document %s: a sentence was cut to the model's length\n", path);
    if (!status) fputs(out, stdout);
    free(doc);
    free(out);
    return status ? status : cli_flush_stdout();
}
