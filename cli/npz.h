/* npz: write NumPy .npz archives (a zip of .npy files, deflated with zlib), entry by entry,
 * so memory stays bounded however many arrays are written.
 *
 *   npz_writer *z = npz_open("out.npz", err, sizeof err);
 *   int shape[2] = {3, 4};
 *   npz_add_f32(z, "s0/cross/l0", data, 2, shape);
 *   npz_close(z, err, sizeof err);   // writes the central directory */
#ifndef ATTEND_NPZ_H
#define ATTEND_NPZ_H

#include <stddef.h>
#include <stdint.h>

typedef struct npz_writer npz_writer;

npz_writer *npz_open(const char *path, char *err, size_t errlen);
/* Arrays of float32, int32, or UTF-8 strings (stored as numpy unicode '<U'). 0 or -1. */
int npz_add_f32(npz_writer *z, const char *name, const float *data, int ndim, const int *shape);
int npz_add_i32(npz_writer *z, const char *name, const int32_t *data, int ndim, const int *shape);
int npz_add_str(npz_writer *z, const char *name, const char *const *strs, int n);
/* Finish the archive; reports any earlier write error. Frees z. */
int npz_close(npz_writer *z, char *err, size_t errlen);

#endif
