/* Hard word links from a reduced view: per-row argmax (the default), mutual argmax, or mutual
 * argmax grown along its neighbours (see align.h, ATTEND_LINKS_*). The same code serves piece
 * and word level: a "grid" is the matrix the links are read from, with each row's target word
 * and each column's source word. */
#include "align.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int rows, cols;
    double *m;              /* [rows, cols]: zero where a row or column belongs to no word */
    const int *row_word;    /* [rows] target word, or -1 */
    const int *col_word;    /* [cols] source word, or -1 */
    int *identity;          /* word level: row_word / col_word point here */
} grid;

static void grid_free(grid *g) {
    free(g->m);
    free(g->identity);
}

/* Piece level: A as it is, with rows and columns of no word zeroed. Word level ("words"):
 * the sum over both words' pieces, in double. 0, or -1 when out of memory. */
static int grid_build(const attend_view *v, const float *A, int T, int S, const attend_words *src,
                      const attend_words *tgt, grid *g) {
    memset(g, 0, sizeof *g);
    const int words = v->words;
    g->rows = words ? tgt->n_words : T, g->cols = words ? src->n_words : S;
    const int n_id = g->rows > g->cols ? g->rows : g->cols;
    g->m = calloc((size_t)g->rows * g->cols + 1, sizeof(double));
    g->identity = malloc(sizeof(int) * ((size_t)n_id + 1));
    if (!g->m || !g->identity) {
        grid_free(g);
        return -1;
    }
    for (int i = 0; i < n_id; i++) g->identity[i] = i;
    g->row_word = words ? g->identity : tgt->word_of;
    g->col_word = words ? g->identity : src->word_of;
    for (int t = 0; t < T; t++) {
        const int tw = tgt->word_of[t];
        for (int j = 0; tw >= 0 && j < S; j++) {
            const int sw = src->word_of[j];
            if (sw < 0) continue;
            if (words) g->m[(size_t)tw * g->cols + sw] += A[(size_t)t * S + j];
            else g->m[(size_t)t * g->cols + j] = A[(size_t)t * S + j];
        }
    }
    return 0;
}

static double at(const grid *g, int r, int c) { return g->m[(size_t)r * g->cols + c]; }

/* The column of row r's largest positive weight (ties to the first), or -1. */
static int row_best(const grid *g, int r) {
    int best = -1;
    double bv = 0.0;
    for (int c = 0; c < g->cols; c++)
        if (at(g, r, c) > bv) bv = at(g, r, c), best = c;
    return best;
}

/* The row of column c's largest positive weight (ties to the first), or -1. */
static int col_best(const grid *g, int c) {
    int best = -1;
    double bv = 0.0;
    for (int r = 0; r < g->rows; r++)
        if (at(g, r, c) > bv) bv = at(g, r, c), best = r;
    return best;
}

/* on[r * cols + c] = 1 for the links chosen on the grid. */
static void pick_argmax(const grid *g, unsigned char *on) {
    for (int r = 0; r < g->rows; r++) {
        int c = row_best(g, r);
        if (c >= 0) on[(size_t)r * g->cols + c] = 1;
    }
}

static void pick_mutual(const grid *g, unsigned char *on) {
    for (int r = 0; r < g->rows; r++) {
        int c = row_best(g, r);
        if (c >= 0 && col_best(g, c) == r) on[(size_t)r * g->cols + c] = 1;
    }
}

/* Does (r, c) hold more than half of its row's or of its column's weight? */
static int strong(const grid *g, const double *row_sum, const double *col_sum, int r, int c) {
    const double w = at(g, r, c);
    return w > 0.0 && (w > 0.5 * row_sum[r] || w > 0.5 * col_sum[c]);
}

/* Grow the mutual links as grow-diag grows the intersection of two directions: a neighbour
 * (the eight around a link) joins when it is strong (above) and its row or its column has no
 * link yet; passes repeat until none joins. Each pass visits the links it started with, in
 * (column, row) order, i.e. by source then target. 0, or -1 when out of memory. */
static int pick_grow(const grid *g, unsigned char *on) {
    static const int dr[8] = {0, -1, 0, 1, -1, 1, -1, 1}, dc[8] = {-1, 0, 1, 0, -1, -1, 1, 1};
    const size_t n = (size_t)g->rows * g->cols;
    double *row_sum = calloc((size_t)g->rows + 1, sizeof(double)), *col_sum = calloc((size_t)g->cols + 1, sizeof(double));
    int *row_links = calloc((size_t)g->rows + 1, sizeof(int)), *col_links = calloc((size_t)g->cols + 1, sizeof(int));
    unsigned char *before = malloc(n + 1);
    if (!row_sum || !col_sum || !row_links || !col_links || !before) {
        free(row_sum), free(col_sum), free(row_links), free(col_links), free(before);
        return -1;
    }
    pick_mutual(g, on);
    for (int r = 0; r < g->rows; r++)
        for (int c = 0; c < g->cols; c++) {
            row_sum[r] += at(g, r, c), col_sum[c] += at(g, r, c);
            if (on[(size_t)r * g->cols + c]) row_links[r]++, col_links[c]++;
        }
    for (int grew = 1; grew;) {
        grew = 0;
        memcpy(before, on, n);
        for (int c = 0; c < g->cols; c++)
            for (int r = 0; r < g->rows; r++) {
                if (!before[(size_t)r * g->cols + c]) continue;
                for (int k = 0; k < 8; k++) {
                    const int rr = r + dr[k], cc = c + dc[k];
                    if (rr < 0 || rr >= g->rows || cc < 0 || cc >= g->cols) continue;
                    if (on[(size_t)rr * g->cols + cc] || (row_links[rr] && col_links[cc])) continue;
                    if (!strong(g, row_sum, col_sum, rr, cc)) continue;
                    on[(size_t)rr * g->cols + cc] = 1;
                    row_links[rr]++, col_links[cc]++;
                    grew = 1;
                }
            }
    }
    free(row_sum), free(col_sum), free(row_links), free(col_links), free(before);
    return 0;
}

static int cmp_link(const void *a, const void *b) {
    const int *x = a, *y = b;
    return x[0] != y[0] ? (x[0] > y[0]) - (x[0] < y[0]) : (x[1] > y[1]) - (x[1] < y[1]);
}

/* Sort 2*k ints as (source, target) pairs and drop repeats; returns the new k. */
static int sort_unique(int *links, int k) {
    qsort(links, (size_t)k, 2 * sizeof(int), cmp_link);
    int u = 0;
    for (int i = 0; i < k; i++)
        if (u == 0 || cmp_link(links + 2 * i, links + 2 * (u - 1))) {
            links[2 * u] = links[2 * i];
            links[2 * u + 1] = links[2 * i + 1];
            u++;
        }
    return u;
}

/* ---------------------------------------------------------------------------------------
 * One link per target piece (attend_view_best) */

void attend_align_argmax(const float *A, int T, int S, const attend_words *src,
                         const attend_words *tgt, int *best) {
    for (int t = 0; t < T; t++) {
        best[t] = -1;
        if (tgt->word_of[t] < 0) continue;
        float bv = 0.0f; /* an all-zero row (the shifted view's last) links nothing */
        for (int j = 0; j < S; j++)
            if (src->word_of[j] >= 0 && A[(size_t)t * S + j] > bv) {
                bv = A[(size_t)t * S + j];
                best[t] = j;
            }
    }
}

/* The "words" item: for each target word, the source word with the largest sum of weights
 * over both words' pieces (in double; ties to the first); each of the target word's pieces
 * gets that source word's first piece. 0, or -1 when out of memory. */
static int align_words_best(const float *A, int T, int S, const attend_words *src, const attend_words *tgt,
                            int *best) {
    const int SW = src->n_words, TW = tgt->n_words;
    double *sum = calloc((size_t)SW * TW + 1, sizeof(double));
    int *first = malloc(sizeof(int) * ((size_t)SW + 1)), *pick = malloc(sizeof(int) * ((size_t)TW + 1));
    if (!sum || !first || !pick) {
        free(sum), free(first), free(pick);
        return -1;
    }
    for (int w = 0; w < SW; w++) first[w] = -1;
    for (int j = S - 1; j >= 0; j--)
        if (src->word_of[j] >= 0) first[src->word_of[j]] = j;
    for (int t = 0; t < T; t++)
        for (int j = 0; tgt->word_of[t] >= 0 && j < S; j++)
            if (src->word_of[j] >= 0) sum[(size_t)tgt->word_of[t] * SW + src->word_of[j]] += A[(size_t)t * S + j];
    for (int w = 0; w < TW; w++) {
        double bv = 0.0; /* nothing but zeros links nothing */
        pick[w] = -1;
        for (int x = 0; x < SW; x++)
            if (sum[(size_t)w * SW + x] > bv) bv = sum[(size_t)w * SW + x], pick[w] = x;
    }
    for (int t = 0; t < T; t++) best[t] = tgt->word_of[t] >= 0 && pick[tgt->word_of[t]] >= 0
                                              ? first[pick[tgt->word_of[t]]] : -1;
    free(sum), free(first), free(pick);
    return 0;
}

int attend_view_best(const attend_view *v, const float *A, int T, int S, const attend_words *src,
                     const attend_words *tgt, int *best) {
    if (!v->words) {
        attend_align_argmax(A, T, S, src, tgt, best);
        return 0;
    }
    return align_words_best(A, T, S, src, tgt, best);
}

int attend_align_links(const int *best, int T, const attend_words *src, const attend_words *tgt,
                       int *links) {
    int k = 0;
    for (int t = 0; t < T; t++) {
        if (best[t] < 0) continue;
        links[2 * k] = src->word_of[best[t]];
        links[2 * k + 1] = tgt->word_of[t];
        k++;
    }
    return sort_unique(links, k);
}

/* The links of grid g as v->links says: *links as attend_view_links gives them. */
static int grid_links(const attend_view *v, const grid *g, int **links) {
    const size_t n = (size_t)g->rows * g->cols;
    unsigned char *on = calloc(n + 1, 1);
    int *out = malloc(sizeof(int) * (2 * n + 1));
    int k = -1;
    *links = NULL;
    if (!on || !out) goto done;
    if (v->links == ATTEND_LINKS_GROW) {
        if (pick_grow(g, on)) goto done;
    } else if (v->links == ATTEND_LINKS_MUTUAL) {
        pick_mutual(g, on);
    } else {
        pick_argmax(g, on);
    }
    k = 0;
    for (int r = 0; r < g->rows; r++)
        for (int c = 0; c < g->cols; c++)
            if (on[(size_t)r * g->cols + c]) {
                out[2 * k] = g->col_word[c];
                out[2 * k + 1] = g->row_word[r];
                k++;
            }
    k = sort_unique(out, k);
    *links = out;
    out = NULL;
done:
    free(on);
    free(out);
    return k;
}

int attend_view_links(const attend_view *v, const float *A, int T, int S, const attend_words *src,
                      const attend_words *tgt, int **links) {
    grid g;
    *links = NULL;
    if (grid_build(v, A, T, S, src, tgt, &g)) return -1;
    const int k = grid_links(v, &g, links);
    grid_free(&g);
    return k;
}

/* ---------------------------------------------------------------------------------------
 * Two directions (issue 38) */

/* Divide each row of m [rows, cols] by its sum (rows of zeros stay zero). */
static void rows_normalise(double *m, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        double sum = 0.0;
        for (int c = 0; c < cols; c++) sum += m[(size_t)r * cols + c];
        for (int c = 0; sum > 0.0 && c < cols; c++) m[(size_t)r * cols + c] /= sum;
    }
}

int attend_links_both(const attend_view *v, const float *A, int T, int S, const attend_words *src,
                      const attend_words *tgt, const float *B, int T2, int S2, const attend_words *rsrc,
                      const attend_words *rtgt, int **links) {
    *links = NULL;
    if (rtgt->n_words != src->n_words || rsrc->n_words != tgt->n_words) return -2;
    const attend_view words = {.words = 1};
    grid f, r;
    if (grid_build(&words, A, T, S, src, tgt, &f)) return -1;
    if (grid_build(&words, B, T2, S2, rsrc, rtgt, &r)) {
        grid_free(&f);
        return -1;
    }
    /* f: [target words, source words]; r: [source words, target words] */
    rows_normalise(f.m, f.rows, f.cols);
    rows_normalise(r.m, r.rows, r.cols);
    for (int t = 0; t < f.rows; t++)
        for (int s = 0; s < f.cols; s++) f.m[(size_t)t * f.cols + s] += r.m[(size_t)s * r.cols + t];
    const int k = grid_links(v, &f, links);
    grid_free(&f);
    grid_free(&r);
    return k;
}
