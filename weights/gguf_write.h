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

#endif
