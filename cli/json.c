/* JSON strings, numbers and matrices for the CLI's outputs (attend align --format json,
 * attend explore). */
#include "json.h"

#include <stddef.h>
#include <stdio.h>

int json_utf8_len(const unsigned char *p) {
    if (p[0] < 0x80) return 1;
    int n = p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 && p[0] < 0xe0 ? 2 : 0;
    if (!n) return 0;
    for (int i = 1; i < n; i++)
        if ((p[i] & 0xc0) != 0x80) return 0;
    unsigned cp = n == 2 ? (p[0] & 0x1fu) << 6 | (p[1] & 0x3fu)
                : n == 3 ? (p[0] & 0x0fu) << 12 | (p[1] & 0x3fu) << 6 | (p[2] & 0x3fu)
                         : (p[0] & 0x07u) << 18 | (p[1] & 0x3fu) << 12 | (p[2] & 0x3fu) << 6 | (p[3] & 0x3fu);
    if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp < 0xe000))) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return n;
}

void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        int n = json_utf8_len(p);
        if (n == 0) {
            fputs("\\ufffd", f);
            p++;
        } else if (n > 1) {
            if (n == 3 && p[0] == 0xe2 && p[1] == 0x80 && (p[2] == 0xa8 || p[2] == 0xa9))
                fprintf(f, "\\u%04x", p[2] == 0xa8 ? 0x2028 : 0x2029);
            else
                fwrite(p, 1, (size_t)n, f);
            p += n;
        } else {
            if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
            else if (*p < 0x20 || *p == '<' || *p == '>' || *p == '&' || *p == 0x7f) fprintf(f, "\\u%04x", *p);
            else fputc(*p, f);
            p++;
        }
    }
    fputc('"', f);
}

void json_strs(FILE *f, const char *const *s, int n) {
    fputc('[', f);
    for (int i = 0; i < n; i++) {
        if (i) fputc(',', f);
        json_str(f, s[i]);
    }
    fputc(']', f);
}


void json_floats(FILE *f, const float *x, int n) {
    fputc('[', f);
    for (int i = 0; i < n; i++) fprintf(f, "%s%.7g", i ? ", " : "", (double)x[i]);
    fputc(']', f);
}

void json_matrix(FILE *f, const float *m, int rows, int cols, const char *indent) {
    fputc('[', f);
    for (int r = 0; r < rows; r++) {
        fprintf(f, "%s\n%s  ", r ? "," : "", indent);
        json_floats(f, m + (size_t)r * cols, cols);
    }
    fprintf(f, "\n%s]", indent);
}
