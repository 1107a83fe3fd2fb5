/* Attention heatmaps for terminals (Unicode shades + 256-colour ANSI, or plain ASCII) and
 * standalone SVG. */
#include "heatmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

heatmap_opts heatmap_default_opts(void) {
    heatmap_opts o;
    memset(&o, 0, sizeof o);
    o.width = 80;
    o.unicode = 1;
    return o;
}

/* ---------------------------------------------------------------------------------------
 * UTF-8 */

/* Decode one code point at s (not at its NUL); invalid bytes decode as U+FFFD, length 1. */
static int utf8_next(const char *s, uint32_t *cp) {
    const unsigned char *p = (const unsigned char *)s;
    uint32_t c = p[0];
    int need = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : -1;
    if (need < 0) {
        *cp = 0xfffd;
        return 1;
    }
    if (need) c &= 0x3fu >> need;
    for (int k = 1; k <= need; k++) {
        if ((p[k] & 0xc0) != 0x80) {
            *cp = 0xfffd;
            return 1;
        }
        c = (c << 6) | (p[k] & 0x3f);
    }
    *cp = c;
    return need + 1;
}

static int put_utf8(char *o, uint32_t c) {
    if (c < 0x80) { o[0] = (char)c; return 1; }
    if (c < 0x800) { o[0] = (char)(0xc0 | c >> 6); o[1] = (char)(0x80 | (c & 0x3f)); return 2; }
    if (c < 0x10000) {
        o[0] = (char)(0xe0 | c >> 12); o[1] = (char)(0x80 | ((c >> 6) & 0x3f));
        o[2] = (char)(0x80 | (c & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | c >> 18); o[1] = (char)(0x80 | ((c >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((c >> 6) & 0x3f)); o[3] = (char)(0x80 | (c & 0x3f));
    return 4;
}

/* Terminal cells of one code point: 0 for combining marks and controls, 2 for wide ones. */
static int cp_width(uint32_t c) {
    if (c < 0x20 || (c >= 0x7f && c < 0xa0)) return 0;
    if ((c >= 0x300 && c <= 0x36f) || (c >= 0x200b && c <= 0x200f) || c == 0xfe0f) return 0;
    if ((c >= 0x1100 && c <= 0x115f) || (c >= 0x2e80 && c <= 0xa4cf) || (c >= 0xac00 && c <= 0xd7a3) ||
        (c >= 0xf900 && c <= 0xfaff) || (c >= 0xfe30 && c <= 0xfe4f) || (c >= 0xff00 && c <= 0xff60) ||
        (c >= 0xffe0 && c <= 0xffe6) || (c >= 0x1f300 && c <= 0x1faff) || (c >= 0x20000 && c <= 0x3fffd))
        return 2;
    return 1;
}

int heatmap_text_width(const char *s) {
    int w = 0;
    uint32_t c;
    while (*s) {
        s += utf8_next(s, &c);
        w += cp_width(c);
    }
    return w;
}

/* Copy s into out (cap bytes) for display: "▁" becomes "_" unless unicode, controls become
 * "?", and the text is cut to maxw cells with a trailing "…" (or "~"). Returns its width. */
static int fit(const char *s, int maxw, int unicode, char *out, size_t cap) {
    size_t n = 0;
    int w = 0;
    uint32_t c;
    while (*s && n + 8 < cap) {
        const char *at = s;
        s += utf8_next(s, &c);
        if (c == 0x2581 && !unicode) c = '_';
        if (c < 0x20 || c == 0x7f) c = '?';
        int cw = cp_width(c);
        int more = *s != 0;
        if (w + cw > maxw || (more && w + cw == maxw && heatmap_text_width(s) > 0)) {
            if (w < maxw) {
                n += (size_t)put_utf8(out + n, unicode ? 0x2026 : '~');
                w++;
            }
            break;
        }
        (void)at;
        n += (size_t)put_utf8(out + n, c);
        w += cw;
    }
    out[n] = 0;
    return w;
}

static void spaces(FILE *f, int n) {
    for (int i = 0; i < n; i++) fputc(' ', f);
}

/* ---------------------------------------------------------------------------------------
 * Shading */

static const char *const SHADE_U[5] = {" ", "\xe2\x96\x91", "\xe2\x96\x92", "\xe2\x96\x93", "\xe2\x96\x88"};
static const char SHADE_A[] = " .:-=+*#%@";
/* 256-colour foregrounds from dark to bright, close to the viridis colour map */
static const int RAMP[12] = {238, 54, 55, 61, 25, 31, 37, 36, 35, 77, 148, 226};

/* x limited to [0, 1]; NaN (a hostile model's attention) becomes 0, never an index. */
static float clamp01(float x) { return x > 0 ? (x < 1 ? x : 1) : 0; }

static float matrix_max(const float *m, int n) {
    float mx = 0;
    for (int i = 0; i < n; i++) mx = m[i] > mx ? m[i] : mx;
    return mx > 0 ? mx : 1;
}

/* Write one cell of `chars` characters for value v of a matrix whose largest weight is mx. */
static void cell(FILE *f, const heatmap_opts *o, float v, float mx, int chars) {
    float x = v / mx;
    x = clamp01(x);
    if (!o->unicode) {
        char ch = SHADE_A[(int)(x * 9 + 0.5f)];
        for (int i = 0; i < chars; i++) fputc(ch, f);
        return;
    }
    const char *s = SHADE_U[(int)(x * 4 + 0.5f)];
    if (o->color) {
        /* colour carries the value; even weights too small for a shade stay visible */
        int k = (int)(x * 11 + 0.5f);
        if (s[0] == ' ' && v > 0) s = "\xc2\xb7"; /* · */
        fprintf(f, "\x1b[38;5;%dm", RAMP[k]);
    }
    for (int i = 0; i < chars; i++) fputs(s, f);
}

static void legend(FILE *f, const heatmap_opts *o, float mx) {
    if (o->unicode) {
        fputs("scale:", f);
        for (int k = 1; k <= 4; k++) {
            fputc(' ', f);
            if (o->color) cell(f, o, mx * k / 4.0f, mx, 2);
            else for (int i = 0; i < 2; i++) fputs(SHADE_U[k], f);
            if (o->color) fputs("\x1b[0m", f);
            fprintf(f, " %.2f", mx * k / 4.0f);
        }
        fputc('\n', f);
    } else {
        fprintf(f, "scale: .:-=+*#%%@ rising to %.2f (the largest weight)\n", mx);
    }
}

/* ---------------------------------------------------------------------------------------
 * Terminal: one panel */

#define LABEL_MAX 14 /* cells for row labels */
#define COL_LABEL_MAX 10
#define NOTE_MAX 26

/* The labels of columns c0..c1, written downwards, one glyph per line, after labw + 1 cells. */
static void column_labels_down(FILE *f, const heatmap_opts *o, int c0, int c1, int labw) {
    char buf[256];
    int colh = 1;
    for (int c = c0; c < c1; c++) {
        int w = fit(o->col_labels[c], COL_LABEL_MAX, o->unicode, buf, sizeof buf);
        colh = w > colh ? w : colh;
    }
    for (int k = 0; k < colh; k++) {
        spaces(f, labw + 1);
        int pending = 0; /* spaces owed, so lines carry no trailing blanks */
        for (int c = c0; c < c1; c++) {
            fit(o->col_labels[c], COL_LABEL_MAX, o->unicode, buf, sizeof buf);
            const char *s = buf;
            uint32_t cp = 0;
            int i = 0, got = 0;
            while (*s) {
                s += utf8_next(s, &cp);
                if (cp_width(cp) == 0) continue;
                if (i++ == k) {
                    got = 1;
                    break;
                }
            }
            if (!got) {
                pending += 2;
                continue;
            }
            spaces(f, pending);
            char g[8];
            g[put_utf8(g, cp)] = 0;
            fputs(g, f);
            pending = cp_width(cp) == 2 ? 0 : 1;
        }
        fputc('\n', f);
    }
}

/* Cells the widest row label takes (at least 1), cut to LABEL_MAX. */
static int row_label_width(const heatmap_opts *o) {
    char buf[256];
    int labw = 1;
    for (int r = 0; r < o->rows; r++) {
        int w = fit(o->row_labels[r], LABEL_MAX, o->unicode, buf, sizeof buf);
        labw = w > labw ? w : labw;
    }
    return labw;
}

static void text_single(FILE *f, const heatmap_opts *o, const heatmap_panel *p) {
    const int R = o->rows, C = o->cols, labw = row_label_width(o);
    char buf[256];
    int notew = 0;
    for (int r = 0; o->row_notes && r < R; r++) {
        int w = fit(o->row_notes[r], NOTE_MAX, o->unicode, buf, sizeof buf);
        notew = w > notew ? w : notew;
    }
    const float mx = matrix_max(p->m, R * C);
    int avail = o->width - labw - 1 - (notew ? notew + 1 : 0);
    int per = avail / 2;
    if (per < 4) per = 4;
    if (p->title) fprintf(f, "%s\n", p->title);
    for (int c0 = 0; c0 < C; c0 += per) {
        int c1 = c0 + per < C ? c0 + per : C;
        if (c0 > 0 || c1 < C) fprintf(f, "%scolumns %d-%d of %d:\n", c0 ? "\n" : "", c0, c1 - 1, C);
        column_labels_down(f, o, c0, c1, labw);
        for (int r = 0; r < R; r++) {
            int w = fit(o->row_labels[r], LABEL_MAX, o->unicode, buf, sizeof buf);
            fputs(buf, f);
            spaces(f, labw - w + 1);
            for (int c = c0; c < c1; c++) cell(f, o, p->m[(size_t)r * C + c], mx, 2);
            if (o->color) fputs("\x1b[0m", f);
            if (o->row_notes && c1 == C && o->row_notes[r][0]) {
                fit(o->row_notes[r], NOTE_MAX, o->unicode, buf, sizeof buf);
                fputc(' ', f);
                fputs(buf, f);
            }
            fputc('\n', f);
        }
    }
    legend(f, o, mx);
}

/* ---------------------------------------------------------------------------------------
 * Terminal: small multiples */

/* Which column is which source piece, wrapped to the width. */
static void column_key(FILE *f, const heatmap_opts *o) {
    char buf[256];
    int col = fprintf(f, "columns:");
    for (int c = 0; c < o->cols; c++) {
        char item[300];
        fit(o->col_labels[c], 20, o->unicode, buf, sizeof buf);
        snprintf(item, sizeof item, " %d %s", c, buf);
        int w = heatmap_text_width(item);
        if (col + w > o->width) {
            fputs("\n        ", f);
            col = 8;
        }
        fputs(item, f);
        col += w;
    }
    fputc('\n', f);
}

static void text_multi(FILE *f, const heatmap_opts *o, const heatmap_panel *p, int n) {
    const int R = o->rows, C = o->cols, labw = row_label_width(o);
    char buf[256];
    int titlew = 1;
    for (int i = 0; i < n; i++)
        if (p[i].title) {
            int w = heatmap_text_width(p[i].title);
            titlew = w > titlew ? w : titlew;
        }
    const int gap = 2;
    float mx = 0;
    for (int i = 0; i < n; i++) {
        float m = matrix_max(p[i].m, R * C);
        mx = m > mx ? m : mx;
    }
    /* a source longer than the width is drawn in blocks of columns, every panel per block */
    int avail = o->width - labw - 1;
    if (avail < 10) avail = 10;
    const int block = C <= avail ? C : avail;
    for (int c0 = 0; c0 < C; c0 += block) {
        const int c1 = c0 + block < C ? c0 + block : C, cw = c1 - c0;
        const int pw = cw > titlew ? cw : titlew;
        int per = (o->width - labw - 1 + gap) / (pw + gap);
        if (per < 1) per = 1;
        if (c0) fputc('\n', f);
        if (block < C) fprintf(f, "columns %d-%d of %d:\n", c0, c1 - 1, C);
        for (int i0 = 0; i0 < n; i0 += per) {
            int i1 = i0 + per < n ? i0 + per : n;
            if (i0) fputc('\n', f);
            spaces(f, labw + 1);
            for (int i = i0; i < i1; i++) {
                const char *t = p[i].title ? p[i].title : "";
                fputs(t, f);
                if (i + 1 < i1) spaces(f, pw - heatmap_text_width(t) + gap);
            }
            fputc('\n', f);
            spaces(f, labw + 1); /* column numbers, last digit, to find a column in the legend */
            for (int i = i0; i < i1; i++) {
                for (int c = c0; c < c1; c++) fputc('0' + c % 10, f);
                if (i + 1 < i1) spaces(f, pw - cw + gap);
            }
            fputc('\n', f);
            for (int r = 0; r < R; r++) {
                int w = fit(o->row_labels[r], LABEL_MAX, o->unicode, buf, sizeof buf);
                fputs(buf, f);
                spaces(f, labw - w + 1);
                for (int i = i0; i < i1; i++) {
                    for (int c = c0; c < c1; c++) cell(f, o, p[i].m[(size_t)r * C + c], mx, 1);
                    if (o->color) fputs("\x1b[0m", f);
                    if (i + 1 < i1) spaces(f, pw - cw + gap);
                }
                fputc('\n', f);
            }
        }
    }
    column_key(f, o);
    legend(f, o, mx);
}

void heatmap_text(FILE *f, const heatmap_opts *o, const heatmap_panel *p, int n) {
    if (n <= 0 || o->rows <= 0 || o->cols <= 0) return;
    if (n == 1) text_single(f, o, p);
    else text_multi(f, o, p, n);
}

/* ---------------------------------------------------------------------------------------
 * SVG */

/* Write s as XML character data, escaping markup and dropping what XML forbids. */
static void xml_text(FILE *f, const char *s) {
    uint32_t c;
    while (*s) {
        const char *at = s;
        int k = utf8_next(s, &c);
        s += k;
        if (c == '&') fputs("&amp;", f);
        else if (c == '<') fputs("&lt;", f);
        else if (c == '>') fputs("&gt;", f);
        else if (c == '"') fputs("&quot;", f);
        else if (c == 0xfffd && k == 1) fputs("\xef\xbf\xbd", f);
        else if (c < 0x20 && c != '\t') fputc('?', f);
        else if (c == 0xfffe || c == 0xffff) fputc('?', f);
        else fwrite(at, 1, (size_t)k, f);
    }
}

/* Viridis, sampled at five stops and interpolated linearly. x in [0, 1]. */
static void viridis(float x, int rgb[3]) {
    static const int stop[5][3] = {{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
    x = clamp01(x);
    float s = x * 4;
    int i = (int)s;
    if (i > 3) i = 3;
    float t = s - (float)i;
    for (int k = 0; k < 3; k++) rgb[k] = (int)(stop[i][k] + (stop[i + 1][k] - stop[i][k]) * t + 0.5f);
}

#define CELL 22
#define CHAR_W 7.5 /* rough width of a 12px label character */

/* Where an SVG's parts go: label room, each panel's size, the grid of panels. */
typedef struct {
    int left, top;    /* the grid's corner inside a panel: room for row and column labels */
    int pw, ph;       /* a panel's size */
    int per;          /* panels per row */
    int head;         /* room above the panels (the title) */
    float mx;         /* the largest weight drawn */
} svg_layout;

static svg_layout svg_layout_of(const heatmap_opts *o, const heatmap_panel *p, int n, const char *title) {
    const int R = o->rows, C = o->cols;
    int labw = 1, colh = 1;
    for (int r = 0; r < R; r++) {
        int w = heatmap_text_width(o->row_labels[r]);
        labw = w > labw ? w : labw;
    }
    for (int c = 0; c < C; c++) {
        int w = heatmap_text_width(o->col_labels[c]);
        colh = w > colh ? w : colh;
    }
    svg_layout l;
    l.mx = 0;
    for (int i = 0; i < n; i++) {
        float m = matrix_max(p[i].m, R * C);
        l.mx = m > l.mx ? m : l.mx;
    }
    l.left = (int)(labw * CHAR_W) + 12, l.top = (int)(colh * CHAR_W) + 34;
    l.pw = l.left + C * CELL + 24, l.ph = l.top + R * CELL + 16;
    l.per = n < 4 ? n : 4;
    l.head = title ? 30 : 8;
    return l;
}

/* One panel at (ox, oy): its title, the labels, the cells, and with marked (one panel) the
 * marked cells outlined. */
static void svg_panel(FILE *f, const heatmap_opts *o, const heatmap_panel *p, const svg_layout *l, int ox, int oy,
                      int marked) {
    const int R = o->rows, C = o->cols, left = l->left, top = l->top;
    fprintf(f, "<g transform=\"translate(%d,%d)\">\n", ox, oy);
    if (p->title) {
        fprintf(f, "<text x=\"%d\" y=\"14\" font-weight=\"bold\">", left);
        xml_text(f, p->title);
        fputs("</text>\n", f);
    }
    for (int c = 0; c < C; c++) { /* source labels, rotated, ending just above the grid */
        fprintf(f, "<text transform=\"translate(%d,%d) rotate(-90)\" dominant-baseline=\"middle\">",
                left + c * CELL + CELL / 2, top - 6);
        xml_text(f, o->col_labels[c]);
        fputs("</text>\n", f);
    }
    for (int r = 0; r < R; r++) {
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" dominant-baseline=\"middle\">",
                left - 6, top + r * CELL + CELL / 2);
        xml_text(f, o->row_labels[r]);
        fputs("</text>\n", f);
        for (int c = 0; c < C; c++) {
            float v = p->m[(size_t)r * C + c];
            int rgb[3];
            viridis(v / l->mx, rgb);
            fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#%02x%02x%02x\">"
                       "<title>%.4f</title></rect>\n",
                    left + c * CELL, top + r * CELL, CELL, CELL, rgb[0], rgb[1], rgb[2], v);
        }
    }
    if (marked && o->mark)
        for (int r = 0; r < R; r++)
            if (o->mark[r] >= 0 && o->mark[r] < C)
                fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
                           "stroke=\"#e8112d\" stroke-width=\"2\"/>\n",
                        left + o->mark[r] * CELL + 1, top + r * CELL + 1, CELL - 2, CELL - 2);
    fputs("</g>\n", f);
}

/* The colour scale right of the panels: 10 steps from 0 to the largest weight. */
static void svg_scale(FILE *f, const svg_layout *l) {
    const int sx = l->per * l->pw + 10, sy = l->head + l->top;
    for (int k = 0; k < 10; k++) {
        int rgb[3];
        viridis((9 - k) / 9.0f, rgb);
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"18\" height=\"16\" fill=\"#%02x%02x%02x\"/>\n",
                sx, sy + k * 16, rgb[0], rgb[1], rgb[2]);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" dominant-baseline=\"middle\">%.2f</text>\n", sx + 24, sy + 8, l->mx);
    fprintf(f, "<text x=\"%d\" y=\"%d\" dominant-baseline=\"middle\">0</text>\n", sx + 24, sy + 152);
    fprintf(f, "<text x=\"%d\" y=\"%d\">weight</text>\n", sx, sy - 8);
}

int heatmap_svg(FILE *f, const heatmap_opts *o, const heatmap_panel *p, int n, const char *title) {
    const svg_layout l = svg_layout_of(o, p, n, title);
    const int prow = (n + l.per - 1) / l.per, scale_w = 90;
    int W = l.per * l.pw + scale_w;
    const int Hh = l.head + prow * l.ph + 10;
    if (title && W < (int)(heatmap_text_width(title) * 9.5) + 20) W = (int)(heatmap_text_width(title) * 9.5) + 20;
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "font-family=\"DejaVu Sans, Arial, sans-serif\" font-size=\"12\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            W, Hh, W, Hh);
    if (title) {
        fputs("<text x=\"10\" y=\"20\" font-size=\"15\" font-weight=\"bold\">", f);
        xml_text(f, title);
        fputs("</text>\n", f);
    }
    for (int i = 0; i < n; i++) svg_panel(f, o, &p[i], &l, (i % l.per) * l.pw, l.head + (i / l.per) * l.ph, n == 1);
    svg_scale(f, &l);
    fputs("</svg>\n", f);
    return ferror(f) ? -1 : 0;
}
