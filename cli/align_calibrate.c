/* attend align --calibrate GOLD --source SRC --target TGT [-o OUT]: force-decode each gold
 * sentence pair, score every candidate view (each layer x head, each layer averaged,
 * all:avg; plain and shifted; per piece and per word; links by argmax, mutual or grow; each
 * also with the file's trained alignment head when it has one) by alignment error rate against the gold links, print the
 * table best first and, with -o, write a copy of the model that records the best view
 * (attend_record_view). Ties go to the view whose name sorts first, as tools/aer.py --sweep. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "align_run.h"
#include "cli.h"

#define CHUNK 16 /* sentences force-decoded together */

typedef struct {
    char name[48];
    attend_view v;
    long long a_s, a_p, n_a, n_s; /* |A & S|, |A & P|, |A|, |S| over the corpus */
    double aer;
} candidate;

typedef struct {
    int n;
    int *sure;   /* per link: 1 sure, 0 possible */
    int *pairs;  /* 2 per link: source word, target word */
} gold_line;

/* The lines of path (without newlines; a UTF-8 BOM at the start dropped), or NULL after a message. */
static char **read_file_lines(const char *path, int *n) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "attend align: cannot read %s\n", path);
        return NULL;
    }
    char **lines = NULL, *line = NULL;
    size_t cap = 0;
    ssize_t len;
    *n = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        char **grown = realloc(lines, sizeof *lines * ((size_t)*n + 1));
        const char *text = *n == 0 && !strncmp(line, "\xef\xbb\xbf", 3) ? line + 3 : line;
        if (!grown || !(grown[*n] = strdup(text))) {
            fprintf(stderr, "attend align: out of memory\n");
            exit(EXIT_FAIL);
        }
        lines = grown;
        (*n)++;
    }
    free(line);
    fclose(f);
    return lines;
}

/* One gold line: "i-j" sure and "ipj" possible links. 0, or -1 after a message. */
static int parse_gold(const char *path, int lineno, const char *text, gold_line *g) {
    const size_t room = strlen(text) / 2 + 1;
    g->n = 0;
    g->sure = malloc(sizeof(int) * room);
    g->pairs = malloc(sizeof(int) * 2 * room);
    if (!g->sure || !g->pairs) {
        fprintf(stderr, "attend align: out of memory\n");
        exit(EXIT_FAIL);
    }
    for (const char *p = text; *p;) {
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) break;
        int i, j, used = 0;
        char sep;
        if (sscanf(p, "%d%c%d%n", &i, &sep, &j, &used) != 3 || (sep != '-' && sep != 'p') || i < 0 || j < 0 ||
            (p[used] && p[used] != ' ' && p[used] != '\t')) {
            fprintf(stderr, "attend align: %s line %d: '%.*s' is not a link like 3-4 or 3p4\n", path, lineno,
                    (int)strcspn(p, " \t"), p);
            return -1;
        }
        p += used;
        int q = 0; /* a pair listed twice counts once, sure if either says so */
        while (q < g->n && (g->pairs[2 * q] != i || g->pairs[2 * q + 1] != j)) q++;
        if (q == g->n) {
            g->sure[g->n] = 0;
            g->pairs[2 * g->n] = i;
            g->pairs[2 * g->n + 1] = j;
            g->n++;
        }
        g->sure[q] |= sep == '-';
    }
    return 0;
}

/* Every layer x head, each layer averaged and all:avg; plain and shifted; links read per
 * piece and per word ("words"), by argmax, "mutual" or "grow". With the file's trained
 * alignment head (align), each of those averaged with it too, and the head alone. */
static candidate *make_candidates(int L, int H, int align, int *n) {
    const int per_mode = (L * (H + 1) + 1) * (align ? 2 : 1) + (align ? 1 : 0);
    candidate *c = calloc((size_t)12 * per_mode, sizeof *c);
    if (!c) return NULL;
    *n = 0;
    for (int mode = 0; mode < 12; mode++)
        for (int with = 0; with <= align; with++)
            for (int l = 0; l <= L + with; l++)
                for (int h = 0; h <= H; h++) {
                    if (l == L && h < H) continue;     /* all:avg only */
                    if (l == L + 1 && h < H) continue; /* the head alone, once */
                    candidate *k = &c[(*n)++];
                    k->v = attend_view_single(l >= L ? ATTEND_LAYER_ALL : l, h == H ? ATTEND_HEAD_AVG : h);
                    if (l == L + 1) k->v.n = 0;
                    k->v.align = with;
                    k->v.shift = mode & 1;
                    k->v.words = (mode >> 1) & 1;
                    k->v.links = mode >> 2;
                    attend_view_name(&k->v, k->name, sizeof k->name);
                }
    return c;
}

/* One force-decoded sentence as every candidate reads it: its pieces merged into words once. */
typedef struct {
    const attend_result *r;
    attend_words sw, tw;
    float *A; /* [n_tgt, n_src]: the candidate's view, rewritten by each */
} scored_sentence;

static void out_of_memory(void) {
    fprintf(stderr, "attend align: out of memory\n");
    exit(EXIT_FAIL);
}

/* Add one sentence's counts for view k. */
static void score_sentence(candidate *k, const scored_sentence *x, const attend_config *c, const gold_line *g) {
    const attend_result *r = x->r;
    char err[256];
    attend_view_reduce_head(&k->v, r->cross, r->align_head, c->decoder_layers, c->decoder_heads, r->n_tgt,
                            r->n_src, x->A, err, sizeof err);
    int *links;
    const int nl = attend_view_links(&k->v, x->A, r->n_tgt, r->n_src, &x->sw, &x->tw, &links);
    if (nl < 0) out_of_memory();
    for (int q = 0; q < g->n; q++) k->n_s += g->sure[q];
    k->n_a += nl;
    for (int i = 0; i < nl; i++)
        for (int q = 0; q < g->n; q++)
            if (links[2 * i] == g->pairs[2 * q] && links[2 * i + 1] == g->pairs[2 * q + 1]) {
                k->a_p++;
                k->a_s += g->sure[q];
                break; /* a link is listed once */
            }
    free(links);
}

/* Add result r's counts to every candidate. */
static void score_result(const attend_result *r, const attend_config *c, const gold_line *g, candidate *cand,
                         int nc) {
    scored_sentence x = {.r = r};
    x.A = malloc(sizeof(float) * ((size_t)r->n_tgt * r->n_src + 1));
    if (!x.A || attend_words_from_pieces((const char *const *)r->src_pieces, r->n_src, &x.sw) ||
        attend_words_from_pieces((const char *const *)r->tgt_pieces, r->n_tgt, &x.tw))
        out_of_memory();
    for (int v = 0; v < nc; v++) score_sentence(&cand[v], &x, c, g);
    attend_words_free(&x.sw);
    attend_words_free(&x.tw);
    free(x.A);
}

/* Force-decode the sentences CHUNK at a time and add each one's counts to every candidate.
 * 0 or an exit status. */
static int score_all(attend_model *m, const align_options *o, char **src, char **tgt, const gold_line *gold,
                     int n, candidate *cand, int nc) {
    const attend_config *c = attend_get_config(m);
    attend_params p = cli_model_params(&o->common);
    p.want_attention = 1;
    attend_result res[CHUNK];
    char err[512];
    for (int at = 0; at < n; at += CHUNK) {
        const int k = n - at < CHUNK ? n - at : CHUNK;
        if (attend_translate(m, (const char *const *)src + at, NULL, k, (const char *const *)tgt + at, &p, res, err,
                             sizeof err)) {
            fprintf(stderr, "attend align: %s\n", err);
            return EXIT_FAIL;
        }
        for (int i = 0; i < k; i++) {
            if (res[i].status) fprintf(stderr, "attend align: line %d: %s\n", at + i + 1, res[i].message);
            else score_result(&res[i], c, &gold[at + i], cand, nc);
            attend_result_free(&res[i]);
        }
    }
    return 0;
}

static int by_aer(const void *a, const void *b) {
    const candidate *x = a, *y = b;
    if (x->aer != y->aer) return x->aer < y->aer ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* The three files: their lines (counts as read) and the parsed gold links. */
typedef struct {
    char **src, **tgt, **gold_text;
    int ns, nt, ng;
    gold_line *gold; /* [ng] once parsed */
} cal_inputs;

static void free_lines(char **lines, int n) {
    for (int i = 0; lines && i < n; i++) free(lines[i]);
    free(lines);
}

static void free_inputs(cal_inputs *in) {
    free_lines(in->src, in->ns);
    free_lines(in->tgt, in->nt);
    free_lines(in->gold_text, in->ng);
    for (int i = 0; in->gold && i < in->ng; i++) {
        free(in->gold[i].sure);
        free(in->gold[i].pairs);
    }
    free(in->gold);
}

/* Read the three files; the same number of lines in each. 0 or EXIT_USAGE (free_inputs either way). */
static int read_inputs(const align_options *o, cal_inputs *in) {
    if (!o->calibrate || !o->source_file || !o->target) {
        fprintf(stderr, "attend align: calibration needs --calibrate GOLD, --source SRC and --target TGT "
                        "(see --help)\n");
        return EXIT_USAGE;
    }
    if (o->source || o->preset || o->has_layer || o->has_head || o->svg || o->dump || o->json || o->all_heads) {
        fprintf(stderr, "attend align: --calibrate scores every view of the gold set: it takes no sentence, "
                        "view or drawing option\n");
        return EXIT_USAGE;
    }
    if (!(in->src = read_file_lines(o->source_file, &in->ns)) || !(in->tgt = read_file_lines(o->target, &in->nt)) ||
        !(in->gold_text = read_file_lines(o->calibrate, &in->ng)))
        return EXIT_USAGE;
    if (in->ns != in->nt || in->ns != in->ng || in->ns == 0) {
        fprintf(stderr, "attend align: %d source, %d target and %d gold lines (the same number, at least one)\n",
                in->ns, in->nt, in->ng);
        return EXIT_USAGE;
    }
    if (!(in->gold = calloc((size_t)in->ng, sizeof *in->gold))) {
        fprintf(stderr, "attend align: out of memory\n");
        exit(EXIT_FAIL);
    }
    for (int i = 0; i < in->ng; i++)
        if (parse_gold(o->calibrate, i + 1, in->gold_text[i], &in->gold[i])) return EXIT_USAGE;
    return 0;
}

/* The table, best first, and the copy of the model that records the best view. */
static int report(const align_options *o, candidate *cand, int nc, int n, const attend_config *c) {
    for (int v = 0; v < nc; v++) {
        const candidate *k = &cand[v];
        cand[v].aer = k->n_a + k->n_s ? 1.0 - (double)(k->a_s + k->a_p) / (double)(k->n_a + k->n_s) : 0.0;
    }
    qsort(cand, (size_t)nc, sizeof *cand, by_aer);
    printf("%-20s %7s\n", "view", "AER");
    for (int v = 0; v < nc; v++) printf("%-20s %7.4f\n", cand[v].name, cand[v].aer);
    printf("best: %s (AER %.4f; %d layers x %d heads, %d sentences)\n", cand[0].name, cand[0].aer,
           c->decoder_layers, c->decoder_heads, n);
    if (!o->output) return cli_flush_stdout();
    char buf[4200], err[512];
    const char *in = cli_model_path(o->common.model, buf, sizeof buf);
    const int rc = attend_record_view(in, o->output, cand[0].name, err, sizeof err);
    if (rc) {
        fprintf(stderr, "attend align: %s\n", err);
        return rc == ATTEND_E_IO ? EXIT_IO : rc == ATTEND_E_MODEL ? EXIT_MODEL : EXIT_FAIL;
    }
    printf("wrote %s: %s = %s\n", o->output, ATTEND_ALIGNMENT_VIEW_KEY, cand[0].name);
    return cli_flush_stdout();
}

int align_calibrate(const align_options *o) {
    cal_inputs in = {0};
    int nc = 0, status = read_inputs(o, &in);
    attend_model *m = NULL;
    candidate *cand = NULL;
    if (!status) {
        m = cli_load_model(o->common.model);
        if (cli_check_languages("align", m, o->common.src_lang, o->common.tgt_lang, 1)) status = EXIT_USAGE;
    }
    const attend_config *c = m ? attend_get_config(m) : NULL;
    if (!status && !(cand = make_candidates(c->decoder_layers, c->decoder_heads, c->align_head_width > 0, &nc))) {
        fprintf(stderr, "attend align: out of memory\n");
        status = EXIT_FAIL;
    }
    if (!status) status = score_all(m, o, in.src, in.tgt, in.gold, in.ns, cand, nc);
    if (!status) status = report(o, cand, nc, in.ns, c);
    free(cand);
    free_inputs(&in);
    if (m) attend_free(m);
    return status;
}
