/* Checking a loaded model's content (s2s_verify): the metadata's CRC-32, every tensor's
 * CRC-32 and that every weight is finite, reading the tensors in pieces on the pool's
 * threads and reporting the first bad one in file order. */
#include "load.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../engine/pool.h"

/* attend.metadata_crc32 (optional: older files lack it) must be the last key, a u32, and
 * match the bytes of every key/value pair before it. Returns 0, 1 if absent, -1 on error. */
static int verify_metadata(const s2s_model *m, char *err, size_t errlen) {
    const gguf_kv *kv = gguf_find_kv(m->file, "attend.metadata_crc32");
    if (!kv) return 1;
    if (kv->type != GGUF_U32) {
        s2s_fail(err, errlen, "key attend.metadata_crc32: expected u32, found %s", gguf_type_name(kv->type));
        return -1;
    }
    if (kv != gguf_kv_at(m->file, gguf_kv_count(m->file) - 1)) {
        s2s_fail(err, errlen, "key attend.metadata_crc32: not the last key (it covers the keys before it)");
        return -1;
    }
    uint32_t want, got = gguf_metadata_crc(m->file, kv);
    memcpy(&want, kv->data, 4);
    if (got != want) {
        s2s_fail(err, errlen, "metadata: CRC-32 %08x, file says %08x (corrupted keys, vocabulary or "
                 "tokenizer models)", got, want);
        return -1;
    }
    return 0;
}

/* Index of the first NaN or infinite element among elements [lo, hi) of an f32 or f16
 * tensor, or -1 (other types). The scan ORs exponent tests without branching so it
 * vectorizes: every load runs it. */
static int64_t first_non_finite(const gguf_tensor *t, uint64_t lo, uint64_t hi) {
    const uint64_t block = 4096;
    for (; lo < hi; lo += block) {
        const uint64_t end = lo + block < hi ? lo + block : hi;
        int bad = 0;
        if (t->type == GGUF_T_F32) {
            const uint32_t *v = t->data;
            for (uint64_t j = lo; j < end; j++) bad |= (v[j] & 0x7f800000u) == 0x7f800000u;
            if (bad)
                for (uint64_t j = lo; j < end; j++)
                    if ((v[j] & 0x7f800000u) == 0x7f800000u) return (int64_t)j;
        } else if (t->type == GGUF_T_F16) {
            const uint16_t *v = t->data;
            for (uint64_t j = lo; j < end; j++) bad |= (v[j] & 0x7c00u) == 0x7c00u;
            if (bad)
                for (uint64_t j = lo; j < end; j++)
                    if ((v[j] & 0x7c00u) == 0x7c00u) return (int64_t)j;
        }
    }
    return -1;
}

/* s2s_verify reads the tensors in pieces of at most VERIFY_PIECE bytes, on the pool's
 * threads: each piece's CRC-32 (combined in order per tensor: crc32_combine is exact) and
 * its first non-finite element. */
#define VERIFY_PIECE ((uint64_t)1 << 20)

typedef struct {
    uint32_t tensor;   /* index in the file */
    uint64_t lo, n;    /* byte range within the tensor */
    uint32_t crc;
    int64_t bad;       /* first non-finite element of the piece (tensor-relative), or -1 */
} verify_piece;

typedef struct {
    const gguf_file *f;
    verify_piece *p;
} verify_args;

static void verify_pieces(const void *ctx, int lo, int hi, int worker) {
    (void)worker;
    const verify_args *a = ctx;
    for (int i = lo; i < hi; i++) {
        verify_piece *p = &a->p[i];
        const gguf_tensor *t = gguf_tensor_at(a->f, p->tensor);
        p->crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), (const uint8_t *)t->data + p->lo, (uInt)p->n);
        const uint64_t es = t->type == GGUF_T_F32 ? 4 : t->type == GGUF_T_F16 ? 2 : 0;
        p->bad = es ? first_non_finite(t, p->lo / es, (p->lo + p->n) / es) : -1;
    }
}

/* The pieces of every tensor in file order (an empty tensor is one empty piece): a malloc'd
 * array, its length in *n; NULL if out of memory. */
static verify_piece *make_pieces(const gguf_file *f, uint64_t *n) {
    const uint64_t nt = gguf_tensor_count(f);
    *n = 0;
    for (uint64_t i = 0; i < nt; i++) {
        const uint64_t bytes = gguf_tensor_at(f, i)->nbytes;
        *n += bytes ? (bytes + VERIFY_PIECE - 1) / VERIFY_PIECE : 1;
    }
    verify_piece *pieces = *n <= 0x7fffffff ? malloc(sizeof *pieces * (size_t)(*n ? *n : 1)) : NULL;
    if (!pieces) return NULL;
    uint64_t k = 0;
    for (uint64_t i = 0; i < nt; i++) {
        const uint64_t bytes = gguf_tensor_at(f, i)->nbytes;
        uint64_t lo = 0;
        do {
            const uint64_t len = bytes - lo < VERIFY_PIECE ? bytes - lo : VERIFY_PIECE;
            pieces[k++] = (verify_piece){(uint32_t)i, lo, len, 0, -1};
            lo += len;
        } while (lo < bytes);
    }
    return pieces;
}

/* The read pieces, in file order: a tensor's CRC-32 against crc's entry, then its values,
 * as a serial scan finds them. Returns 0, or -1 naming the first bad tensor. */
static int check_pieces(const gguf_file *f, const gguf_kv *crc, const verify_piece *pieces, uint64_t n,
                        char *err, size_t errlen) {
    uint64_t k = 0;
    for (uint64_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        uint32_t want, got = pieces[k].crc;
        int64_t bad = pieces[k].bad;
        for (k++; k < n && pieces[k].tensor == i; k++) {
            got = (uint32_t)crc32_combine(got, pieces[k].crc, (z_off_t)pieces[k].n);
            if (bad < 0) bad = pieces[k].bad;
        }
        memcpy(&want, crc->data + 4 * i, 4);
        if (got != want) {
            s2s_fail(err, errlen, "tensor %s: CRC-32 %08x, file says %08x (corrupted data)", t->name,
                     got, want);
            return -1;
        } else if (bad >= 0 && t->n_dims == 2) { /* NaN/Inf weights would poison every translation */
            s2s_fail(err, errlen, "tensor %s: row %lld, column %lld is not finite (NaN or infinity)", t->name,
                     (long long)(bad / (int64_t)t->ne[0]), (long long)(bad % (int64_t)t->ne[0]));
            return -1;
        } else if (bad >= 0) {
            s2s_fail(err, errlen, "tensor %s: element %lld is not finite (NaN or infinity)", t->name,
                     (long long)bad);
            return -1;
        }
    }
    return 0;
}

int s2s_verify(const s2s_model *m, char *err, size_t errlen) {
    if (verify_metadata(m, err, errlen) < 0) return -1;
    const gguf_kv *crc = gguf_get_array(m->file, "attend.tensor_crc32", GGUF_U32, err, errlen);
    if (!crc) return -1;
    uint64_t n;
    verify_piece *pieces = make_pieces(m->file, &n);
    if (!pieces) {
        s2s_fail(err, errlen, "out of memory");
        return -1;
    }
    const verify_args a = {m->file, pieces};
    at_parallel_for((int)n, at_threads(), verify_pieces, &a);
    const int rc = check_pieces(m->file, crc, pieces, n, err, errlen);
    free(pieces);
    return rc;
}
