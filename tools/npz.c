/* .npz writer: zip local headers + deflated .npy payloads, central directory at the end. */
#include "npz.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

typedef struct {
    char *name;
    uint32_t crc, csize, usize, offset;
} entry;

struct npz_writer {
    FILE *f;
    entry *e;
    int n, cap;
    uint64_t pos;
    int failed;
    char msg[200];
};

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }

static void out(npz_writer *z, const void *p, size_t n) {
    if (z->failed) return;
    if (fwrite(p, 1, n, z->f) != n) {
        z->failed = 1;
        snprintf(z->msg, sizeof z->msg, "write failed: %s", strerror(errno));
    }
    z->pos += n;
}

npz_writer *npz_open(const char *path, char *err, size_t errlen) {
    npz_writer *z = calloc(1, sizeof *z);
    if (!z) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    z->f = fopen(path, "wb");
    if (!z->f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        free(z);
        return NULL;
    }
    return z;
}

/* Add one file to the zip: npy header + raw bytes, deflated in one go. */
static int add_entry(npz_writer *z, const char *name, const char *descr, int ndim, const int *shape,
                     const void *data, size_t nbytes) {
    if (z->failed) return -1;
    char header[256];
    int hl = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < ndim; i++) hl += snprintf(header + hl, sizeof header - (size_t)hl, "%d%s", shape[i], ndim == 1 ? "," : (i + 1 < ndim ? ", " : ""));
    hl += snprintf(header + hl, sizeof header - (size_t)hl, "), }");
    /* npy v1.0: magic(6) ver(2) len(2) header padded with spaces to 64 bytes, ends in \n */
    int total = 10 + hl + 1;
    int pad = (64 - total % 64) % 64;
    size_t hdr_len = (size_t)(hl + pad + 1);
    size_t usize = 10 + hdr_len + nbytes;
    if (usize > 0xffffffffu - 1024 || z->pos > 0xffffffffu - 1024) {
        z->failed = 1;
        snprintf(z->msg, sizeof z->msg, "array %s: archive over 4 GiB (zip64 not supported)", name);
        return -1;
    }
    uint8_t *raw = malloc(usize);
    if (!raw) goto oom;
    memcpy(raw, "\x93NUMPY\x01\x00", 8);
    put16(raw + 8, (uint16_t)hdr_len);
    memcpy(raw + 10, header, (size_t)hl);
    memset(raw + 10 + hl, ' ', (size_t)pad);
    raw[10 + hdr_len - 1] = '\n';
    if (nbytes) memcpy(raw + 10 + hdr_len, data, nbytes);
    uLong bound = compressBound((uLong)usize);
    uint8_t *comp = malloc(bound);
    if (!comp) {
        free(raw);
        goto oom;
    }
    z_stream s = {0};
    deflateInit2(&s, 1, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY); /* raw deflate, as zip wants */
    s.next_in = raw;
    s.avail_in = (uInt)usize;
    s.next_out = comp;
    s.avail_out = (uInt)bound;
    deflate(&s, Z_FINISH);
    uint32_t csize = (uint32_t)s.total_out;
    deflateEnd(&s);
    uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), raw, (uInt)usize);
    free(raw);
    if (z->n == z->cap) {
        int cap = z->cap ? 2 * z->cap : 64;
        entry *e = realloc(z->e, sizeof(entry) * (size_t)cap);
        if (!e) {
            free(comp);
            goto oom;
        }
        z->e = e;
        z->cap = cap;
    }
    size_t fnl = strlen(name) + 4;
    entry *e = &z->e[z->n++];
    e->name = malloc(fnl + 1);
    if (!e->name) {
        z->n--;
        free(comp);
        goto oom;
    }
    snprintf(e->name, fnl + 1, "%s.npy", name);
    e->crc = crc;
    e->csize = csize;
    e->usize = (uint32_t)usize;
    e->offset = (uint32_t)z->pos;
    uint8_t lh[30] = {0};
    put32(lh, 0x04034b50);
    put16(lh + 4, 20);
    put16(lh + 8, 8); /* deflate */
    put16(lh + 10, 0);
    put16(lh + 12, 0x21); /* 1980-01-01: fixed date, reproducible files */
    put32(lh + 14, crc);
    put32(lh + 18, csize);
    put32(lh + 22, e->usize);
    put16(lh + 26, (uint16_t)fnl);
    out(z, lh, 30);
    out(z, e->name, fnl);
    out(z, comp, csize);
    free(comp);
    return z->failed ? -1 : 0;
oom:
    z->failed = 1;
    snprintf(z->msg, sizeof z->msg, "out of memory writing array %s", name);
    return -1;
}

int npz_add_f32(npz_writer *z, const char *name, const float *data, int ndim, const int *shape) {
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    return add_entry(z, name, "<f4", ndim, shape, data, n * 4);
}

int npz_add_i32(npz_writer *z, const char *name, const int32_t *data, int ndim, const int *shape) {
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
    return add_entry(z, name, "<i4", ndim, shape, data, n * 4);
}

/* UTF-8 -> code points; invalid bytes become U+FFFD. Returns count written (<= max). */
static int utf8_to_u32(const char *s, uint32_t *outp, int max) {
    const unsigned char *p = (const unsigned char *)s;
    int n = 0;
    while (*p && n < max) {
        uint32_t c = *p, need = 0, min = 0;
        if (c < 0x80) need = 0;
        else if ((c & 0xe0) == 0xc0) { need = 1; c &= 0x1f; min = 0x80; }
        else if ((c & 0xf0) == 0xe0) { need = 2; c &= 0x0f; min = 0x800; }
        else if ((c & 0xf8) == 0xf0) { need = 3; c &= 0x07; min = 0x10000; }
        else { outp[n++] = 0xfffd; p++; continue; }
        uint32_t k;
        for (k = 1; k <= need; k++) {
            if ((p[k] & 0xc0) != 0x80) break;
            c = (c << 6) | (p[k] & 0x3f);
        }
        if (k <= need || c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) {
            outp[n++] = 0xfffd;
            p++;
            continue;
        }
        outp[n++] = c;
        p += need + 1;
    }
    return n;
}

int npz_add_str(npz_writer *z, const char *name, const char *const *strs, int n) {
    int width = 1;
    for (int i = 0; i < n; i++) {
        int l = (int)strlen(strs[i]);
        if (l > width) width = l; /* code points <= bytes */
    }
    uint32_t *buf = calloc((size_t)n * width + 1, 4);
    if (!buf) {
        z->failed = 1;
        snprintf(z->msg, sizeof z->msg, "out of memory writing array %s", name);
        return -1;
    }
    int used = 1;
    for (int i = 0; i < n; i++) {
        int k = utf8_to_u32(strs[i], buf + (size_t)i * width, width);
        if (k > used) used = k;
    }
    /* re-pack to the real width */
    uint32_t *packed = calloc((size_t)n * used + 1, 4);
    if (!packed) {
        free(buf);
        z->failed = 1;
        return -1;
    }
    for (int i = 0; i < n; i++) memcpy(packed + (size_t)i * used, buf + (size_t)i * width, 4 * (size_t)used);
    free(buf);
    char descr[32];
    snprintf(descr, sizeof descr, "<U%d", used);
    int shape[1] = {n};
    int rc = add_entry(z, name, descr, 1, shape, packed, (size_t)n * used * 4);
    free(packed);
    return rc;
}

int npz_close(npz_writer *z, char *err, size_t errlen) {
    uint64_t cd_start = z->pos;
    for (int i = 0; i < z->n; i++) {
        entry *e = &z->e[i];
        uint8_t ch[46] = {0};
        put32(ch, 0x02014b50);
        put16(ch + 4, 20);
        put16(ch + 6, 20);
        put16(ch + 10, 8);
        put16(ch + 14, 0x21);
        put32(ch + 16, e->crc);
        put32(ch + 20, e->csize);
        put32(ch + 24, e->usize);
        put16(ch + 28, (uint16_t)strlen(e->name));
        put32(ch + 42, e->offset);
        out(z, ch, 46);
        out(z, e->name, strlen(e->name));
    }
    uint8_t eocd[22] = {0};
    put32(eocd, 0x06054b50);
    put16(eocd + 8, (uint16_t)(z->n > 0xffff ? 0xffff : z->n));
    put16(eocd + 10, (uint16_t)(z->n > 0xffff ? 0xffff : z->n));
    put32(eocd + 12, (uint32_t)(z->pos - cd_start));
    put32(eocd + 16, (uint32_t)cd_start);
    out(z, eocd, 22);
    if (z->n > 0xffff && !z->failed) {
        z->failed = 1;
        snprintf(z->msg, sizeof z->msg, "more than 65535 arrays (zip64 not supported)");
    }
    if (fclose(z->f) != 0 && !z->failed) {
        z->failed = 1;
        snprintf(z->msg, sizeof z->msg, "close failed: %s", strerror(errno));
    }
    int rc = z->failed ? -1 : 0;
    if (rc) snprintf(err, errlen, "%s", z->msg);
    for (int i = 0; i < z->n; i++) free(z->e[i].name);
    free(z->e);
    free(z);
    return rc;
}
