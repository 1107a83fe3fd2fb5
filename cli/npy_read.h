/* npy_read: a float matrix from a NumPy .npy file (format versions 1-3, little-endian f4 or
 * f8, C order, one or two dimensions), every header field checked: attend transcribe's
 * --features input. */
#ifndef ATTEND_CLI_NPY_READ_H
#define ATTEND_CLI_NPY_READ_H

#include <stddef.h>

/* *data (malloc'd float32) of *rows x *cols (a 1-D array: 1 row). 0, or -1 with err. */
int npy_read_f32(const char *path, float **data, int *rows, int *cols, char *err, size_t errlen);

#endif
