/* attend align: translate (or force-decode a given translation of) one sentence and show
 * where the model looked: a heatmap of a cross-attention view, the hard word alignment,
 * and per-token log-probabilities; optionally as SVG, JSON or a full .npz dump. This file
 * reads the options and computes what is drawn; align_print.c writes it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "align_run.h"
#include "cli.h"
#include "output.h"

static void usage_calibrate(FILE *f);

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
            "      --prefix TEXT       the translation starts with TEXT and the search goes on\n"
            "                          from there (as attend translate --prefix)\n"
                        "      --reverse-model FILE\n"
            "                          a model of the other direction (en-de.gguf for a\n"
            "                          de-en model): it reads the translation and is\n"
            "                          force-decoded to the source; the links become those\n"
            "                          both directions agree on (each one's word matrix under\n"
            "                          its own view, row-normalised, added, read as the view\n"
            "                          says)\n"
"      --src-lang L        multilingual models (M2M-100, NLLB, mBART): the source\n"
            "                          language\n"
            "      --tgt-lang L        multilingual models: the target language\n"
            "      --task NAME         T5 models: write the task's prefix before the text\n"
            "      --split MODE        sentences (default): a SOURCE of several sentences is\n"
            "                          translated sentence by sentence (attention block-diagonal,\n"
            "                          alignment over the whole text); none: as one sequence\n"
            "      --split-lang L      the splitting rules' language (default: --src-lang)\n"
            "      --beam N            translate with N beams (default: the model's setting,\n"
            "                          as attend translate); the view shows the output's own path\n"
            "      --greedy            the same as --beam 1\n"
            "      --preset VIEW       attention view (default: the model's own, the view its\n"
            "                          file records, else all:avg,grow; attend info shows it):\n"
            "                            last:0          head 0 of the last decoder layer\n"
            "                                            (Marian / CTranslate2 alignment head)\n"
            "                            penultimate:avg heads of the second-to-last layer\n"
            "                                            averaged (Garg et al. 2019)\n"
            "                            L:avg,shift     layer L averaged, read one step later\n"
            "                                            (Chen et al. 2020, shift-att)\n"
            "                            all:avg         every layer and head averaged\n"
            "                            L:H[,L:H...]    explicit heads, averaged\n"
            "                            ...,align       with the file's trained alignment head\n"
            "                                            (attend info shows one), one more head\n"
            "                            ...,words       link whole words: weights summed\n"
            "                                            over their pieces first\n"
            "                            ...,mutual      link a row and a column only when\n"
            "                                            each is the other's largest\n"
            "                            ...,grow        mutual, then neighbours holding over\n"
            "                                            half their row's or column's weight\n"
            "                                            (grow-diag); default: each row's largest\n"
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
            "      --compute T         f32 (default, exact), bf16 (AVX-512 BF16 CPUs: faster,\n"
            "                          approximate) or auto (= f32)\n"
            "  -h, --help              this help\n");
    usage_calibrate(f);
}

static void usage_calibrate(FILE *f) {
    fprintf(f,
            "\n"
            "calibration (choose the view that aligns best on a small gold set):\n"
            "  attend align --calibrate GOLD --source SRC --target TGT [-m MODEL] [-o OUT]\n"
            "      --calibrate GOLD    gold links, one line per sentence: i-j sure, ipj\n"
            "                          possible (i: source word, j: target word, 0-based;\n"
            "                          words are SRC's and TGT's whitespace-separated tokens)\n"
            "      --source SRC        the source sentences, one per line\n"
            "      --target TGT        their translations, one per line (force-decoded)\n"
            "  -o, --output OUT        write a copy of the model that records the best view\n"
            "                          (key " ATTEND_ALIGNMENT_VIEW_KEY "); without it, only\n"
            "                          print the table\n"
            "  Every layer x head, each layer averaged and all:avg, plain and shifted, per\n"
            "  piece and per word, links by argmax, mutual and grow, are scored by alignment\n"
            "  error rate (AER); the table is printed best first. A file with a trained\n"
            "  alignment head (attend info shows one) adds each of them averaged with it\n"
            "  (L:H,align,...) and the head alone (align,...).\n");
}

/* ---------------------------------------------------------------------------------------
 * Options */

/* The defaults: the model's settings, the default view, text, --color auto, the terminal's width. */
static align_options align_default_options(void) {
    align_options o;
    memset(&o, 0, sizeof o);
    o.color = -1;
    return o;
}

static int take_format(cli_args *a, align_options *o) {
    const char *v;
    const int rc = cli_take_str(a, &v);
    if (rc != CLI_OPT_TAKEN || !strcmp(v, "text")) return rc;
    if (!strcmp(v, "json")) {
        o->json = 1;
        return CLI_OPT_TAKEN;
    }
    fprintf(stderr, "attend align: --format is text or json, not '%s'\n", v);
    return EXIT_USAGE;
}

static int take_color(cli_args *a, align_options *o) {
    const char *v;
    const int rc = cli_take_str(a, &v);
    if (rc != CLI_OPT_TAKEN || !strcmp(v, "auto")) return rc;
    if (!strcmp(v, "always") || !strcmp(v, "never")) {
        o->color = !strcmp(v, "always");
        return CLI_OPT_TAKEN;
    }
    fprintf(stderr, "attend align: --color is auto, always or never, not '%s'\n", v);
    return EXIT_USAGE;
}

/* The options of align besides the model options. */
static int take_align_option(cli_args *a, align_options *o) {
    int rc = CLI_OPT_OTHER;
    if (cli_is(a, NULL, "--target")) return cli_take_str(a, &o->target);
    if (cli_is(a, NULL, "--reverse-model")) return cli_take_str(a, &o->reverse_model);
    if (cli_is(a, NULL, "--prefix")) return cli_take_str(a, &o->prefix);
    if (cli_is(a, NULL, "--calibrate")) return cli_take_str(a, &o->calibrate);
    if (cli_is(a, NULL, "--source")) return cli_take_str(a, &o->source_file);
    if (cli_is(a, "-o", "--output")) return cli_take_str(a, &o->output);
    if (cli_is(a, NULL, "--preset")) return cli_take_str(a, &o->preset);
    if (cli_is(a, NULL, "--svg")) return cli_take_str(a, &o->svg);
    if (cli_is(a, NULL, "--dump-attention")) return cli_take_str(a, &o->dump);
    if (cli_is(a, NULL, "--format")) return take_format(a, o);
    if (cli_is(a, NULL, "--color")) return take_color(a, o);
    if (cli_is(a, NULL, "--width")) return cli_take_int(a, 20, 10000, &o->width);
    if (cli_is(a, NULL, "--layer")) {
        rc = cli_take_int(a, 0, 1000, &o->layer);
        o->has_layer = 1;
    } else if (cli_is(a, NULL, "--head")) {
        rc = cli_take_int(a, 0, 1000, &o->head);
        o->has_head = 1;
    } else if (cli_is(a, NULL, "--words")) {
        o->words = 1, rc = CLI_OPT_TAKEN;
    } else if (cli_is(a, NULL, "--all-heads")) {
        o->all_heads = 1, rc = CLI_OPT_TAKEN;
    }
    return rc;
}

/* 0 or EXIT_USAGE. */
static int parse_align(int argc, char **argv, align_options *o) {
    *o = align_default_options();
    cli_args a = {"align", argc, argv, 0};
    for (a.i = 1; a.i < argc; a.i++) {
        int rc = cli_model_option(&a, &o->common);
        if (rc == CLI_OPT_OTHER) rc = take_align_option(&a, o);
        if (rc == CLI_OPT_OTHER)
            rc = cli_one_text(&a, &o->source, "one source sentence at a time (quote it); "
                                              "for many lines use attend translate --alignment");
        if (rc != CLI_OPT_TAKEN) return rc;
    }
    return 0;
}

/* The attention view: --preset, --layer/--head, or the default. 0 or EXIT_USAGE. */
static int choose_view(const align_options *o, attend_view *view) {
    char err[512];
    if (o->preset && (o->has_layer || o->has_head)) {
        fprintf(stderr, "attend align: use --preset or --layer/--head, not both\n");
        return EXIT_USAGE;
    }
    if (o->preset) {
        if (attend_view_parse(o->preset, view, err, sizeof err) == 0) return 0;
        fprintf(stderr, "attend align: --preset: %s\n", err);
        return EXIT_USAGE;
    }
    if (o->has_layer || o->has_head)
        *view = attend_view_single(o->has_layer ? o->layer : ATTEND_LAYER_LAST,
                                   o->has_head ? o->head : ATTEND_HEAD_AVG);
    else
        memset(view, 0, sizeof *view); /* no items: the model's own, once it is loaded */
    return 0;
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

/* ---------------------------------------------------------------------------------------
 * The translation and what is drawn */

static void *alloc_or_exit(size_t n) {
    void *p = malloc(n);
    if (!p) {
        fprintf(stderr, "attend align: out of memory\n");
        exit(EXIT_FAIL);
    }
    return p;
}

/* Load the model, check the view and languages against it, and translate. 0 or an exit status. */
static int translate_source(align_run *x) {
    const align_options *o = x->o;
    char err[512];
    if (o->prefix && o->target) {
        fprintf(stderr, "attend align: --prefix starts a free translation; --target forces a whole one: not both\n");
        return EXIT_USAGE;
    }
    x->m = cli_load_model(o->common.model);
    x->c = attend_get_config(x->m);
    if (x->view.n == 0 && !x->view.align && attend_view_parse(x->c->alignment_view, &x->view, err, sizeof err)) {
        fprintf(stderr, "attend align: %s\n", err); /* the loader checked it */
        return EXIT_USAGE;
    }
    if (attend_view_check(&x->view, x->c->decoder_layers, x->c->decoder_heads, err, sizeof err)) {
        fprintf(stderr, "attend align: %s\n", err);
        return EXIT_USAGE;
    }
    if (cli_check_languages("align", x->m, o->common.src_lang, o->common.tgt_lang, 1) ||
        cli_check_task("align", x->m, o->common.task))
        return EXIT_USAGE;
    attend_params p = cli_model_params(&o->common);
    p.want_attention = p.want_scores = 1;
    const char *targets[1] = {o->target}, *prefixes[1] = {o->prefix};
    if (o->prefix) p.target_prefix = prefixes;
    if (attend_translate(x->m, &x->source, NULL, 1, o->target ? targets : NULL, &p, &x->r, err, sizeof err)) {
        fprintf(stderr, "attend align: %s\n", err);
        return EXIT_FAIL;
    }
    x->translated = 1;
    if (x->r.status) {
        fprintf(stderr, "attend align: %s\n", x->r.message);
        return EXIT_FAIL;
    }
    x->T = x->r.n_tgt, x->S = x->r.n_src, x->Ld = x->c->decoder_layers, x->Hd = x->c->decoder_heads;
    attend_view_name(&x->view, x->vname, sizeof x->vname);
    return 0;
}

/* The chosen view, piece level, its hard alignment, and what is drawn. 0 or EXIT_USAGE. */
static int reduce_view(align_run *x) {
    const int T = x->T, S = x->S;
    const attend_result *r = &x->r;
    char err[512];
    x->A = alloc_or_exit(sizeof(float) * ((size_t)T * S + 1));
    x->best = alloc_or_exit(sizeof(int) * ((size_t)T + 1));
    if (attend_words_from_pieces((const char *const *)r->src_pieces, S, &x->sw) ||
        attend_words_from_pieces((const char *const *)r->tgt_pieces, T, &x->tw)) {
        fprintf(stderr, "attend align: out of memory\n");
        exit(EXIT_FAIL);
    }
    if (attend_view_reduce_head(&x->view, r->cross, r->align_head, x->Ld, x->Hd, T, S, x->A, err, sizeof err)) {
        fprintf(stderr, "attend align: %s\n", err);
        return EXIT_USAGE;
    }
    if (attend_view_best(&x->view, x->A, T, S, &x->sw, &x->tw, x->best) ||
        (x->nl = attend_view_links(&x->view, x->A, T, S, &x->sw, &x->tw, &x->links)) < 0) {
        fprintf(stderr, "attend align: out of memory\n");
        exit(EXIT_FAIL);
    }
    x->pharaoh = attend_pharaoh(x->links, x->nl);
    const int words = x->o->words;
    x->rows = words ? x->tw.n_words : T, x->cols = words ? x->sw.n_words : S;
    x->rl = words ? (const char *const *)x->tw.words : (const char *const *)r->tgt_pieces;
    x->cl = words ? (const char *const *)x->sw.words : (const char *const *)r->src_pieces;
    x->shown = x->A;
    if (words) {
        x->shown = malloc(sizeof(float) * ((size_t)x->rows * x->cols + 1));
        attend_words_matrix(x->A, T, S, &x->sw, &x->tw, x->shown);
    }
    return 0;
}

/* --all-heads: every head of one layer as small multiples (the layer of --layer, else of the
 * view, else the last). 0 or EXIT_USAGE. */
static int head_panels(align_run *x) {
    const align_options *o = x->o;
    const int Ld = x->Ld, Hd = x->Hd, T = x->T, S = x->S;
    char err[512];
    x->hl = o->has_layer ? o->layer : Ld - 1;
    if (!o->has_layer && attend_resolve_layer(x->view.layer[0], Ld) >= 0)
        x->hl = attend_resolve_layer(x->view.layer[0], Ld);
    x->np = 1;
    if (!o->all_heads) return 0;
    if (x->hl >= Ld) {
        fprintf(stderr, "attend align: --layer %d: the model has %d decoder layers (0..%d)\n", x->hl, Ld, Ld - 1);
        return EXIT_USAGE;
    }
    x->np = Hd;
    x->heads = malloc(sizeof(float) * ((size_t)Hd * (o->words ? x->rows * x->cols : T * S) + 1));
    x->panels = calloc((size_t)Hd, sizeof *x->panels);
    x->titles = calloc((size_t)Hd, sizeof *x->titles);
    float *tmp = malloc(sizeof(float) * ((size_t)T * S + 1));
    if (!x->heads || !x->panels || !x->titles || !tmp) {
        fprintf(stderr, "attend align: out of memory\n");
        exit(EXIT_FAIL);
    }
    for (int h = 0; h < Hd; h++) {
        attend_view one = attend_view_single(x->hl, h);
        one.shift = x->view.shift;
        attend_view_reduce(&one, x->r.cross, Ld, Hd, T, S, tmp, err, sizeof err);
        float *dst = x->heads + (size_t)h * x->rows * x->cols;
        if (o->words) attend_words_matrix(tmp, T, S, &x->sw, &x->tw, dst);
        else memcpy(dst, tmp, sizeof(float) * (size_t)T * S);
        snprintf(x->titles[h], sizeof x->titles[h], "%d:%d%s", x->hl, h, x->view.shift ? "+s" : "");
        x->panels[h].title = x->titles[h];
        x->panels[h].m = dst;
    }
    free(tmp);
    return 0;
}

/* Does the view link source word sw to target word tw? */
static int linked(const align_run *x, int sw, int tw) {
    for (int q = 0; q < x->nl; q++)
        if (x->links[2 * q] == sw && x->links[2 * q + 1] == tw) return 1;
    return 0;
}

/* Row i's note: what it aligns to (a piece, or the words linked), then its log-probability.
 * A piece row of a view that links by argmax names its piece; otherwise the source words
 * linked to the row's word are listed, and the mark is the row's argmax piece if it is one
 * of them. */
static void row_note(align_run *x, int i, char *nb, size_t n) {
    size_t k = 0;
    x->mark[i] = -1;
    const int word = x->o->words ? i : x->tw.word_of[i];
    if (!x->o->words && x->view.links == ATTEND_LINKS_ARGMAX) {
        if (x->best[i] >= 0) {
            x->mark[i] = x->best[i];
            k += (size_t)snprintf(nb, n, "%s %.20s", "->", x->r.src_pieces[x->best[i]]);
        }
    } else if (word >= 0) {
        for (int q = 0; q < x->nl && k < n - 40; q++)
            if (x->links[2 * q + 1] == word) {
                if (x->o->words && x->mark[i] < 0) x->mark[i] = x->links[2 * q];
                k += (size_t)snprintf(nb + k, n - k, "%s%.16s", k ? " " : "-> ", x->sw.words[x->links[2 * q]]);
            }
        if (!x->o->words && x->best[i] >= 0 && linked(x, x->sw.word_of[x->best[i]], word)) x->mark[i] = x->best[i];
    }
    snprintf(nb + k, n - k, "%s%.2f", k ? "  " : "", (double)x->rowlp[i]);
}

/* Per-row notes and marks, and the log-probabilities they show. */
static void row_notes(align_run *x) {
    x->notes = calloc((size_t)x->rows + 1, sizeof(char *));
    x->mark = malloc(sizeof(int) * ((size_t)x->rows + 1));
    x->rowlp = calloc((size_t)x->rows + 1, sizeof(float));
    for (int t = 0; t < x->T; t++) x->total += x->r.logprob[t];
    for (int t = 0; t < x->T; t++) {
        int row = x->o->words ? x->tw.word_of[t] : t;
        if (row >= 0) x->rowlp[row] += x->r.logprob[t];
    }
    for (int i = 0; i < x->rows; i++) {
        char nb[256] = "";
        row_note(x, i, nb, sizeof nb);
        x->notes[i] = strdup(nb);
    }
}

static int terminal_width(void) {
    struct winsize ws;
    if (isatty(1) && ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) return ws.ws_col;
    const char *cols = getenv("COLUMNS");
    if (cols && atoi(cols) >= 20) return atoi(cols);
    return 80;
}

/* The heatmap's labels, marks and notes, width, and colours (--color; auto: Unicode on a
 * terminal that is not dumb, colour too without NO_COLOR). */
static void heatmap_options(align_run *x) {
    heatmap_opts *ho = &x->ho;
    *ho = heatmap_default_opts();
    ho->rows = x->rows;
    ho->cols = x->cols;
    ho->row_labels = x->rl;
    ho->col_labels = x->cl;
    ho->mark = x->mark;
    ho->row_notes = (const char *const *)x->notes;
    ho->width = x->o->width ? x->o->width : terminal_width();
    int tty = isatty(1), no_color = getenv("NO_COLOR") && *getenv("NO_COLOR");
    const char *term = getenv("TERM");
    int dumb = term && !strcmp(term, "dumb");
    if (x->o->color >= 0) {
        ho->color = ho->unicode = x->o->color;
    } else {
        ho->unicode = tty && !dumb;
        ho->color = ho->unicode && !no_color;
    }
}

/* ---------------------------------------------------------------------------------------
 * align */

/* The outputs: text or JSON, --svg, --dump-attention. The exit status. */
static int write_outputs(align_run *x) {
    const align_options *o = x->o;
    int status = EXIT_OK;
    char err[512];
    if (o->json) align_print_json(x);
    else align_print_text(x);
    if (o->svg && align_write_svg(x, o->svg)) status = EXIT_IO;
    if (o->dump && cli_dump_one(o->dump, x->c, &x->r, err, sizeof err)) {
        fprintf(stderr, "attend align: --dump-attention %s: %s\n", o->dump, err);
        status = EXIT_IO;
    }
    if (cli_flush_stdout()) status = EXIT_IO;
    return status;
}

static void align_run_free(align_run *x) {
    for (int i = 0; x->notes && i < x->rows; i++) free(x->notes[i]);
    free(x->notes);
    free(x->mark);
    free(x->rowlp);
    free(x->heads);
    free(x->panels);
    free(x->titles);
    if (x->shown != x->A) free(x->shown);
    free(x->pharaoh);
    free(x->A);
    free(x->best);
    free(x->links);
    attend_words_free(&x->sw);
    attend_words_free(&x->tw);
    if (x->translated) attend_result_free(&x->r);
    if (x->m) attend_free(x->m);
}

int cmd_align(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        usage_align(stdout);
        return EXIT_OK;
    }
    align_options o;
    align_run x = {0};
    x.o = &o;
    int status = parse_align(argc, argv, &o);
    if (!status && (o.calibrate || o.source_file || o.output) && o.reverse_model) {
        fprintf(stderr, "attend align: --calibrate scores one model's views; --reverse-model is not taken there\n");
        return EXIT_USAGE;
    }
    if (!status && (o.calibrate || o.source_file || o.output)) return align_calibrate(&o);
    if (!status) status = choose_view(&o, &x.view);
    if (status) return status;
    char *owned = NULL;
    x.source = o.source ? o.source : (owned = read_stdin_line());
    if (!x.source) {
        fprintf(stderr, "attend align: no source sentence (give one, or a line on stdin)\n");
        return EXIT_USAGE;
    }
    status = translate_source(&x);
    if (!status) status = reduce_view(&x);
    if (!status && o.reverse_model) status = align_reverse(&x);
    if (!status) status = head_panels(&x);
    if (!status) {
        row_notes(&x);
        heatmap_options(&x);
        status = write_outputs(&x);
    }
    align_run_free(&x);
    free(owned);
    return status;
}
