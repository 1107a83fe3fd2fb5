/* Validating GGUF v3 reader. Every read goes through a bounds-checked cursor; nothing in the
 * file is trusted until checked against the file size. */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define GGUF_MAGIC "GGUF"
#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32

struct gguf_file {
    const uint8_t *base;
    uint64_t size;
    int mapped; /* base came from mmap and must be unmapped */
    uint32_t version;
    uint64_t n_kv, n_tensors;
    gguf_kv *kv;
    gguf_tensor *tensors;
    uint64_t data_start;
    /* open-addressing hash of tensor names, for lookups in O(1) */
    uint64_t *tensor_slots;
    uint64_t n_slots;
    uint64_t *key_slots; /* used while parsing only */
};

/* ---------------------------------------------------------------------------------------
 * Errors */

static void fail(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || !errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* Print at most 60 bytes of a file string, replacing non-printable bytes, for messages. */
static void printable(char *out, size_t outlen, gguf_str s) {
    size_t n = 0;
    for (uint64_t i = 0; i < s.len && n + 4 < outlen && i < 60; i++) {
        unsigned char c = (unsigned char)s.ptr[i];
        out[n++] = (c >= 32 && c < 127) ? (char)c : '?';
    }
    if (s.len > 60 && n + 4 < outlen) { memcpy(out + n, "...", 3); n += 3; }
    out[n] = 0;
}

/* ---------------------------------------------------------------------------------------
 * Bounds-checked cursor */

typedef struct {
    const uint8_t *base;
    uint64_t size, pos;
} cursor;

static int take(cursor *c, uint64_t n, const uint8_t **out) {
    if (n > c->size - c->pos) return -1;
    *out = c->base + c->pos;
    c->pos += n;
    return 0;
}

static int read_u32(cursor *c, uint32_t *v) {
    const uint8_t *p;
    if (take(c, 4, &p)) return -1;
    memcpy(v, p, 4);
    return 0;
}

static int read_u64(cursor *c, uint64_t *v) {
    const uint8_t *p;
    if (take(c, 8, &p)) return -1;
    memcpy(v, p, 8);
    return 0;
}

static int read_str(cursor *c, gguf_str *s) {
    const uint8_t *p;
    if (read_u64(c, &s->len) || take(c, s->len, &p)) return -1;
    s->ptr = (const char *)p;
    return 0;
}

static const uint64_t scalar_size[GGUF_VALUE_TYPES] = {
    [GGUF_U8] = 1, [GGUF_I8] = 1, [GGUF_U16] = 2, [GGUF_I16] = 2, [GGUF_U32] = 4,
    [GGUF_I32] = 4, [GGUF_F32] = 4, [GGUF_BOOL] = 1, [GGUF_U64] = 8, [GGUF_I64] = 8,
    [GGUF_F64] = 8,
};

uint32_t gguf_metadata_crc(const gguf_file *f, const gguf_kv *kv) {
    const uint8_t *first = f->base + 24; /* after magic, version and the two counts */
    const uint8_t *end = (const uint8_t *)kv->key.ptr - 8; /* the pair starts with its key length */
    uint32_t crc = (uint32_t)crc32(0L, Z_NULL, 0);
    for (const uint8_t *p = first; p < end;) {
        const uInt n = end - p > (1 << 30) ? (1u << 30) : (uInt)(end - p);
        crc = (uint32_t)crc32(crc, p, n);
        p += n;
    }
    return crc;
}

const char *gguf_type_name(uint32_t t) {
    static const char *names[GGUF_VALUE_TYPES] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64",
        "i64", "f64"};
    return t < GGUF_VALUE_TYPES ? names[t] : "unknown type";
}

const char *gguf_tensor_type_name(uint32_t t) {
    switch (t) {
    case GGUF_T_F32: return "f32";
    case GGUF_T_F16: return "f16";
    case GGUF_T_I8: return "i8";
    default: return "unsupported";
    }
}

static uint64_t tensor_elem_size(uint32_t t) {
    switch (t) {
    case GGUF_T_F32: return 4;
    case GGUF_T_F16: return 2;
    case GGUF_T_I8: return 1;
    default: return 0;
    }
}

/* Read one value of type t into kv (scalars point into the file; arrays are indexed). */
static int read_value(cursor *c, gguf_kv *kv, const char *key, char *err, size_t errlen) {
    if (kv->type >= GGUF_VALUE_TYPES) {
        fail(err, errlen, "key %s: unknown value type %u", key, kv->type);
        return -1;
    }
    if (kv->type == GGUF_STRING) {
        gguf_str s;
        if (read_str(c, &s)) goto truncated;
        kv->data = (const uint8_t *)s.ptr - 8;
        kv->count = 1;
        return 0;
    }
    if (kv->type == GGUF_ARRAY) {
        if (read_u32(c, &kv->elem_type) || read_u64(c, &kv->count)) goto truncated;
        if (kv->elem_type >= GGUF_VALUE_TYPES || kv->elem_type == GGUF_ARRAY) {
            fail(err, errlen, "key %s: unsupported array element type %u", key, kv->elem_type);
            return -1;
        }
        kv->data = c->base + c->pos;
        if (kv->elem_type == GGUF_STRING) {
            /* each string needs at least its 8-byte length: bound count before allocating */
            if (kv->count > (c->size - c->pos) / 8) goto truncated;
            kv->strings = malloc((kv->count ? kv->count : 1) * sizeof(gguf_str));
            if (!kv->strings) {
                fail(err, errlen, "key %s: out of memory for %llu strings", key,
                     (unsigned long long)kv->count);
                return -1;
            }
            for (uint64_t i = 0; i < kv->count; i++)
                if (read_str(c, &kv->strings[i])) goto truncated;
            return 0;
        }
        uint64_t es = scalar_size[kv->elem_type];
        const uint8_t *p;
        if (kv->count > (c->size - c->pos) / es || take(c, kv->count * es, &p)) goto truncated;
        return 0;
    }
    const uint8_t *p;
    if (take(c, scalar_size[kv->type], &p)) goto truncated;
    kv->data = p;
    kv->count = 1;
    return 0;
truncated:
    fail(err, errlen, "key %s: value runs past the end of the file (%llu bytes)", key,
         (unsigned long long)c->size);
    return -1;
}

/* ---------------------------------------------------------------------------------------
 * Tensor name hash */

static uint64_t hash_name(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static int64_t slot_of(const gguf_file *f, const char *name, size_t n) {
    uint64_t mask = f->n_slots - 1;
    for (uint64_t h = hash_name(name, n) & mask;; h = (h + 1) & mask) {
        uint64_t v = f->tensor_slots[h];
        if (v == 0) return -(int64_t)h - 1; /* empty: where it would go */
        const char *other = f->tensors[v - 1].name;
        if (strlen(other) == n && memcmp(other, name, n) == 0) return (int64_t)h;
    }
}

/* Insert key #i into the open-addressing index (slots hold index + 1); 1 if an earlier key
 * has the same bytes. */
static int key_seen(uint64_t *slots, uint64_t mask, const gguf_kv *kv, uint64_t i) {
    const gguf_str *k = &kv[i].key;
    for (uint64_t h = hash_name(k->ptr, k->len) & mask;; h = (h + 1) & mask) {
        uint64_t v = slots[h];
        if (v == 0) {
            slots[h] = i + 1;
            return 0;
        }
        if (kv[v - 1].key.len == k->len && memcmp(kv[v - 1].key.ptr, k->ptr, k->len) == 0) return 1;
    }
}

static int by_offset(const void *a, const void *b) {
    const gguf_tensor *x = *(const gguf_tensor *const *)a, *y = *(const gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* ---------------------------------------------------------------------------------------
 * Parsing, in the file's order: header, key/value pairs, tensor infos, then where the
 * tensors' bytes lie. Each step returns 0, or -1 with err set. */

/* Magic, version and the two counts; allocates f->kv and f->tensors for them. */
static int parse_header(gguf_file *f, cursor *c, char *err, size_t errlen) {
    const uint8_t *magic;
    if (take(c, 4, &magic) || memcmp(magic, GGUF_MAGIC, 4) != 0) {
        fail(err, errlen, "not a GGUF file (bad magic)");
        return -1;
    }
    if (read_u32(c, &f->version) || read_u64(c, &f->n_tensors) || read_u64(c, &f->n_kv)) {
        fail(err, errlen, "truncated header (%llu bytes)", (unsigned long long)f->size);
        return -1;
    }
    if (f->version != 3) {
        fail(err, errlen, "GGUF version %u not supported (attend reads version 3)", f->version);
        return -1;
    }
    /* every key takes >= 12 bytes and every tensor info >= 24: reject absurd counts early */
    if (f->n_kv > f->size / 12 || f->n_tensors > f->size / 24) {
        fail(err, errlen, "header claims %llu keys and %llu tensors, more than a %llu-byte file holds",
             (unsigned long long)f->n_kv, (unsigned long long)f->n_tensors,
             (unsigned long long)f->size);
        return -1;
    }
    f->kv = calloc(f->n_kv ? f->n_kv : 1, sizeof(gguf_kv));
    f->tensors = calloc(f->n_tensors ? f->n_tensors : 1, sizeof(gguf_tensor));
    if (!f->kv || !f->tensors) {
        fail(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

/* general.alignment's value into *alignment: a u32 power of two in 8..65536. */
static int read_alignment(const gguf_kv *kv, uint64_t *alignment, char *err, size_t errlen) {
    uint32_t a;
    if (kv->type != GGUF_U32) {
        fail(err, errlen, "key general.alignment: expected u32, found %s", gguf_type_name(kv->type));
        return -1;
    }
    memcpy(&a, kv->data, 4);
    if (a < 8 || a > 65536 || (a & (a - 1))) {
        fail(err, errlen, "key general.alignment: %u is not a power of two in 8..65536", a);
        return -1;
    }
    *alignment = a;
    return 0;
}

/* Every key/value pair, each key once; general.alignment (if present) into *alignment. */
static int parse_keys(gguf_file *f, cursor *c, uint64_t *alignment, char *err, size_t errlen) {
    char name[80];
    /* key index for the duplicate check (a quadratic scan would let a file of many small
     * keys stall the loader) */
    uint64_t key_mask = 15;
    while (key_mask + 1 < 2 * f->n_kv) key_mask = key_mask * 2 + 1;
    uint64_t *key_slots = calloc(key_mask + 1, sizeof(uint64_t));
    if (!key_slots) {
        fail(err, errlen, "out of memory");
        return -1;
    }
    f->key_slots = key_slots;
    for (uint64_t i = 0; i < f->n_kv; i++) {
        gguf_kv *kv = &f->kv[i];
        if (read_str(c, &kv->key) || read_u32(c, &kv->type)) {
            fail(err, errlen, "key #%llu: file ends inside its name or type (%llu bytes)",
                 (unsigned long long)i, (unsigned long long)f->size);
            return -1;
        }
        printable(name, sizeof name, kv->key);
        if (read_value(c, kv, name, err, errlen)) return -1;
        if (key_seen(key_slots, key_mask, f->kv, i)) {
            fail(err, errlen, "key %s: appears twice", name);
            return -1;
        }
        if (kv->key.len == 17 && memcmp(kv->key.ptr, "general.alignment", 17) == 0 &&
            read_alignment(kv, alignment, err, errlen))
            return -1;
    }
    return 0;
}

/* Tensor #i's name: 1..256 bytes, no control bytes (they would break one-line error
 * messages), copied into t->name; its printable form into name for messages. */
static int read_tensor_name(gguf_file *f, cursor *c, uint64_t i, char *name, size_t namelen, char *err,
                            size_t errlen) {
    gguf_tensor *t = &f->tensors[i];
    gguf_str s;
    if (read_str(c, &s)) {
        fail(err, errlen, "tensor #%llu: file ends inside its name (%llu bytes)",
             (unsigned long long)i, (unsigned long long)f->size);
        return -1;
    }
    printable(name, namelen, s);
    int bad_byte = 0;
    for (uint64_t k = 0; k < s.len && k <= 256; k++)
        if ((unsigned char)s.ptr[k] < 32 || s.ptr[k] == 127) bad_byte = 1;
    if (s.len == 0 || s.len > 256 || bad_byte) {
        fail(err, errlen, "tensor #%llu: invalid name '%s'", (unsigned long long)i, name);
        return -1;
    }
    t->name = malloc(s.len + 1);
    if (!t->name) {
        fail(err, errlen, "out of memory");
        return -1;
    }
    memcpy(t->name, s.ptr, s.len);
    t->name[s.len] = 0;
    return 0;
}

/* Tensor #i's info: name, dimensions, type and offset (aligned; checked against the file's
 * size later, in place_tensors). */
static int parse_tensor_info(gguf_file *f, cursor *c, uint64_t i, uint64_t alignment, char *err,
                             size_t errlen) {
    gguf_tensor *t = &f->tensors[i];
    char name[80];
    if (read_tensor_name(f, c, i, name, sizeof name, err, errlen)) return -1;
    if (read_u32(c, &t->n_dims)) goto truncated;
    if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS) {
        fail(err, errlen, "tensor %s: %u dimensions (1..4 allowed)", name, t->n_dims);
        return -1;
    }
    uint64_t elems = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        if (read_u64(c, &t->ne[d])) goto truncated;
        /* elems <= 2^60, so nbytes = elems * (at most 4) cannot overflow */
        if (t->ne[d] == 0 || t->ne[d] > (1ull << 40) || elems > (1ull << 60) / t->ne[d]) {
            fail(err, errlen, "tensor %s: dimension %u is %llu, out of range", name, d,
                 (unsigned long long)t->ne[d]);
            return -1;
        }
        elems *= t->ne[d];
    }
    for (uint32_t d = t->n_dims; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    if (read_u32(c, &t->type) || read_u64(c, &t->offset)) goto truncated;
    uint64_t es = tensor_elem_size(t->type);
    if (!es) {
        fail(err, errlen, "tensor %s: tensor type %u not supported", name, t->type);
        return -1;
    }
    t->nbytes = elems * es;
    if (t->offset % alignment) {
        fail(err, errlen, "tensor %s: offset %llu not aligned to %llu", name,
             (unsigned long long)t->offset, (unsigned long long)alignment);
        return -1;
    }
    return 0;
truncated:
    fail(err, errlen, "tensor %s: file ends inside its tensor info (%llu bytes)", name,
         (unsigned long long)f->size);
    return -1;
}

/* The data section starts at the first aligned byte after the infos (end): every tensor's
 * bytes must lie inside the file; sets each t->data. */
static int place_tensors(gguf_file *f, uint64_t end, uint64_t alignment, char *err, size_t errlen) {
    f->data_start = (end + alignment - 1) / alignment * alignment;
    if (f->data_start > f->size) {
        fail(err, errlen, "file ends before its tensor data (%llu bytes)",
             (unsigned long long)f->size);
        return -1;
    }
    uint64_t data_size = f->size - f->data_start;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        if (t->offset > data_size || t->nbytes > data_size - t->offset) {
            fail(err, errlen, "tensor %s: offset beyond end of file (needs bytes %llu..%llu of %llu)",
                 t->name, (unsigned long long)(f->data_start + t->offset),
                 (unsigned long long)(f->data_start + t->offset + t->nbytes),
                 (unsigned long long)f->size);
            return -1;
        }
        t->data = f->base + f->data_start + t->offset;
    }
    return 0;
}

/* No two tensors may share bytes: sort by offset and compare neighbours. */
static int check_overlaps(const gguf_file *f, char *err, size_t errlen) {
    if (f->n_tensors <= 1) return 0;
    const gguf_tensor **order = malloc(f->n_tensors * sizeof *order);
    if (!order) {
        fail(err, errlen, "out of memory");
        return -1;
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) order[i] = &f->tensors[i];
    qsort(order, f->n_tensors, sizeof *order, by_offset);
    for (uint64_t i = 1; i < f->n_tensors; i++)
        if (order[i]->offset < order[i - 1]->offset + order[i - 1]->nbytes) {
            fail(err, errlen, "tensor %s: data overlaps tensor %s", order[i]->name,
                 order[i - 1]->name);
            free(order);
            return -1;
        }
    free(order);
    return 0;
}

/* The tensor name index (gguf_find_tensor); also rejects duplicate names. */
static int index_tensor_names(gguf_file *f, char *err, size_t errlen) {
    f->n_slots = 16;
    while (f->n_slots < 2 * f->n_tensors) f->n_slots *= 2;
    f->tensor_slots = calloc(f->n_slots, sizeof(uint64_t));
    if (!f->tensor_slots) {
        fail(err, errlen, "out of memory");
        return -1;
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const char *nm = f->tensors[i].name;
        int64_t s = slot_of(f, nm, strlen(nm));
        if (s >= 0) {
            fail(err, errlen, "tensor %s: appears twice", nm);
            return -1;
        }
        f->tensor_slots[-s - 1] = i + 1;
    }
    return 0;
}

/* The whole container checked and indexed into f: f, or NULL with err set. */
static gguf_file *parse(gguf_file *f, char *err, size_t errlen) {
    cursor c = {f->base, f->size, 0};
    uint64_t alignment = GGUF_DEFAULT_ALIGNMENT;
    if (parse_header(f, &c, err, errlen) || parse_keys(f, &c, &alignment, err, errlen)) return NULL;
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (parse_tensor_info(f, &c, i, alignment, err, errlen)) return NULL;
    if (place_tensors(f, c.pos, alignment, err, errlen) || check_overlaps(f, err, errlen) ||
        index_tensor_names(f, err, errlen))
        return NULL;
    return f;
}

static gguf_file *open_common(gguf_file *f, char *err, size_t errlen) {
    if (!parse(f, err, errlen)) {
        gguf_close(f);
        return NULL;
    }
    return f;
}

gguf_file *gguf_open_buffer(const void *buf, size_t len, char *err, size_t errlen) {
    if ((uintptr_t)buf % 16) { /* tensors are aligned relative to the start: floats need it */
        fail(err, errlen, "buffer at %p is not 16-byte aligned", buf);
        return NULL;
    }
    gguf_file *f = calloc(1, sizeof *f);
    if (!f) {
        fail(err, errlen, "out of memory");
        return NULL;
    }
    f->base = buf;
    f->size = len;
    return open_common(f, err, errlen);
}

gguf_file *gguf_open(const char *path, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        fail(err, errlen, "%s", strerror(errno)); /* the caller names the file */
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        fail(err, errlen, "not a regular file");
        close(fd);
        return NULL;
    }
    if (st.st_size == 0) {
        fail(err, errlen, "empty file");
        close(fd);
        return NULL;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        fail(err, errlen, "mmap failed: %s", strerror(errno));
        return NULL;
    }
    gguf_file *f = calloc(1, sizeof *f);
    if (!f) {
        munmap(p, (size_t)st.st_size);
        fail(err, errlen, "out of memory");
        return NULL;
    }
    f->base = p;
    f->size = (uint64_t)st.st_size;
    f->mapped = 1;
    return open_common(f, err, errlen);
}

void gguf_release(const gguf_file *f, const void *p, uint64_t n) {
    const uintptr_t lo = (uintptr_t)p, hi = lo + n, base = (uintptr_t)f->base;
    if (!f->mapped || lo < base || hi > base + f->size) return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = (lo + page - 1) / page * page, b = hi / page * page; /* whole pages only */
    if (a < b) madvise((void *)a, b - a, MADV_DONTNEED);
}

void gguf_close(gguf_file *f) {
    if (!f) return;
    if (f->kv)
        for (uint64_t i = 0; i < f->n_kv; i++) free(f->kv[i].strings);
    if (f->tensors)
        for (uint64_t i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
    free(f->kv);
    free(f->tensors);
    free(f->tensor_slots);
    free(f->key_slots);
    if (f->mapped) munmap((void *)f->base, f->size);
    free(f);
}

/* ---------------------------------------------------------------------------------------
 * Lookups */

uint32_t gguf_version(const gguf_file *f) { return f->version; }
uint64_t gguf_kv_count(const gguf_file *f) { return f->n_kv; }
const gguf_kv *gguf_kv_at(const gguf_file *f, uint64_t i) { return i < f->n_kv ? &f->kv[i] : NULL; }
uint64_t gguf_tensor_count(const gguf_file *f) { return f->n_tensors; }
uint64_t gguf_file_size(const gguf_file *f) { return f->size; }

const gguf_tensor *gguf_tensor_at(const gguf_file *f, uint64_t i) {
    return i < f->n_tensors ? &f->tensors[i] : NULL;
}

const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key) {
    size_t n = strlen(key);
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (f->kv[i].key.len == n && memcmp(f->kv[i].key.ptr, key, n) == 0) return &f->kv[i];
    return NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    int64_t s = slot_of(f, name, strlen(name));
    return s >= 0 ? &f->tensors[f->tensor_slots[s] - 1] : NULL;
}

static const gguf_kv *typed(const gguf_file *f, const char *key, uint32_t type, char *err,
                            size_t errlen) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) {
        fail(err, errlen, "key %s: missing", key);
        return NULL;
    }
    if (kv->type != type) {
        fail(err, errlen, "key %s: expected %s, found %s", key, gguf_type_name(type),
             gguf_type_name(kv->type));
        return NULL;
    }
    return kv;
}

int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out, char *err, size_t errlen) {
    const gguf_kv *kv = typed(f, key, GGUF_U32, err, errlen);
    if (!kv) return -1;
    memcpy(out, kv->data, 4);
    return 0;
}

int gguf_get_f32(const gguf_file *f, const char *key, float *out, char *err, size_t errlen) {
    const gguf_kv *kv = typed(f, key, GGUF_F32, err, errlen);
    if (!kv) return -1;
    memcpy(out, kv->data, 4);
    return 0;
}

int gguf_get_bool(const gguf_file *f, const char *key, int *out, char *err, size_t errlen) {
    const gguf_kv *kv = typed(f, key, GGUF_BOOL, err, errlen);
    if (!kv) return -1;
    if (kv->data[0] > 1) {
        fail(err, errlen, "key %s: bool value %u is neither 0 nor 1", key, kv->data[0]);
        return -1;
    }
    *out = kv->data[0];
    return 0;
}

int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out, char *err, size_t errlen) {
    const gguf_kv *kv = typed(f, key, GGUF_STRING, err, errlen);
    if (!kv) return -1;
    memcpy(&out->len, kv->data, 8);
    out->ptr = (const char *)kv->data + 8;
    return 0;
}

const gguf_kv *gguf_get_array(const gguf_file *f, const char *key, uint32_t elem_type,
                              char *err, size_t errlen) {
    const gguf_kv *kv = typed(f, key, GGUF_ARRAY, err, errlen);
    if (!kv) return NULL;
    if (kv->elem_type != elem_type) {
        fail(err, errlen, "key %s: expected array of %s, found array of %s", key,
             gguf_type_name(elem_type), gguf_type_name(kv->elem_type));
        return NULL;
    }
    return kv;
}
