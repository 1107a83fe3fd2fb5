/* What attend align writes: the heatmap with the translation and alignment on the terminal,
 * the same as JSON, and the SVG file (align_run.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "align_run.h"
#include "cli.h"
#include "json.h"

/* ---------------------------------------------------------------------------------------
 * Text */

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

/* The alignment, wrapped at the heatmap's width. */
static void print_alignment(const char *pharaoh, int width) {
    int col = printf("\nalignment:  ") - 1;
    for (const char *q = pharaoh ? pharaoh : ""; *q;) {
        const char *e = strchr(q, ' ');
        int len = e ? (int)(e - q) : (int)strlen(q);
        if (col + 1 + len > width && col > 12) col = printf("\n            ") - 1;
        col += printf(" %.*s", len, q);
        q += len + (e ? 1 : 0);
    }
    printf("\n");
}

void align_print_text(const align_run *x) {
    const align_options *o = x->o;
    const int T = x->T;
    print_wrapped("source:", x->source, x->ho.width);
    print_wrapped(o->target ? "target:" : "translation:", x->r.text, x->ho.width);
    printf("log-prob:    %.3f (%.3f per token, %d tokens with </s>)\n", x->total, T ? x->total / T : 0.0, T);
    if (o->all_heads)
        printf("view:        decoder layer %d, each head%s; alignment from %s\n", x->hl,
               x->view.shift ? ", shifted" : "", x->vname);
    else
        printf("view:        %s (decoder layers 0..%d, heads 0..%d)%s\n", x->vname, x->Ld - 1, x->Hd - 1,
               o->words ? ", words" : "");
    if (x->rvname[0])
        printf("reverse:     %s, its view %s: the links both directions agree on\n", o->reverse_model, x->rvname);
    if (!o->svg) { /* with --svg the picture is in the file */
        heatmap_panel single = {NULL, x->shown};
        printf("\n");
        heatmap_text(stdout, &x->ho, o->all_heads ? x->panels : &single, x->np);
    }
    print_alignment(x->pharaoh, x->ho.width);
}

/* ---------------------------------------------------------------------------------------
 * JSON */

/* The alignment as a string and as [source word, target word] pairs; --all-heads' matrices. */
static void json_links_and_heads(const align_run *x) {
    printf(",\n  \"alignment\": ");
    json_str(stdout, x->pharaoh ? x->pharaoh : "");
    printf(",\n  \"links\": [");
    for (int q = 0; q < x->nl; q++) printf("%s[%d, %d]", q ? ", " : "", x->links[2 * q], x->links[2 * q + 1]);
    printf("]");
    if (x->o->all_heads) {
        printf(",\n  \"heads_layer\": %d,\n  \"heads\": [", x->hl);
        for (int h = 0; h < x->Hd; h++) {
            printf("%s\n    ", h ? "," : "");
            json_matrix(stdout, x->panels[h].m, x->rows, x->cols, "    ");
        }
        printf("\n  ]");
    }
}

void align_print_json(const align_run *x) {
    const attend_result *r = &x->r;
    printf("{\n  \"source\": ");
    json_str(stdout, x->source);
    printf(",\n  \"translation\": ");
    json_str(stdout, r->text);
    printf(",\n  \"forced\": %s,\n  \"view\": ", x->o->target ? "true" : "false");
    json_str(stdout, x->vname);
    if (x->rvname[0]) {
        printf(",\n  \"reverse_model\": ");
        json_str(stdout, x->o->reverse_model);
        printf(",\n  \"reverse_view\": ");
        json_str(stdout, x->rvname);
    }
    printf(",\n  \"level\": \"%s\",\n  \"source_pieces\": ", x->o->words ? "words" : "pieces");
    json_strs(stdout, (const char *const *)r->src_pieces, x->S);
    printf(",\n  \"target_pieces\": ");
    json_strs(stdout, (const char *const *)r->tgt_pieces, x->T);
    printf(",\n  \"source_words\": ");
    json_strs(stdout, (const char *const *)x->sw.words, x->sw.n_words);
    printf(",\n  \"target_words\": ");
    json_strs(stdout, (const char *const *)x->tw.words, x->tw.n_words);
    printf(",\n  \"target_logprob\": ");
    json_floats(stdout, r->logprob, x->T);
    printf(",\n  \"logprob\": %.7g,\n  \"matrix\": ", x->total);
    json_matrix(stdout, x->shown, x->rows, x->cols, "  ");
    json_links_and_heads(x);
    printf("\n}\n");
}

/* ---------------------------------------------------------------------------------------
 * SVG */

int align_write_svg(const align_run *x, const char *path) {
    FILE *f = fopen(path, "w");
    char title[1024];
    snprintf(title, sizeof title, "%s  \xe2\x86\x92  %s   [%s]", x->source, x->r.text, x->vname);
    heatmap_panel single = {NULL, x->shown};
    if (!f || heatmap_svg(f, &x->ho, x->o->all_heads ? x->panels : &single, x->np, title) || fclose(f)) {
        fprintf(stderr, "attend align: --svg %s: %s\n", path, strerror(errno));
        return EXIT_IO;
    }
    return 0;
}
