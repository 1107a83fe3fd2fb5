/* Reading one .npy array (npy_read.h). The header is a Python dict literal; only the three
 * keys NumPy writes are accepted, and the data must be exactly as long as the shape says. */
#include "npy_read.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NPY_MAX_HEADER 65536

/* The value text after 'key': in the header dict, or NULL. */
static const char *header_value(const char *h, const char *key) {
    const char *k = strstr(h, key);
    if (!k) return NULL;
    k = strchr(k + strlen(key), ':');
    return k ? k + 1 : NULL;
}

/* descr, fortran_order and shape from the header: 0, or -1 with err. */
static int parse_header(const char *h, int *elem, long long *dims, int *nd, char *err, size_t errlen) {
    const char *d = header_value(h, "'descr'"), *f = header_value(h, "'fortran_order'");
    const char *s = header_value(h, "'shape'");
    if (!d || !f || !s) {
        snprintf(err, errlen, "not a .npy header (descr, fortran_order and shape needed)");
        return -1;
    }
    while (*d == ' ') d++;
    if (!strncmp(d, "'<f4'", 5)) *elem = 4;
    else if (!strncmp(d, "'<f8'", 5)) *elem = 8;
    else {
        snprintf(err, errlen, "unsupported dtype %.8s (float32 or float64, little-endian)", d);
        return -1;
    }
    while (*f == ' ') f++;
    if (strncmp(f, "False", 5)) {
        snprintf(err, errlen, "Fortran-ordered arrays are not supported");
        return -1;
    }
    while (*s == ' ') s++;
    if (*s++ != '(') goto bad_shape;
    *nd = 0;
    for (;;) {
        while (*s == ' ' || *s == ',') s++;
        if (*s == ')') break;
        char *end;
        const long long v = strtoll(s, &end, 10);
        if (end == s || v < 0 || v > (1LL << 31) || *nd == 2) goto bad_shape;
        dims[(*nd)++] = v;
        s = end;
    }
    if (*nd >= 1) return 0;
bad_shape:
    snprintf(err, errlen, "unsupported shape (one or two dimensions)");
    return -1;
}

static int read_header(FILE *f, char *h, char *err, size_t errlen) {
    unsigned char pre[12];
    if (fread(pre, 1, 8, f) != 8 || memcmp(pre, "\x93NUMPY", 6) || pre[6] < 1 || pre[6] > 3) {
        snprintf(err, errlen, "not a .npy file (magic or version)");
        return -1;
    }
    const int width = pre[6] >= 2 ? 4 : 2; /* the header length's bytes, little-endian */
    if (fread(pre + 8, 1, (size_t)width, f) != (size_t)width) {
        snprintf(err, errlen, "truncated header");
        return -1;
    }
    uint32_t n = 0;
    for (int i = width - 1; i >= 0; i--) n = n << 8 | pre[8 + i];
    if (n == 0 || n >= NPY_MAX_HEADER || fread(h, 1, n, f) != n) {
        snprintf(err, errlen, "header of %u bytes: truncated or too long", n);
        return -1;
    }
    h[n] = 0;
    return 0;
}

int npy_read_f32(const char *path, float **data, int *rows, int *cols, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    char *h = malloc(NPY_MAX_HEADER);
    void *raw = NULL;
    int elem = 0, nd = 0, rc = -1;
    long long dims[2] = {0, 0};
    *data = NULL;
    if (!f || !h) {
        snprintf(err, errlen, "%s: cannot open", path);
        goto done;
    }
    if (read_header(f, h, err, errlen) || parse_header(h, &elem, dims, &nd, err, errlen)) goto done;
    const long long r = nd == 2 ? dims[0] : 1, c = nd == 2 ? dims[1] : dims[0];
    if (r * c == 0 || r * c > (1LL << 30)) {
        snprintf(err, errlen, "shape (%lld, %lld): empty or too large", r, c);
        goto done;
    }
    raw = malloc((size_t)(r * c) * (size_t)elem);
    *data = malloc(sizeof(float) * (size_t)(r * c));
    if (!raw || !*data) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    if (fread(raw, (size_t)elem, (size_t)(r * c), f) != (size_t)(r * c) || fgetc(f) != EOF) {
        snprintf(err, errlen, "the data is not the %lld values the shape says", r * c);
        goto done;
    }
    for (long long i = 0; i < r * c; i++) {
        double v;
        if (elem == 4) {
            float x;
            memcpy(&x, (char *)raw + 4 * i, 4);
            v = x;
        } else {
            memcpy(&v, (char *)raw + 8 * i, 8);
        }
        (*data)[i] = (float)v;
    }
    *rows = (int)r, *cols = (int)c;
    rc = 0;
done:
    if (rc) {
        free(*data);
        *data = NULL;
        char inner[256];
        snprintf(inner, sizeof inner, "%s", err);
        if (strncmp(inner, path, strlen(path))) snprintf(err, errlen, "%s: %s", path, inner);
    }
    free(raw);
    free(h);
    if (f) fclose(f);
    return rc;
}
