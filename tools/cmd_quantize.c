/* attend quantize: rewrite an f32/f16 checkpoint with int8 matrices (per-row scales), the
 * same bytes `export_marian.py --dtype int8` writes for the same weights. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../engine/kernels.h"
#include "../model/marian.h"
#include "cli.h"

static void usage_quantize(FILE *f) {
    fprintf(f,
            "usage: attend quantize IN.gguf OUT.gguf\n"
            "\n"
            "Write OUT with every weight matrix of IN stored as int8 with one f32 scale per row\n"
            "(format version 2; see weights/FORMAT.md). Vectors stay f32. IN must be an f32 or\n"
            "f16 attend checkpoint; OUT is what export_marian.py --dtype int8 would write.\n");
}

/* ---------------------------------------------------------------------------------------
 * A small GGUF writer over an opened file: keys copied byte for byte (format version and
 * CRCs replaced, the metadata CRC recomputed as the last key), tensors supplied as blobs. */

typedef struct {
    char *name;
    uint32_t n_dims, type;
    uint64_t ne[4];
    void *data; /* owned */
    uint64_t nbytes;
} out_tensor;

static const uint64_t scalar_bytes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

static void put(FILE *f, const void *p, size_t n) { fwrite(p, 1, n, f); }
static void put_u32(FILE *f, uint32_t v) { put(f, &v, 4); }
static void put_u64(FILE *f, uint64_t v) { put(f, &v, 8); }
static void put_str(FILE *f, const char *s, uint64_t n) {
    put_u64(f, n);
    put(f, s, n);
}

/* Bytes of a key's value as stored after its type (arrays: after elem_type and count). */
static uint64_t value_bytes(const gguf_kv *kv) {
    if (kv->type == GGUF_STRING) {
        uint64_t n;
        memcpy(&n, kv->data, 8);
        return 8 + n;
    }
    if (kv->type == GGUF_ARRAY) {
        if (kv->elem_type == GGUF_STRING) {
            uint64_t s = 0;
            for (uint64_t i = 0; i < kv->count; i++) s += 8 + kv->strings[i].len;
            return s;
        }
        return kv->count * scalar_bytes[kv->elem_type];
    }
    return scalar_bytes[kv->type];
}

static int write_gguf(const char *path, const gguf_file *in, const out_tensor *t, int nt, char *err,
                      size_t errlen) {
    uint32_t align = 32;
    const gguf_kv *akv = gguf_find_kv(in, "general.alignment");
    if (akv && akv->type == GGUF_U32) memcpy(&align, akv->data, 4);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        snprintf(err, errlen, "cannot write %.400s", tmp);
        return -1;
    }
    /* the keys go to memory first: the metadata CRC covers their bytes */
    FILE *const file = f;
    char *kvbuf = NULL;
    size_t kvlen = 0;
    f = open_memstream(&kvbuf, &kvlen);
    if (!f) {
        fclose(file);
        remove(tmp);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    uint64_t n_kv = 0;
    for (uint64_t i = 0; i < gguf_kv_count(in); i++) {
        const gguf_kv *kv = gguf_kv_at(in, i);
        if (kv->key.len == 21 && !memcmp(kv->key.ptr, "attend.metadata_crc32", 21)) continue;
        n_kv++;
        put_str(f, kv->key.ptr, kv->key.len);
        put_u32(f, kv->type);
        if (kv->key.len == 21 && !memcmp(kv->key.ptr, "attend.format_version", 21)) {
            put_u32(f, 2);
        } else if (kv->key.len == 19 && !memcmp(kv->key.ptr, "attend.tensor_crc32", 19)) {
            put_u32(f, GGUF_U32);
            put_u64(f, (uint64_t)nt);
            for (int j = 0; j < nt; j++) {
                uLong c = crc32(0L, Z_NULL, 0);
                const uint8_t *p = t[j].data;
                for (uint64_t left = t[j].nbytes; left;) {
                    uInt n = left > (1u << 30) ? (1u << 30) : (uInt)left;
                    c = crc32(c, p, n);
                    p += n;
                    left -= n;
                }
                put_u32(f, (uint32_t)c);
            }
        } else {
            if (kv->type == GGUF_ARRAY) {
                put_u32(f, kv->elem_type);
                put_u64(f, kv->count);
            }
            put(f, kv->data, value_bytes(kv));
        }
    }
    int bad = fclose(f) != 0;
    f = file;
    put(f, "GGUF", 4);
    put_u32(f, 3);
    put_u64(f, (uint64_t)nt);
    put_u64(f, n_kv + 1);
    if (kvbuf) put(f, kvbuf, kvlen);
    static const char meta_key[] = "attend.metadata_crc32";
    put_str(f, meta_key, sizeof meta_key - 1);
    put_u32(f, GGUF_U32);
    put_u32(f, (uint32_t)crc32(crc32(0L, Z_NULL, 0), (const Bytef *)kvbuf, (uInt)kvlen));
    free(kvbuf);
    uint64_t off = 0;
    for (int j = 0; j < nt; j++) {
        put_str(f, t[j].name, strlen(t[j].name));
        put_u32(f, t[j].n_dims);
        for (uint32_t d = 0; d < t[j].n_dims; d++) put_u64(f, t[j].ne[d]);
        put_u32(f, t[j].type);
        put_u64(f, off);
        off += (t[j].nbytes + align - 1) / align * align;
    }
    static const char zeros[65536];
    long pos = ftell(f);
    put(f, zeros, (size_t)((align - pos % align) % align));
    for (int j = 0; j < nt; j++) {
        put(f, t[j].data, t[j].nbytes);
        put(f, zeros, (size_t)((align - t[j].nbytes % align) % align));
    }
    bad |= ferror(f);
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path)) {
        remove(tmp);
        snprintf(err, errlen, "writing %.400s failed", path);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * quantize */

/* Element i of an f32/f16 tensor. */
static float element(const gguf_tensor *t, uint64_t i) {
    return t->type == GGUF_T_F16 ? at_f16_to_f32_1(((const uint16_t *)t->data)[i]) : ((const float *)t->data)[i];
}

/* Row r of a 2-D f32/f16 tensor (finite: the loader checked) -> int8 + scale, exactly as
 * export_marian.quantize_rows: scale = max|w| / 127, q = rint(w / scale) in f32, clipped
 * to ±127. */
static void quantize_matrix(const gguf_tensor *t, int8_t *q, float *scale) {
    const uint64_t cols = t->ne[0], rows = t->ne[1];
    float *row = malloc(sizeof(float) * cols);
    for (uint64_t r = 0; row && r < rows; r++) {
        for (uint64_t c = 0; c < cols; c++) row[c] = element(t, r * cols + c);
        float amax = 0;
        for (uint64_t c = 0; c < cols; c++) amax = fabsf(row[c]) > amax ? fabsf(row[c]) : amax;
        const float s = amax / 127.0f, safe = s > 0 ? s : 1.0f;
        scale[r] = s;
        for (uint64_t c = 0; c < cols; c++) {
            float v = nearbyintf(row[c] / safe);
            q[r * cols + c] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
    }
    free(row);
}

int cmd_quantize(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        usage_quantize(stdout);
        return EXIT_OK;
    }
    const char *path[2];
    int n_paths = 0;
    for (int i = 1, opts = 1; i < argc; i++) {
        if (opts && !strcmp(argv[i], "--")) opts = 0;
        else if (opts && cli_is_option(argv[i])) return cli_unknown_option("quantize", argv[i]);
        else if (n_paths < 2) path[n_paths++] = argv[i];
        else n_paths = 3;
    }
    if (n_paths != 2) {
        fprintf(stderr, "attend quantize: needs IN.gguf and OUT.gguf (see --help)\n");
        return EXIT_USAGE;
    }
    char err[512];
    /* a whole, valid model, CRC-32s and finite weights included: a corrupted file is not
     * re-written with fresh checksums, and NaN is never converted to int8 (undefined) */
    marian_model *m = marian_load_verified(path[0], err, sizeof err);
    if (!m) {
        fprintf(stderr, "attend quantize: %s: %s\n", path[0], err);
        return EXIT_MODEL;
    }
    if (m->dtype == AT_I8) {
        fprintf(stderr, "attend quantize: %s is already int8\n", path[0]);
        marian_free(m);
        return EXIT_USAGE;
    }
    const gguf_file *in = m->file;
    const int n_in = (int)gguf_tensor_count(in);
    out_tensor *t = calloc((size_t)n_in * 2, sizeof *t);
    int nt = 0, status = EXIT_OK;
    for (int i = 0; t && i < n_in; i++) {
        const gguf_tensor *s = gguf_tensor_at(in, i);
        out_tensor *o = &t[nt++];
        o->name = strdup(s->name);
        o->n_dims = s->n_dims;
        memcpy(o->ne, s->ne, sizeof o->ne);
        if (s->n_dims == 2) { /* every matrix: int8 + scales; vectors stay f32 */
            o->type = GGUF_T_I8;
            o->nbytes = s->ne[0] * s->ne[1];
            o->data = malloc(o->nbytes);
            out_tensor *sc = &t[nt++];
            size_t nl = strlen(s->name) + 7;
            sc->name = malloc(nl);
            if (sc->name) snprintf(sc->name, nl, "%s.scale", s->name);
            sc->n_dims = 1;
            sc->ne[0] = s->ne[1];
            sc->type = GGUF_T_F32;
            sc->nbytes = 4 * s->ne[1];
            sc->data = malloc(sc->nbytes);
            if (!o->data || !sc->data || !sc->name) break;
            quantize_matrix(s, o->data, sc->data);
        } else {
            o->type = s->type;
            o->nbytes = s->nbytes;
            o->data = malloc(s->nbytes ? s->nbytes : 1);
            if (!o->data) break;
            memcpy(o->data, s->data, s->nbytes);
        }
        if (!o->name) break;
    }
    int complete = t && nt > 0 && t[nt - 1].data;
    for (int i = 0; complete && i < nt; i++) complete = t[i].data && t[i].name;
    if (!complete || (nt < n_in)) {
        fprintf(stderr, "attend quantize: out of memory\n");
        status = EXIT_FAIL;
    } else if (write_gguf(path[1], in, t, nt, err, sizeof err)) {
        fprintf(stderr, "attend quantize: %s\n", err);
        status = EXIT_IO;
    }
    for (int i = 0; t && i < nt; i++) {
        free(t[i].name);
        free(t[i].data);
    }
    free(t);
    marian_free(m);
    return status;
}
