/* attend detect: the language of each TEXT argument or line of standard input (CLD2, through
 * langid.h), as attend serve's POST /detect answers it. No model needed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "langid.h"
#include "line_reader.h"
#include "output.h"

#define DETECT_MAX_LINE ((size_t)1 << 20) /* a line is read up to here; the rest is ignored */
#define DETECT_MAX_AMONG 64

static void detect_help(void) {
    printf("usage: attend detect [--among CODES] [--all] [TEXT...]\n"
           "\n"
           "Print the language of each TEXT argument, or else of each line of standard input:\n"
           "one line each, CODE<TAB>CONFIDENCE (0-100; halved when the text is too short for a\n"
           "reliable answer), a blank line for a blank line, und<TAB>0.0 for text in which no\n"
           "language is found (digits only). Language identification is CLD2's\n"
           "(Debian's libcld2: 80+ languages from character n-grams); invalid UTF-8 and control\n"
           "characters are read as spaces, and only a line's first MiB is read.\n"
           "\n"
           "options:\n"
           "  --among CODES  answer only these codes, comma-separated (ISO 639-1 \"de\", or a\n"
           "                 model's \"de_DE\", \"deu_Latn\"); a text in none of them gets the\n"
           "                 first with confidence 0. attend serve passes its models' languages\n"
           "  --all          every guess (up to 3), best first, tab-separated on the line\n"
           "  -h, --help     this help\n");
}

/* Anything but spaces, tabs and CRs? */
typedef struct {
    const char *among[DETECT_MAX_AMONG];
    int n_among, all;
    char *among_buf;
} detect_options;

static void detect_one(const detect_options *o, const char *text, size_t n) {
    langid_guess g[3];
    const int blank = cli_is_blank(text, n);
    const int k = blank ? 0 : langid_detect(text, n, o->among, o->n_among, g, o->all ? 3 : 1);
    for (int i = 0; i < k; i++) printf("%s%s\t%.1f", i ? "\t" : "", g[i].code, g[i].confidence);
    /* a text CLD2 finds no language in (digits, one phrase repeated) is not a blank line */
    if (k == 0 && !blank) fputs("und\t0.0", stdout);
    putchar('\n');
}

static int detect_stdin(const detect_options *o) {
    line_reader r = {0};
    r.max_line = DETECT_MAX_LINE;
    int status = 0;
    while (!status) {
        char *s;
        size_t n;
        if (line_reader_take(&r, &s, &n)) {
            detect_one(o, s, n);
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
    return status ? status : cli_flush_stdout();
}

/* --among de,en,fr into o->among (pointing into a copy). 0 or EXIT_USAGE. */
static int parse_among(detect_options *o, const char *list) {
    free(o->among_buf);
    o->among_buf = strdup(list);
    o->n_among = 0;
    for (char *save = NULL, *c = strtok_r(o->among_buf, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
        if (o->n_among == DETECT_MAX_AMONG) {
            fprintf(stderr, "attend detect: --among: at most %d codes\n", DETECT_MAX_AMONG);
            return EXIT_USAGE;
        }
        o->among[o->n_among++] = c;
    }
    if (!o->n_among) fprintf(stderr, "attend detect: --among needs language codes, e.g. de,en\n");
    return o->n_among ? 0 : EXIT_USAGE;
}

int cmd_detect(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        detect_help();
        return EXIT_OK;
    }
    detect_options o = {0};
    int ntexts = 0, status = 0; /* the TEXT arguments, gathered in place at argv[1..] */
    for (int i = 1, opts = 1; i < argc && !status; i++) {
        if (opts && !strcmp(argv[i], "--")) opts = 0;
        else if (opts && !strcmp(argv[i], "--all")) o.all = 1;
        else if (opts && !strcmp(argv[i], "--among") && i + 1 < argc) status = parse_among(&o, argv[++i]);
        else if (opts && !strcmp(argv[i], "--among")) status = parse_among(&o, "");
        else if (opts && !strncmp(argv[i], "--among=", 8)) status = parse_among(&o, argv[i] + 8);
        else if (opts && cli_is_option(argv[i])) status = cli_unknown_option("detect", argv[i]);
        else argv[1 + ntexts++] = argv[i];
    }
    if (!status && ntexts == 0) status = detect_stdin(&o);
    for (int i = 1; !status && i <= ntexts; i++) detect_one(&o, argv[i], strlen(argv[i]));
    if (!status && ntexts) status = cli_flush_stdout();
    free(o.among_buf);
    return status;
}
