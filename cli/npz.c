/* .npz writer: zip local headers + deflated .npy payloads, central directory at the end.
 *
 * The central directory is spilled to a temporary file as entries are written, so memory
 * does not grow with the number of arrays. Zip64 (APPNOTE 4.5.3): an entry that starts at
 * or beyond 4 GiB gets its offset in a zip64 extra field, and an archive with more than
 * 65,535 entries or a directory beyond 4 GiB ends with the zip64 end-of-central-directory
 * record and locator; Python's zipfile (numpy.load) and unzip read both. */
#include "npz.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#ifndef NPZ_ZIP64_LIMIT
#define NPZ_ZIP64_LIMIT 0xffffffffu /* offsets from here on need zip64 (tests lower it) */
#endif

struct npz_writer {
    FILE *f;
    FILE *cd; /* central directory records, copied after the entries at close */
    uint64_t n, cd_bytes;
    uint64_t pos;
    int failed;
    char msg[200];
};

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }

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
    z->cd = tmpfile();
    if (!z->cd) {
        snprintf(err, errlen, "temporary file for the zip directory: %s", strerror(errno));
        fclose(z->f);
        free(z);
        return NULL;
    }
    return z;
}

/* Mark the archive failed with a message; returns -1. */
static int fail(npz_writer *z, const char *msg, const char *what) {
    z->failed = 1;
    snprintf(z->msg, sizeof z->msg, msg, what);
    return -1;
}

/* The .npy file of one array: the npy v1.0 header, then the raw bytes. Sets *usize; NULL
 * after fail() when the array is too large or memory runs out. */
static uint8_t *npy_file(npz_writer *z, const char *name, const char *descr, int ndim, const int *shape,
                         const void *data, size_t nbytes, size_t *usize) {
    char header[256];
    int hl = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < ndim; i++) hl += snprintf(header + hl, sizeof header - (size_t)hl, "%d%s", shape[i], ndim == 1 ? "," : (i + 1 < ndim ? ", " : ""));
    hl += snprintf(header + hl, sizeof header - (size_t)hl, "), }");
    /* npy v1.0: magic(6) ver(2) len(2) header padded with spaces to 64 bytes, ends in \n */
    int total = 10 + hl + 1;
    int pad = (64 - total % 64) % 64;
    size_t hdr_len = (size_t)(hl + pad + 1);
    *usize = 10 + hdr_len + nbytes;
    if (*usize > 0xffffffffu - 1024) { /* one array; the archive itself may pass 4 GiB */
        fail(z, "array %s: over 4 GiB", name);
        return NULL;
    }
    uint8_t *raw = malloc(*usize);
    if (!raw) {
        fail(z, "out of memory writing array %s", name);
        return NULL;
    }
    memcpy(raw, "\x93NUMPY\x01\x00", 8);
    put16(raw + 8, (uint16_t)hdr_len);
    memcpy(raw + 10, header, (size_t)hl);
    memset(raw + 10 + hl, ' ', (size_t)pad);
    raw[10 + hdr_len - 1] = '\n';
    if (nbytes) memcpy(raw + 10 + hdr_len, data, nbytes);
    return raw;
}

/* raw[0..usize) deflated in one go (raw deflate, as zip wants); sets *csize. NULL when out of memory. */
static uint8_t *deflate_all(const uint8_t *raw, size_t usize, uint32_t *csize) {
    uLong bound = compressBound((uLong)usize);
    uint8_t *comp = malloc(bound);
    if (!comp) return NULL;
    z_stream s = {0};
    deflateInit2(&s, 1, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
    s.next_in = (Bytef *)raw;
    s.avail_in = (uInt)usize;
    s.next_out = comp;
    s.avail_out = (uInt)bound;
    deflate(&s, Z_FINISH);
    *csize = (uint32_t)s.total_out;
    deflateEnd(&s);
    return comp;
}

/* The entry's central directory record, spilled to z->cd, with the offset in a zip64 extra
 * field when it is past NPZ_ZIP64_LIMIT. 0, or -1 after fail(). */
static int write_cd_record(npz_writer *z, const char *fname, size_t fnl, uint32_t crc, uint32_t csize,
                           size_t usize, uint64_t offset) {
    const int far = offset >= NPZ_ZIP64_LIMIT;
    uint8_t ch[46 + 12] = {0};
    put32(ch, 0x02014b50);
    put16(ch + 4, far ? 45 : 20); /* made by / needed: 4.5 for zip64 */
    put16(ch + 6, far ? 45 : 20);
    put16(ch + 10, 8);
    put16(ch + 14, 0x21);
    put32(ch + 16, crc);
    put32(ch + 20, csize);
    put32(ch + 24, (uint32_t)usize);
    put16(ch + 28, (uint16_t)fnl);
    put16(ch + 30, far ? 12 : 0);
    put32(ch + 42, far ? 0xffffffffu : (uint32_t)offset);
    if (fwrite(ch, 1, 46, z->cd) != 46 || fwrite(fname, 1, fnl, z->cd) != fnl)
        return fail(z, "temporary file for the zip directory: %s", strerror(errno));
    if (far) {
        put16(ch + 46, 0x0001); /* zip64 extended information: the offset alone */
        put16(ch + 48, 8);
        put64(ch + 50, offset);
        if (fwrite(ch + 46, 1, 12, z->cd) != 12)
            return fail(z, "temporary file for the zip directory: %s", strerror(errno));
    }
    z->cd_bytes += 46 + fnl + (far ? 12 : 0);
    z->n++;
    return 0;
}

/* The local header, the name and the deflated bytes, into the archive. */
static void write_local(npz_writer *z, const char *fname, size_t fnl, uint32_t crc, uint32_t csize, size_t usize,
                        const uint8_t *comp) {
    uint8_t lh[30] = {0};
    put32(lh, 0x04034b50);
    put16(lh + 4, 20);
    put16(lh + 8, 8); /* deflate */
    put16(lh + 10, 0);
    put16(lh + 12, 0x21); /* 1980-01-01: fixed date, reproducible files */
    put32(lh + 14, crc);
    put32(lh + 18, csize);
    put32(lh + 22, (uint32_t)usize);
    put16(lh + 26, (uint16_t)fnl);
    out(z, lh, 30);
    out(z, fname, fnl);
    out(z, comp, csize);
}

/* Add one file to the zip: npy header + raw bytes, deflated in one go. */
static int add_entry(npz_writer *z, const char *name, const char *descr, int ndim, const int *shape,
                     const void *data, size_t nbytes) {
    if (z->failed) return -1;
    size_t usize;
    uint8_t *raw = npy_file(z, name, descr, ndim, shape, data, nbytes, &usize);
    if (!raw) return -1;
    uint32_t csize;
    uint8_t *comp = deflate_all(raw, usize, &csize);
    const uint32_t crc = comp ? (uint32_t)crc32(crc32(0L, Z_NULL, 0), raw, (uInt)usize) : 0;
    free(raw);
    if (!comp) return fail(z, "out of memory writing array %s", name);
    char fname[300];
    const size_t fnl = (size_t)snprintf(fname, sizeof fname, "%s.npy", name);
    int rc = -1;
    if (fnl >= sizeof fname) {
        z->failed = 1;
        snprintf(z->msg, sizeof z->msg, "array name too long: %.40s...", name);
    } else if (write_cd_record(z, fname, fnl, crc, csize, usize, z->pos) == 0) {
        write_local(z, fname, fnl, crc, csize, usize, comp);
        rc = z->failed ? -1 : 0;
    }
    free(comp);
    return rc;
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
    const uint64_t cd_start = z->pos;
    char buf[1 << 16];
    rewind(z->cd);
    for (size_t got; (got = fread(buf, 1, sizeof buf, z->cd)) > 0;) out(z, buf, got);
    if (ferror(z->cd) && !z->failed) {
        z->failed = 1;
        snprintf(z->msg, sizeof z->msg, "reading back the zip directory: %s", strerror(errno));
    }
    fclose(z->cd);
    const int zip64 = z->n > 0xffff || cd_start >= NPZ_ZIP64_LIMIT || z->cd_bytes >= NPZ_ZIP64_LIMIT;
    if (zip64) {
        const uint64_t rec = z->pos;
        uint8_t r[56] = {0}, loc[20] = {0};
        put32(r, 0x06064b50); /* zip64 end of central directory record */
        put64(r + 4, 44);     /* its size after this field */
        put16(r + 12, 45);
        put16(r + 14, 45);
        put64(r + 24, z->n);
        put64(r + 32, z->n);
        put64(r + 40, z->cd_bytes);
        put64(r + 48, cd_start);
        out(z, r, 56);
        put32(loc, 0x07064b50); /* its locator */
        put64(loc + 8, rec);
        put32(loc + 16, 1);
        out(z, loc, 20);
    }
    uint8_t eocd[22] = {0};
    put32(eocd, 0x06054b50);
    put16(eocd + 8, (uint16_t)(z->n > 0xffff ? 0xffff : z->n));
    put16(eocd + 10, (uint16_t)(z->n > 0xffff ? 0xffff : z->n));
    put32(eocd + 12, z->cd_bytes >= NPZ_ZIP64_LIMIT ? 0xffffffffu : (uint32_t)z->cd_bytes);
    put32(eocd + 16, cd_start >= NPZ_ZIP64_LIMIT ? 0xffffffffu : (uint32_t)cd_start);
    out(z, eocd, 22);
    if (fclose(z->f) != 0 && !z->failed) {
        z->failed = 1;
        snprintf(z->msg, sizeof z->msg, "close failed: %s", strerror(errno));
    }
    int rc = z->failed ? -1 : 0;
    if (rc) snprintf(err, errlen, "%s", z->msg);
    free(z);
    return rc;
}
