/* attend detect: the language of each line of standard input (cli/langid.h, libcld2). No
 * model needed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "langid.h"
#include "line_reader.h"
#include "output.h"

#define DETECT_MAX_AMONG 256

static void detect_help(void) {
    printf("usage: attend detect [--among CODES]\n"
           "\n"
           "Print the language of each line of standard input, one line out per line in:\n"
           "CODE<TAB>CONFIDENCE, the ISO 639-1 code and a confidence from 0 to 100 (a blank\n"
           "line gives a blank line; text with no letters gives \"und<TAB>0\"). The identifier\n"
           "is libcld2; very short lines (a word or two) are often guessed wrong.\n"
           "\n"
           "options:\n"
           "  --among CODES  only these languages, comma-separated: de,en or a model's own\n"
           "                 codes (de_DE, deu_Latn), printed as given. The best of them is\n"
           "                 always printed, with a low confidence when the text says little\n"
           "  -h, --help     this help\n"
           "\n"
           "More: docs/cli.md (attend detect).\n");
}

static void detect_one(const char *s, size_t n, const char *const *among, int n_among) {
    if (cli_is_blank(s, n)) {
        putchar('\n');
        return;
    }
    langid_guess g[LANGID_MAX_GUESSES];
    if (langid_detect(s, n, among, n_among, g) == 0) printf("und\t0\n");
    else printf("%s\t%.0f\n", g[0].code, g[0].confidence);
}

static int detect_stdin(const char *const *among, int n_among) {
    line_reader r = {0};
    r.max_line = LANGID_MAX_BYTES; /* the identifier reads no further */
    int status = 0;
    while (!status) {
        char *s;
        size_t n;
        if (line_reader_take(&r, &s, &n)) {
            detect_one(s, n, among, n_among);
            continue;
        }
        if (r.eof) break;
        if (!line_reader_waiting(&r) && (status = cli_flush_stdout()) != 0) break;
        if (line_reader_fill(&r) < 0) {
            fprintf(stderr, "attend detect: reading input: %s\n", strerror(errno));
            status = EXIT_IO;
        }
    }
    free(r.buf);
    return status;
}

/* "de,en" into among[] (pointing into list, whose commas become NULs); the count, or -1. */
static int split_among(char *list, const char **among) {
    int n = 0;
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        if (n == DETECT_MAX_AMONG) return -1;
        among[n++] = tok;
    }
    return n;
}

int cmd_detect(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        detect_help();
        return EXIT_OK;
    }
    char *list = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--among") && i + 1 < argc) list = argv[++i];
        else if (!strncmp(argv[i], "--among=", 8)) list = argv[i] + 8;
        else return cli_unknown_option("detect", argv[i]);
    }
    const char *among[DETECT_MAX_AMONG];
    const int n_among = list ? split_among(list, among) : 0;
    if (n_among < 0 || (list && n_among == 0)) {
        fprintf(stderr, "attend detect: --among needs 1 to %d comma-separated codes\n", DETECT_MAX_AMONG);
        return EXIT_USAGE;
    }
    return detect_stdin(n_among ? among : NULL, n_among);
}
