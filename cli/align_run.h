/* align_run: one run of attend align, from its options to what is drawn; cmd_align.c fills it
 * (options, translation, matrices), align_print.c writes it (text, JSON, SVG). */
#ifndef ATTEND_CLI_ALIGN_RUN_H
#define ATTEND_CLI_ALIGN_RUN_H

#include "../model/align.h"
#include "../model/attend.h"
#include "heatmap.h"
#include "options.h"

typedef struct {
    cli_model_options common; /* -m, -t, --beam, --greedy, --src-lang, --tgt-lang */
    const char *source;       /* the sentence (NULL: a line of standard input) */
    const char *target;       /* --target: force-decode this translation */
    const char *prefix;       /* --prefix: the translation starts with this text */
    const char *preset, *svg, *dump;
    int layer, head, has_layer, has_head;
    int words, all_heads, json;
    int color;                /* --color: 1 always, 0 never, -1 auto */
    int width;                /* --width: 0 for the terminal's */
    const char *calibrate;    /* --calibrate GOLD: choose the best view on a gold set */
    const char *source_file;  /* --source: its source sentences (--target: their translations) */
    const char *output;       /* -o: the copy of the model that records the best view */
    const char *reverse_model; /* --reverse-model: links both directions agree on */
} align_options;

typedef struct {
    const align_options *o;
    const char *source;
    attend_view view;
    char vname[256];          /* the view's name */
    attend_model *m;
    const attend_config *c;
    attend_result r;
    int translated;           /* r holds a result to free */
    int T, S, Ld, Hd;         /* target and source pieces, decoder layers and heads */
    float *A;                 /* [T, S] the view, piece level */
    int *best;                /* [T] the source piece each target piece aligns to, or -1 */
    int *links, nl;           /* [nl] (source word, target word) pairs */
    attend_words sw, tw;
    char *pharaoh;            /* the links as "i-j ..." */
    char rvname[256];         /* --reverse-model: that model's view ("" without one) */
    double total;             /* the translation's log-probability */
    /* what is drawn: pieces, or words (then the rows and columns are words) */
    int rows, cols;
    const char *const *rl, *const *cl;
    float *shown;             /* [rows, cols]: A, or its word matrix */
    int hl;                   /* --all-heads: the layer whose heads are drawn */
    float *heads;             /* --all-heads: [Hd, rows, cols] */
    heatmap_panel *panels;
    char (*titles)[32];
    int np;                   /* panels drawn */
    char **notes;             /* [rows] what the row aligns to and its log-probability */
    int *mark;                /* [rows] the column marked in each row, or -1 */
    float *rowlp;             /* [rows] log-probability of each row */
    heatmap_opts ho;
} align_run;

/* The heatmap, wrapped text and alignment on standard output. */
void align_print_text(const align_run *x);
/* The same as one JSON object. */
void align_print_json(const align_run *x);
/* --svg's file. 0, or EXIT_IO after a message. */
int align_write_svg(const align_run *x, const char *path);
/* --reverse-model (align_reverse.c): the links and pharaoh become those both directions agree
 * on. 0, or an exit status after a message. */
int align_reverse(align_run *x);
/* attend align --calibrate (align_calibrate.c). The exit status. */
int align_calibrate(const align_options *o);

#endif
