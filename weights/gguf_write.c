/* gguf_write: see gguf_write.h. */
#include "gguf_write.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

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

/* attend.tensor_crc32's value: the element type, the count and each tensor's CRC-32. */
static void put_tensor_crcs(FILE *f, const gguf_out_tensor *t, int nt) {
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
}

static int key_is(const gguf_kv *kv, const char *key) {
    return key && kv->key.len == strlen(key) && !memcmp(kv->key.ptr, key, kv->key.len);
}

/* in's key/value pairs, but attend.metadata_crc32 (written after them) left out, the format
 * version and tensor CRC-32s made the new tensors' and ch's string key set. Returns how many
 * were written. */
static uint64_t put_keys(FILE *f, const gguf_file *in, const gguf_out_tensor *t, int nt,
                         const gguf_write_changes *ch) {
    uint64_t n_kv = 0;
    for (uint64_t i = 0; i < gguf_kv_count(in); i++) {
        const gguf_kv *kv = gguf_kv_at(in, i);
        if (key_is(kv, "attend.metadata_crc32") || key_is(kv, ch->str_key)) continue;
        n_kv++;
        put_str(f, kv->key.ptr, kv->key.len);
        put_u32(f, kv->type);
        if (key_is(kv, "attend.format_version") && !ch->keep_version) {
            put_u32(f, 2);
        } else if (kv->key.len == 19 && !memcmp(kv->key.ptr, "attend.tensor_crc32", 19)) {
            put_tensor_crcs(f, t, nt);
        } else {
            if (kv->type == GGUF_ARRAY) {
                put_u32(f, kv->elem_type);
                put_u64(f, kv->count);
            }
            put(f, kv->data, value_bytes(kv));
        }
    }
    if (ch->str_key) {
        n_kv++;
        put_str(f, ch->str_key, strlen(ch->str_key));
        put_u32(f, GGUF_STRING);
        put_str(f, ch->str_value, strlen(ch->str_value));
    }
    return n_kv;
}

/* The tensor infos, then the data section: each tensor at the next multiple of align. */
static void put_tensors(FILE *f, const gguf_out_tensor *t, int nt, uint32_t align) {
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
}

int gguf_write_like(const char *path, const gguf_file *in, const gguf_out_tensor *t, int nt, char *err,
                    size_t errlen) {
    const gguf_write_changes ch = {0, NULL, NULL};
    return gguf_write_with(path, in, t, nt, &ch, err, errlen);
}

int gguf_write_with(const char *path, const gguf_file *in, const gguf_out_tensor *t, int nt,
                    const gguf_write_changes *ch, char *err, size_t errlen) {
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
    char *kvbuf = NULL;
    size_t kvlen = 0;
    FILE *mem = open_memstream(&kvbuf, &kvlen);
    if (!mem) {
        fclose(f);
        remove(tmp);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    const uint64_t n_kv = put_keys(mem, in, t, nt, ch);
    int bad = fclose(mem) != 0;
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
    put_tensors(f, t, nt, align);
    bad |= ferror(f);
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path)) {
        remove(tmp);
        snprintf(err, errlen, "writing %.400s failed", path);
        return -1;
    }
    return 0;
}
