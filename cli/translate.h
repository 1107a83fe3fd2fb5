/* translate: attend translate's options (translate_options.c) and its run (cmd_translate.c). */
#ifndef ATTEND_CLI_TRANSLATE_H
#define ATTEND_CLI_TRANSLATE_H

#include <stdio.h>

#include "../model/align.h"
#include "../model/attend.h"
#include "options.h"

/* Sentences a batch when neither --batch-size nor --batch-tokens is given. */
#define DEFAULT_BATCH 32
/* The bytes of a line read when lines are split into sentences (a paragraph, a document
 * on one line): each sentence must fit the model, the line need not. A longer line is cut
 * here, with a warning, so memory stays bounded. */
#define SPLIT_MAX_LINE (1 << 20)

typedef struct {
    cli_model_options common; /* -m, -t, --beam, --greedy, --src-lang, --tgt-lang */
    attend_params p;          /* the search settings; common's are copied in after parsing */
    const char *dump_path;    /* --dump-attention */
    int dump_logits;          /* --dump-logits */
    int align;                /* --alignment: append " ||| " and the Pharaoh alignment */
    attend_view view;         /* its attention view */
    int view_from_model;      /* --alignment without =VIEW: the model's own view */
    const char *reverse_model; /* --reverse-model FILE: with --alignment, the links both directions
                                * agree on (as attend align --reverse-model) */
    int batch;                /* --batch-size: at most this many sentences per batch (0: no limit) */
    int batch_tokens;         /* --batch-tokens: at most this many source tokens per batch (0: no limit) */
    int verbose;              /* -v: one line per chunk and per batch on stderr */
    int nbest;                /* --n-best K: K lines per input line (0: one plain line) */
    const char *prefix;       /* --prefix TEXT: every translation starts with it */
    const char *prefix_file;  /* --prefix-file FILE: line i's prefix is its line i */
    char **texts;             /* the TEXT arguments (gathered in place at the front of argv) */
    int n_texts;
    int html;                 /* --format html: each line an HTML fragment */
    const char *document;     /* --document FILE: one HTML document ("-": standard input) */
} translate_options;

/* attend translate --help. */
void translate_usage(FILE *f);
/* The defaults: the model's own search settings, its default thread count and model,
 * DEFAULT_BATCH sentences a batch (set when the run starts: --batch-tokens alone lifts it). */
translate_options translate_default_options(void);
/* Options go anywhere before "--"; the TEXT arguments are gathered in place at the front of
 * argv (each slot written has already been read). 0 or EXIT_USAGE. */
int translate_parse(int argc, char **argv, translate_options *o);
/* Options that do not go together, before the model is loaded. 0 or EXIT_USAGE. */
int translate_check_options(const translate_options *o);
/* The options against the model: its languages, its beams for --n-best, its layers and heads
 * for --alignment (whose view becomes the model's own when none was given). 0 or EXIT_USAGE. */
int translate_check_with_model(translate_options *o, const attend_model *m);

/* --format html: lines[0..n) (lens bytes each, the input's lines first_line + 1 on) as HTML
 * fragments, one output line each, blank lines blank. 0 or an exit status. */
int translate_html_lines(attend_model *m, const attend_params *p, char **lines, const size_t *lens, int n,
                         long long first_line);
/* --document FILE: the whole file as one HTML document, translated to standard output. 0 or
 * an exit status. */
int translate_html_document(attend_model *m, const attend_params *p, const char *path);

#endif
