/* attend split: text into sentences, one per line, as attend translate splits its input
 * (text/sentences.h). No model needed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/attend.h"
#include "cli.h"
#include "line_reader.h"

/* Longer lines are cut here (with a warning): the reader holds a whole line in memory. */
#define SPLIT_MAX_LINE ((size_t)16 << 20)

static void split_help(void) {
    printf("usage: attend split [--lang L] [TEXT...]\n"
           "\n"
           "Split each TEXT argument, or else each line of standard input, into sentences:\n"
           "one sentence per line, then an empty line after each input line's sentences (a\n"
           "blank line gives the empty line alone). Inside a sentence, NUL, CR and newline bytes\n"
           "are written as spaces. Lines longer than 16 MiB are cut there, with a warning.\n"
           "\n"
           "options:\n"
           "  --lang L     the text's language: de, en, de_DE, deu_Latn... (its leading letters\n"
           "               count); others use generic rules. Default: unknown, which applies\n"
           "               every language's rules together\n"
           "  -h, --help   this help\n"
           "\n"
           "The rules: docs/splitting.md.\n");
}

/* One sentence on one line: the bytes that would break the line become spaces. */
static void write_sentence(const char *s, size_t n) {
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != 0 && s[i] != '\r' && s[i] != '\n') continue;
        fwrite(s + from, 1, i - from, stdout);
        putchar(' ');
        from = i + 1;
    }
    fwrite(s + from, 1, n - from, stdout);
    putchar('\n');
}

/* text[0..n) as sentences and the empty line after them; 0 or EXIT_FAIL (out of memory). */
static int split_one(const char *text, size_t n, const char *lang) {
    attend_span *spans;
    char err[256];
    int k = attend_split_sentences(text, n, lang, &spans, err, sizeof err);
    if (k < 0) {
        fprintf(stderr, "attend split: %s\n", err);
        return EXIT_FAIL;
    }
    for (int i = 0; i < k; i++) write_sentence(text + spans[i].begin, spans[i].end - spans[i].begin);
    putchar('\n');
    free(spans);
    return 0;
}

/* Standard input, line by line, each line's sentences written before the next is read. */
static int split_stdin(const char *lang) {
    line_reader r = {0};
    r.max_line = SPLIT_MAX_LINE + 1; /* one byte more, to see that a line was cut */
    int status = 0;
    long line_no = 0;
    while (!status) {
        char *s;
        size_t n;
        if (line_reader_take(&r, &s, &n)) {
            line_no++;
            if (n > SPLIT_MAX_LINE) {
                fprintf(stderr, "attend split: line %ld is longer than 16 MiB: the rest is dropped\n", line_no);
                n = SPLIT_MAX_LINE;
            }
            status = split_one(s, n, lang);
            continue;
        }
        if (r.eof) break;
        /* nothing more here yet: show what is done before waiting (one line in, its
         * sentences out, for interactive use) */
        if (!line_reader_waiting(&r) && (status = cli_flush_stdout()) != 0) break;
        if (line_reader_fill(&r) < 0) {
            fprintf(stderr, "attend split: reading input: %s\n", strerror(errno));
            status = EXIT_IO;
        }
    }
    free(r.buf);
    return status;
}

int cmd_split(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        split_help();
        return EXIT_OK;
    }
    const char *lang = NULL;
    int ntexts = 0; /* the TEXT arguments, gathered in place at argv[1..] */
    for (int i = 1, opts = 1; i < argc; i++) {
        if (opts && !strcmp(argv[i], "--")) {
            opts = 0;
        } else if (opts && !strcmp(argv[i], "--lang")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "attend split: --lang needs a language code (see --help)\n");
                return EXIT_USAGE;
            }
            lang = argv[++i];
        } else if (opts && !strncmp(argv[i], "--lang=", 7)) {
            lang = argv[i] + 7;
        } else if (opts && cli_is_option(argv[i])) {
            return cli_unknown_option("split", argv[i]);
        } else {
            argv[1 + ntexts++] = argv[i];
        }
    }
    if (ntexts == 0) return split_stdin(lang);
    int status = 0;
    for (int i = 1; i <= ntexts && !status; i++) status = split_one(argv[i], strlen(argv[i]), lang);
    return status;
}
