/* attend align: translate (or force-decode a given translation of) one sentence and show
 * where the model looked: a heatmap of a cross-attention view, the hard word alignment,
 * and per-token log-probabilities; optionally as SVG, JSON or a full .npz dump. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "../model/align.h"
#include "cli.h"
#include "heatmap.h"
#include "json.h"
#include "output.h"

static void usage_align(FILE *f) {
    fprintf(f,
            "usage: attend align [-m MODEL.gguf] [options] \"source sentence\"\n"
            "\n"
            "Translate one sentence (read from standard input when not given) and draw where\n"
            "the decoder looked: target pieces as rows, source pieces as columns, then the hard\n"
            "word alignment in Pharaoh format (source-target, 0-based word indices).\n"
            "\n"
            "options:\n"
            "  -m, --model FILE        checkpoint (default: $ATTEND_MODEL, else models/de-en.gguf)\n"
            "      --target TEXT       force-decode this translation instead of translating;\n"
            "                          reports its log-probability per token\n"
            "      --src-lang L        multilingual models (M2M-100, NLLB, mBART): the source\n"
            "                          language\n"
            "      --tgt-lang L        multilingual models: the target language\n"
            "      --beam N            translate with N beams (default: the model's setting,\n"
            "                          as attend translate); the view shows the output's own path\n"
            "      --greedy            the same as --beam 1\n"
            "      --preset VIEW       attention view (default %s):\n"
            "                            last:0          head 0 of the last decoder layer\n"
            "                                            (Marian / CTranslate2 alignment head)\n"
            "                            penultimate:avg heads of the second-to-last layer\n"
            "                                            averaged (Garg et al. 2019)\n"
            "                            L:avg,shift     layer L averaged, read one step later\n"
            "                                            (Chen et al. 2020, shift-att)\n"
            "                            all:avg         every layer and head averaged\n"
            "                            L:H[,L:H...]    explicit heads, averaged\n"
            "      --layer L           decoder layer (0-based; with --head, or all its heads)\n"
            "      --head H            head (0-based; of the last layer without --layer)\n"
            "      --words             merge pieces into words (rows: mean of a word's pieces,\n"
            "                          columns: sum of a word's pieces)\n"
            "      --all-heads         every head of the layer side by side (small multiples)\n"
            "      --svg FILE          write the heatmap as a standalone SVG (instead of\n"
            "                          drawing it on the terminal)\n"
            "      --format FMT        text (default) or json (pieces, log-probs, matrices,\n"
            "                          alignment)\n"
            "      --dump-attention F  write every attention matrix to the .npz F, laid out as\n"
            "                          'attend translate --dump-attention' (sentence s0)\n"
            "      --color WHEN        auto (default: on a terminal without NO_COLOR), always,\n"
            "                          never; off also means plain ASCII shading\n"
            "      --width N           columns to fit the heatmap in (default: the terminal's,\n"
            "                          else 80)\n"
            "  -t, --threads N         threads (default: physical cores, or\n"
            "                          $OMP_NUM_THREADS)\n"
            "  -h, --help              this help\n",
            ATTEND_DEFAULT_VIEW);
}

/* ---------------------------------------------------------------------------------------
 * JSON */

static void json_floats(FILE *f, const float *x, int n) {
    fputc('[', f);
    for (int i = 0; i < n; i++) fprintf(f, "%s%.7g", i ? ", " : "", (double)x[i]);
    fputc(']', f);
}

static void json_matrix(FILE *f, const float *m, int rows, int cols, const char *indent) {
    fputc('[', f);
    for (int r = 0; r < rows; r++) {
        fprintf(f, "%s\n%s  ", r ? "," : "", indent);
        json_floats(f, m + (size_t)r * cols, cols);
    }
    fprintf(f, "\n%s]", indent);
}

/* ---------------------------------------------------------------------------------------
 * align */

static int terminal_width(void) {
    struct winsize ws;
    if (isatty(1) && ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) return ws.ws_col;
    const char *cols = getenv("COLUMNS");
    if (cols && atoi(cols) >= 20) return atoi(cols);
    return 80;
}

/* Read one line of standard input into a malloc'd string without its newline. */
static char *read_stdin_line(void) {
    size_t cap = 0;
    char *line = NULL;
    ssize_t n = getline(&line, &cap, stdin);
    if (n < 0) {
        free(line);
        return NULL;
    }
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
    return line;
}

/* "label" padded to 13 columns, then text wrapped at spaces to fit width. */
static void print_wrapped(const char *label, const char *text, int width) {
    int col = printf("%-12s", label);
    while (*text) {
        const char *e = strchr(text, ' ');
        int len = e ? (int)(e - text) : (int)strlen(text);
        char word[4096];
        snprintf(word, sizeof word, "%.*s", len < 4000 ? len : 4000, text);
        int w = heatmap_text_width(word);
        if (col + 1 + w > width && col > 12) col = printf("\n%12s", "");
        col += printf(" %s", word) - (int)strlen(word) + w;
        text += len;
        while (*text == ' ') text++;
    }
    printf("\n");
}

typedef struct {
    const char *model, *target, *preset, *svg, *dump, *src_lang, *tgt_lang;
    int layer, head, words, all_heads, json, color, width, threads, beams;
    int has_layer, has_head;
} align_args;

int cmd_align(int argc, char **argv) {
    align_args a = {0};
    a.color = -1;
    const char *source = NULL;
    if (cli_wants_help(argc, argv)) {
        usage_align(stdout);
        return EXIT_OK;
    }
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE CLI_NEED_VALUE("align", o, v, i)
        if (!strcmp(o, "-m") || !strcmp(o, "--model")) {
            NEED_VALUE a.model = v;
        } else if (!strcmp(o, "--target")) {
            NEED_VALUE a.target = v;
        } else if (!strcmp(o, "--src-lang")) {
            NEED_VALUE a.src_lang = v;
        } else if (!strcmp(o, "--tgt-lang")) {
            NEED_VALUE a.tgt_lang = v;
        } else if (!strcmp(o, "--beam")) {
            NEED_VALUE a.beams = cli_parse_int(o, v, 1, 1024);
        } else if (!strcmp(o, "--greedy")) {
            a.beams = 1;
        } else if (!strcmp(o, "--preset")) {
            NEED_VALUE a.preset = v;
        } else if (!strcmp(o, "--layer")) {
            NEED_VALUE a.layer = cli_parse_int(o, v, 0, 1000);
            a.has_layer = 1;
        } else if (!strcmp(o, "--head")) {
            NEED_VALUE a.head = cli_parse_int(o, v, 0, 1000);
            a.has_head = 1;
        } else if (!strcmp(o, "--words")) {
            a.words = 1;
        } else if (!strcmp(o, "--all-heads")) {
            a.all_heads = 1;
        } else if (!strcmp(o, "--svg")) {
            NEED_VALUE a.svg = v;
        } else if (!strcmp(o, "--dump-attention")) {
            NEED_VALUE a.dump = v;
        } else if (!strcmp(o, "--format")) {
            NEED_VALUE if (!strcmp(v, "json")) a.json = 1;
            else if (strcmp(v, "text")) {
                fprintf(stderr, "attend align: --format is text or json, not '%s'\n", v);
                return EXIT_USAGE;
            }
        } else if (!strcmp(o, "--color")) {
            NEED_VALUE if (!strcmp(v, "always")) a.color = 1;
            else if (!strcmp(v, "never")) a.color = 0;
            else if (strcmp(v, "auto")) {
                fprintf(stderr, "attend align: --color is auto, always or never, not '%s'\n", v);
                return EXIT_USAGE;
            }
        } else if (!strcmp(o, "--width")) {
            NEED_VALUE a.width = cli_parse_int(o, v, 20, 10000);
        } else if (!strcmp(o, "-t") || !strcmp(o, "--threads")) {
            NEED_VALUE a.threads = cli_parse_int(o, v, 1, 1024);
        } else if (!strcmp(o, "--")) {
            if (i + 1 < argc) source = argv[++i];
            if (i + 1 < argc) goto extra;
            break;
        } else if (cli_is_option(o)) {
            return cli_unknown_option("align", o);
        } else if (!source) {
            source = o;
        } else {
        extra:
            fprintf(stderr, "attend align: one source sentence at a time (quote it); "
                            "for many lines use attend translate --alignment\n");
            return EXIT_USAGE;
        }
    }
#undef NEED_VALUE
    if (a.preset && (a.has_layer || a.has_head)) {
        fprintf(stderr, "attend align: use --preset or --layer/--head, not both\n");
        return EXIT_USAGE;
    }
    attend_view view;
    char err[512];
    if (a.preset) {
        if (attend_view_parse(a.preset, &view, err, sizeof err)) {
            fprintf(stderr, "attend align: --preset: %s\n", err);
            return EXIT_USAGE;
        }
    } else if (a.has_layer || a.has_head) {
        view = attend_view_single(a.has_layer ? a.layer : ATTEND_LAYER_LAST,
                                  a.has_head ? a.head : ATTEND_HEAD_AVG);
    } else {
        attend_view_parse(ATTEND_DEFAULT_VIEW, &view, err, sizeof err);
    }
    char *owned = NULL;
    if (!source) {
        source = owned = read_stdin_line();
        if (!source) {
            fprintf(stderr, "attend align: no source sentence (give one, or a line on stdin)\n");
            return EXIT_USAGE;
        }
    }

    attend_model *m = cli_load_model(a.model);
    const attend_config *c = attend_get_config(m);
    if (attend_view_check(&view, c->decoder_layers, c->decoder_heads, err, sizeof err)) {
        fprintf(stderr, "attend align: %s\n", err);
        attend_free(m);
        free(owned);
        return EXIT_USAGE;
    }
    if (cli_check_languages("align", m, a.src_lang, a.tgt_lang, 1)) {
        attend_free(m);
        free(owned);
        return EXIT_USAGE;
    }
    attend_params p = attend_default_params();
    p.threads = a.threads;
    p.num_beams = a.beams;
    p.want_attention = p.want_scores = 1;
    p.src_lang = a.src_lang;
    p.tgt_lang = a.tgt_lang;
    attend_result r;
    const char *targets[1] = {a.target};
    int status = EXIT_OK;
    if (attend_translate(m, &source, NULL, 1, a.target ? targets : NULL, &p, &r, err, sizeof err)) {
        fprintf(stderr, "attend align: %s\n", err);
        attend_free(m);
        free(owned);
        return EXIT_FAIL;
    }
    if (r.status) {
        fprintf(stderr, "attend align: %s\n", r.message);
        attend_result_free(&r);
        attend_free(m);
        free(owned);
        return EXIT_FAIL;
    }
    const int T = r.n_tgt, S = r.n_src, Ld = c->decoder_layers, Hd = c->decoder_heads;
    char vname[256];
    attend_view_name(&view, vname, sizeof vname);

    /* the chosen view, piece level, and its hard alignment */
    float *A = malloc(sizeof(float) * ((size_t)T * S + 1));
    int *best = malloc(sizeof(int) * ((size_t)T + 1)), *links = malloc(sizeof(int) * (2 * (size_t)T + 1));
    attend_words sw = {0}, tw = {0};
    if (!A || !best || !links || attend_words_from_pieces((const char *const *)r.src_pieces, S, &sw) ||
        attend_words_from_pieces((const char *const *)r.tgt_pieces, T, &tw)) {
        fprintf(stderr, "attend align: out of memory\n");
        exit(EXIT_FAIL);
    }
    if (attend_view_reduce(&view, r.cross, Ld, Hd, T, S, A, err, sizeof err)) {
        fprintf(stderr, "attend align: %s\n", err);
        status = EXIT_USAGE;
        goto done;
    }
    attend_align_argmax(A, T, S, &sw, &tw, best);
    int nl = attend_align_links(best, T, &sw, &tw, links);
    char *pharaoh = attend_pharaoh(links, nl);

    /* what is drawn: pieces, or words (then the rows and columns are words) */
    int rows = a.words ? tw.n_words : T, cols = a.words ? sw.n_words : S;
    const char *const *rl = a.words ? (const char *const *)tw.words : (const char *const *)r.tgt_pieces;
    const char *const *cl = a.words ? (const char *const *)sw.words : (const char *const *)r.src_pieces;
    float *shown = A;
    if (a.words) {
        shown = malloc(sizeof(float) * ((size_t)rows * cols + 1));
        attend_words_matrix(A, T, S, &sw, &tw, shown);
    }
    /* small multiples: every head of one layer */
    int hl = a.has_layer ? a.layer : Ld - 1;
    if (!a.has_layer && attend_resolve_layer(view.layer[0], Ld) >= 0)
        hl = attend_resolve_layer(view.layer[0], Ld);
    float *heads = NULL;
    heatmap_panel *panels = NULL;
    char (*titles)[32] = NULL;
    int np = 1;
    if (a.all_heads) {
        if (hl >= Ld) {
            fprintf(stderr, "attend align: --layer %d: the model has %d decoder layers (0..%d)\n", hl, Ld, Ld - 1);
            status = EXIT_USAGE;
            goto done2;
        }
        np = Hd;
        heads = malloc(sizeof(float) * ((size_t)Hd * (a.words ? rows * cols : T * S) + 1));
        panels = calloc((size_t)Hd, sizeof *panels);
        titles = calloc((size_t)Hd, sizeof *titles);
        float *tmp = malloc(sizeof(float) * ((size_t)T * S + 1));
        if (!heads || !panels || !titles || !tmp) {
            fprintf(stderr, "attend align: out of memory\n");
            exit(EXIT_FAIL);
        }
        for (int h = 0; h < Hd; h++) {
            attend_view one = attend_view_single(hl, h);
            one.shift = view.shift;
            attend_view_reduce(&one, r.cross, Ld, Hd, T, S, tmp, err, sizeof err);
            float *dst = heads + (size_t)h * rows * cols;
            if (a.words) attend_words_matrix(tmp, T, S, &sw, &tw, dst);
            else memcpy(dst, tmp, sizeof(float) * (size_t)T * S);
            snprintf(titles[h], sizeof titles[h], "%d:%d%s", hl, h, view.shift ? "+s" : "");
            panels[h].title = titles[h];
            panels[h].m = dst;
        }
        free(tmp);
    }
    heatmap_panel single = {NULL, shown};
    const heatmap_panel *pp = a.all_heads ? panels : &single;

    /* per-row notes: what the row aligns to, and the token's log-probability */
    char **notes = calloc((size_t)rows + 1, sizeof(char *));
    int *mark = malloc(sizeof(int) * ((size_t)rows + 1));
    float *rowlp = calloc((size_t)rows + 1, sizeof(float));
    double total = 0;
    for (int t = 0; t < T; t++) total += r.logprob[t];
    for (int t = 0; t < T; t++) {
        int row = a.words ? tw.word_of[t] : t;
        if (row >= 0) rowlp[row] += r.logprob[t];
    }
    for (int i = 0; i < rows; i++) {
        char nb[256] = "";
        size_t k = 0;
        mark[i] = -1;
        if (!a.words) {
            if (best[i] >= 0) {
                mark[i] = best[i];
                k += (size_t)snprintf(nb, sizeof nb, "%s %.20s", "->", r.src_pieces[best[i]]);
            }
        } else {
            for (int q = 0; q < nl && k < sizeof nb - 40; q++)
                if (links[2 * q + 1] == i) {
                    if (mark[i] < 0) mark[i] = links[2 * q];
                    k += (size_t)snprintf(nb + k, sizeof nb - k, "%s%.16s", k ? " " : "-> ",
                                          sw.words[links[2 * q]]);
                }
        }
        snprintf(nb + k, sizeof nb - k, "%s%.2f", k ? "  " : "", (double)rowlp[i]);
        notes[i] = strdup(nb);
    }
    heatmap_opts ho = heatmap_default_opts();
    ho.rows = rows;
    ho.cols = cols;
    ho.row_labels = rl;
    ho.col_labels = cl;
    ho.mark = mark;
    ho.row_notes = (const char *const *)notes;
    ho.width = a.width ? a.width : terminal_width();
    int tty = isatty(1), no_color = getenv("NO_COLOR") && *getenv("NO_COLOR");
    const char *term = getenv("TERM");
    int dumb = term && !strcmp(term, "dumb");
    if (a.color == 1) ho.color = ho.unicode = 1;
    else if (a.color == 0) ho.color = ho.unicode = 0;
    else {
        ho.unicode = tty && !dumb;
        ho.color = ho.unicode && !no_color;
    }

    if (a.json) {
        printf("{\n  \"source\": ");
        json_str(stdout, source);
        printf(",\n  \"translation\": ");
        json_str(stdout, r.text);
        printf(",\n  \"forced\": %s,\n  \"view\": ", a.target ? "true" : "false");
        json_str(stdout, vname);
        printf(",\n  \"level\": \"%s\",\n  \"source_pieces\": ", a.words ? "words" : "pieces");
        json_strs(stdout, (const char *const *)r.src_pieces, S);
        printf(",\n  \"target_pieces\": ");
        json_strs(stdout, (const char *const *)r.tgt_pieces, T);
        printf(",\n  \"source_words\": ");
        json_strs(stdout, (const char *const *)sw.words, sw.n_words);
        printf(",\n  \"target_words\": ");
        json_strs(stdout, (const char *const *)tw.words, tw.n_words);
        printf(",\n  \"target_logprob\": ");
        json_floats(stdout, r.logprob, T);
        printf(",\n  \"logprob\": %.7g,\n  \"matrix\": ", total);
        json_matrix(stdout, shown, rows, cols, "  ");
        printf(",\n  \"alignment\": ");
        json_str(stdout, pharaoh ? pharaoh : "");
        printf(",\n  \"links\": [");
        for (int q = 0; q < nl; q++) printf("%s[%d, %d]", q ? ", " : "", links[2 * q], links[2 * q + 1]);
        printf("]");
        if (a.all_heads) {
            printf(",\n  \"heads_layer\": %d,\n  \"heads\": [", hl);
            for (int h = 0; h < Hd; h++) {
                printf("%s\n    ", h ? "," : "");
                json_matrix(stdout, panels[h].m, rows, cols, "    ");
            }
            printf("\n  ]");
        }
        printf("\n}\n");
    } else {
        print_wrapped("source:", source, ho.width);
        print_wrapped(a.target ? "target:" : "translation:", r.text, ho.width);
        printf("log-prob:    %.3f (%.3f per token, %d tokens with </s>)\n", total, T ? total / T : 0.0, T);
        if (a.all_heads)
            printf("view:        every head of decoder layer %d%s (layer:head); alignment from %s\n", hl,
                   view.shift ? ", shifted" : "", vname);
        else
            printf("view:        %s (decoder layers 0..%d, heads 0..%d)%s\n", vname, Ld - 1, Hd - 1,
                   a.words ? ", words" : "");
        if (!a.svg) { /* with --svg the picture is in the file */
            printf("\n");
            heatmap_text(stdout, &ho, pp, np);
        }
        /* the alignment, wrapped at the heatmap's width */
        int col = printf("\nalignment:  ") - 1;
        for (const char *q = pharaoh ? pharaoh : ""; *q;) {
            const char *e = strchr(q, ' ');
            int len = e ? (int)(e - q) : (int)strlen(q);
            if (col + 1 + len > ho.width && col > 12) col = printf("\n            ") - 1;
            col += printf(" %.*s", len, q);
            q += len + (e ? 1 : 0);
        }
        printf("\n");
    }
    if (a.svg) {
        FILE *f = fopen(a.svg, "w");
        char title[1024];
        snprintf(title, sizeof title, "%s  \xe2\x86\x92  %s   [%s]", source, r.text, vname);
        if (!f || heatmap_svg(f, &ho, pp, np, title) || fclose(f)) {
            fprintf(stderr, "attend align: --svg %s: %s\n", a.svg, strerror(errno));
            status = EXIT_IO;
        }
    }
    if (a.dump && cli_dump_one(a.dump, c, &r, err, sizeof err)) {
        fprintf(stderr, "attend align: --dump-attention %s: %s\n", a.dump, err);
        status = EXIT_IO;
    }
    if (cli_flush_stdout()) status = EXIT_IO;
    for (int i = 0; i < rows; i++) free(notes[i]);
    free(notes);
    free(mark);
    free(rowlp);
done2:
    free(heads);
    free(panels);
    free(titles);
    if (shown != A) free(shown);
    free(pharaoh);
done:
    free(A);
    free(best);
    free(links);
    attend_words_free(&sw);
    attend_words_free(&tw);
    attend_result_free(&r);
    attend_free(m);
    free(owned);
    return status;
}
