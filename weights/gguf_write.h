/* gguf_write: write a GGUF v3 checkpoint that takes its keys from an opened one, byte for
 * byte, with new tensors (attend quantize rewrites a model this way). The format version
 * becomes 2 (int8 matrices allowed), the tensors' CRC-32 list and the metadata CRC-32 (the
 * last key) are recomputed; the file is written to PATH.tmp and renamed over PATH. */
#ifndef ATTEND_GGUF_WRITE_H
#define ATTEND_GGUF_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

typedef struct {
    char *name;
    uint32_t n_dims, type;
    uint64_t ne[4];
    void *data; /* owned */
    uint64_t nbytes;
} gguf_out_tensor;

/* Write in's keys (as above) and the nt tensors t to path. 0, or -1 with err. */
int gguf_write_like(const char *path, const gguf_file *in, const gguf_out_tensor *t, int nt, char *err,
                    size_t errlen);

/* What gguf_write_with changes besides the tensors' CRC-32s. */
typedef struct {
    int keep_version;      /* keep attend.format_version as it is (the tensors are in's own) */
    const char *str_key;   /* when set: this string key gets str_value (replaced, or added last) */
    const char *str_value;
} gguf_write_changes;

/* gguf_write_like with these changes. 0, or -1 with err. */
int gguf_write_with(const char *path, const gguf_file *in, const gguf_out_tensor *t, int nt,
                    const gguf_write_changes *ch, char *err, size_t errlen);

#endif
