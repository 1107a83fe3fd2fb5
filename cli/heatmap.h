/* heatmap: draw attention matrices (rows = target tokens, columns = source tokens) in a
 * terminal or as a standalone SVG.
 *
 *   heatmap_opts o = heatmap_default_opts();
 *   o.rows = T; o.cols = S; o.row_labels = tgt; o.col_labels = src;
 *   heatmap_panel p = {"last:0", A};
 *   heatmap_text(stdout, &o, &p, 1);        // one big panel, labels on both axes
 *   heatmap_svg(f, &o, panels, n, "title");  // a grid of panels with a colour scale
 *
 * Shading is relative to the largest weight drawn (the legend prints it), so that averaged
 * views, whose weights are spread out, stay readable. */
#ifndef ATTEND_HEATMAP_H
#define ATTEND_HEATMAP_H

#include <stdio.h>

typedef struct {
    const char *title; /* e.g. "head 3"; may be NULL */
    const float *m;    /* [rows, cols] */
} heatmap_panel;

typedef struct {
    int rows, cols;
    const char *const *row_labels; /* [rows] */
    const char *const *col_labels; /* [cols] */
    const int *mark;               /* [rows]: a column to outline in each row, or -1; may be NULL */
    const char *const *row_notes;  /* [rows]: text after each row; may be NULL */
    int width;                     /* terminal columns to fit in (default 80) */
    int color;                     /* 256-colour ANSI escapes */
    int unicode;                   /* Unicode shade blocks and "▁"; else plain ASCII */
} heatmap_opts;

heatmap_opts heatmap_default_opts(void);

/* Draw n panels. One panel: two characters per column, vertical column labels, row notes;
 * wide matrices wrap into blocks of columns that fit o->width. Several panels: a small
 * multiple, one character per column, side by side as far as the width allows. */
void heatmap_text(FILE *f, const heatmap_opts *o, const heatmap_panel *p, int n);

/* Write a standalone SVG document of n panels (in a grid of up to 4 per row), with token
 * labels, marked cells, and a colour scale. Returns 0, or -1 if writing failed. */
int heatmap_svg(FILE *f, const heatmap_opts *o, const heatmap_panel *p, int n, const char *title);

/* Display width of a UTF-8 string in terminal cells (wide East Asian = 2, combining = 0). */
int heatmap_text_width(const char *s);

#endif
