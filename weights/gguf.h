/* gguf: a validating reader for GGUF v3 files (the container of attend checkpoints).
 *
 *   char err[256];
 *   gguf_file *f = gguf_open("model.gguf", err, sizeof err);     // mmap + full check
 *   uint32_t d;  gguf_get_u32(f, "marian.d_model", &d, err, sizeof err);
 *   const gguf_tensor *t = gguf_find_tensor(f, "enc.embed.weight");
 *   gguf_close(f);
 *
 * gguf_open checks every length, count, type, offset and size against the file before
 * returning, so later lookups never read outside the mapping. The file is read-only and
 * may be shared by threads. Format: weights/FORMAT.md. */
#ifndef ATTEND_GGUF_H
#define ATTEND_GGUF_H

#include <stddef.h>
#include <stdint.h>

enum gguf_value_type {
    GGUF_U8 = 0, GGUF_I8 = 1, GGUF_U16 = 2, GGUF_I16 = 3, GGUF_U32 = 4, GGUF_I32 = 5,
    GGUF_F32 = 6, GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_U64 = 10,
    GGUF_I64 = 11, GGUF_F64 = 12, GGUF_VALUE_TYPES
};

/* Tensor element types (ggml numbering). */
enum gguf_tensor_type { GGUF_T_F32 = 0, GGUF_T_F16 = 1, GGUF_T_I8 = 24 };

typedef struct {
    const char *ptr; /* not NUL-terminated */
    uint64_t len;
} gguf_str;

typedef struct {
    gguf_str key;
    uint32_t type;       /* enum gguf_value_type */
    uint32_t elem_type;  /* arrays: element type */
    uint64_t count;      /* arrays: element count */
    const uint8_t *data; /* scalar value, or first array element */
    gguf_str *strings;   /* arrays of strings: count entries, indexed at open */
} gguf_kv;

typedef struct {
    char *name; /* NUL-terminated copy */
    uint32_t n_dims;
    uint64_t ne[4]; /* ne[0] fastest */
    uint32_t type;  /* enum gguf_tensor_type */
    uint64_t offset, nbytes;
    const void *data;
} gguf_tensor;

typedef struct gguf_file gguf_file;

gguf_file *gguf_open(const char *path, char *err, size_t errlen);
/* Same checks on a buffer the caller owns (kept until gguf_close, 16-byte aligned as malloc
 * gives); used by the fuzzer. */
gguf_file *gguf_open_buffer(const void *buf, size_t len, char *err, size_t errlen);
void gguf_close(gguf_file *f);

/* The caller no longer needs bytes [p, p + n) of the file's data: the whole pages inside
 * leave the process's memory (reading them again reads the file again). A no-op for a
 * buffer from gguf_open_buffer. */
void gguf_release(const gguf_file *f, const void *p, uint64_t n);

uint32_t gguf_version(const gguf_file *f);
uint64_t gguf_kv_count(const gguf_file *f);
const gguf_kv *gguf_kv_at(const gguf_file *f, uint64_t i);
const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key);
uint64_t gguf_tensor_count(const gguf_file *f);
const gguf_tensor *gguf_tensor_at(const gguf_file *f, uint64_t i);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);
uint64_t gguf_file_size(const gguf_file *f);
const char *gguf_type_name(uint32_t value_type);
/* zlib CRC-32 of the metadata bytes from the first key/value pair up to the start of kv
 * (a pair of this file): what attend.metadata_crc32 records. */
uint32_t gguf_metadata_crc(const gguf_file *f, const gguf_kv *kv);
const char *gguf_tensor_type_name(uint32_t tensor_type);

/* Typed getters: 0 on success; -1 with "key K: missing" / "key K: expected u32, found string". */
int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out, char *err, size_t errlen);
int gguf_get_f32(const gguf_file *f, const char *key, float *out, char *err, size_t errlen);
int gguf_get_bool(const gguf_file *f, const char *key, int *out, char *err, size_t errlen);
int gguf_get_str(const gguf_file *f, const char *key, gguf_str *out, char *err, size_t errlen);
/* An array with the given element type; count and raw elements (or strings) returned. */
const gguf_kv *gguf_get_array(const gguf_file *f, const char *key, uint32_t elem_type,
                              char *err, size_t errlen);

#endif
