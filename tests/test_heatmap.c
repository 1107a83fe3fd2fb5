/* Unit tests of cli/heatmap.c: a known matrix draws the expected shades in ASCII, and
 * matrices a hostile or broken model can produce (NaN, infinity, negative weights, all
 * zeros) draw in every mode (ASCII, Unicode, colour, several panels, SVG) without reading
 * outside the shade tables; NaN draws as the empty shade.
 * Run: build/tests/test_heatmap (prints "N passed, 0 failed"; exit status 1 on failure). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/heatmap.h"

#include "check.h"

enum { R = 2, C = 3 };
static const char *const ROWS[R] = {"▁the", "▁dog"};
static const char *const COLS[C] = {"▁der", "▁Hund", "</s>"};

/* Draw into a memory buffer; returns it (caller frees). */
static char *draw(const heatmap_opts *o, const float *m, int panels, int svg) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    heatmap_panel p[3];
    for (int i = 0; i < panels; i++) p[i] = (heatmap_panel){"head", m};
    if (svg) CHECK(heatmap_svg(f, o, p, panels, "title") == 0);
    else heatmap_text(f, o, p, panels);
    fclose(f);
    return buf;
}

/* The ASCII row of target row r: the text after its label, up to the end of the line. */
static const char *row_line(const char *out, const char *label) {
    const char *at = strstr(out, label);
    return at ? at + strlen(label) : "";
}

/* Every fill="..." in an SVG is a #rrggbb colour (a NaN once could become any index). */
static int fills_are_colours(const char *svg) {
    int n = 0;
    for (const char *at = strstr(svg, "fill=\""); at; at = strstr(at + 1, "fill=\"")) {
        const char *v = at + 6;
        if (!strncmp(v, "none\"", 5) || !strncmp(v, "white\"", 6) || !strncmp(v, "url(", 4)) continue;
        if (v[0] != '#' || strspn(v + 1, "0123456789abcdefABCDEF") != 6 || v[7] != '"') return 0;
        n++;
    }
    return n > 0;
}

static void test_known_shades(void) {
    const float m[R * C] = {1.0f, 0.0f, 0.5f, 0.0f, 1.0f, 0.0f};
    heatmap_opts o = heatmap_default_opts();
    o.rows = R, o.cols = C, o.row_labels = ROWS, o.col_labels = COLS, o.unicode = 0;
    char *out = draw(&o, m, 1, 0);
    /* full weight is the densest ASCII shade, zero is blank */
    const char *r0 = row_line(out, "_the");
    CHECK(strstr(r0, "@@") != NULL);
    CHECK(strchr(out, '@') != NULL && strstr(row_line(out, "_dog"), "@@") != NULL);
    free(out);
}

static void test_hostile_values(void) {
    const float bad[][R * C] = {
        {NAN, 0.5f, 1.0f, NAN, NAN, NAN},            /* NaN among weights */
        {INFINITY, 1.0f, 0.0f, 0.2f, -INFINITY, 1},  /* infinities: the max is inf */
        {-1.0f, -0.5f, -2.0f, -0.1f, -3.0f, -1.0f},  /* all negative: max falls back to 1 */
        {0, 0, 0, 0, 0, 0},                          /* nothing to shade */
        {NAN, NAN, NAN, NAN, NAN, NAN},
    };
    for (size_t b = 0; b < sizeof bad / sizeof *bad; b++)
        for (int mode = 0; mode < 5; mode++) {
            heatmap_opts o = heatmap_default_opts();
            o.rows = R, o.cols = C, o.row_labels = ROWS, o.col_labels = COLS;
            o.unicode = mode != 0, o.color = mode >= 2;
            int panels = mode == 3 ? 3 : 1, svg = mode == 4;
            char *out = draw(&o, bad[b], panels, svg);
            CHECK(out && strlen(out) > 20);
            if (svg) CHECK(strstr(out, "</svg>") != NULL && fills_are_colours(out));
            free(out);
        }
    /* NaN draws as the empty shade: in ASCII the first row of the all-NaN matrix is blank */
    heatmap_opts o = heatmap_default_opts();
    o.rows = R, o.cols = C, o.row_labels = ROWS, o.col_labels = COLS, o.unicode = 0;
    char *out = draw(&o, bad[4], 1, 0);
    const char *r0 = row_line(out, "_the");
    size_t k = strspn(r0, " |");
    CHECK(r0[0] && (r0[k] == '\n' || r0[k] == 0 || r0[k] == '|'));
    free(out);
}

/* Several panels of a source wider than the terminal: drawn in blocks of columns, no line
 * wider than o.width, every column and every panel drawn. */
static void test_wide_small_multiples(void) {
    enum { WR = 3, WC = 100, PANELS = 4 };
    static float m[WR * WC];
    for (int i = 0; i < WR * WC; i++) m[i] = (float)(i % 7) / 6;
    const char *rows[WR] = {"a", "b", "c"};
    const char *cols[WC];
    for (int c = 0; c < WC; c++) cols[c] = "x";
    heatmap_opts o = heatmap_default_opts();
    o.rows = WR, o.cols = WC, o.row_labels = rows, o.col_labels = cols, o.unicode = 0, o.width = 80;
    heatmap_panel p[PANELS];
    for (int i = 0; i < PANELS; i++) p[i] = (heatmap_panel){"head", m};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    heatmap_text(f, &o, p, PANELS);
    fclose(f);
    int widest = 0, heads = 0, row_a = 0, cells = 0;
    for (char *line = buf, *end; *line; line = end + 1) {
        end = strchr(line, '\n');
        if (!end) break;
        const int w = (int)(end - line);
        widest = w > widest ? w : widest;
        if (!strncmp(line, "a ", 2)) { /* a matrix row: count its cells (after the label) */
            row_a++;
            for (char *c = line + 2; c < end; c++) cells += *c != ' ';
        }
        for (char *h = line; (h = strstr(h, "head")) && h < end; h += 4) heads++;
    }
    CHECKF(widest <= 80, "a line is %d wide, the width is 80", widest);
    CHECKF(strstr(buf, "columns 0-") != NULL, "no column block header");
    CHECKF(heads >= 2 * PANELS, "%d panel titles drawn, want every panel in every block", heads);
    /* row a of every panel in every block: its non-blank cells add up to PANELS x row a's */
    int want = 0;
    for (int c = 0; c < WC; c++) want += (m[c] > 0.05f);
    CHECKF(cells == PANELS * want, "row a drew %d shaded cells, want %d", cells, PANELS * want);
    free(buf);
}

int main(void) {
    test_known_shades();
    test_hostile_values();
    test_wide_small_multiples();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
