/* spm: a C interface to the SentencePiece C++ library.
 *
 *   spm_model *sp = spm_load(bytes, n, err, sizeof err);   // serialized model proto
 *   spm_pieces p;
 *   spm_encode(sp, "Hallo Welt", &p);                       // p.piece[i], p.n
 *   char *text = spm_decode(sp, (const char **)p.piece, p.n);
 *   free(text); spm_pieces_free(&p); spm_free(sp);
 *
 * A loaded model is read-only: encode/decode may run on it from several threads. */
#ifndef ATTEND_SPM_H
#define ATTEND_SPM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct spm_model spm_model;

typedef struct {
    char **piece; /* n NUL-terminated UTF-8 strings */
    int n;
} spm_pieces;

/* Load a model from its serialized bytes. Returns NULL and fills err on failure. */
spm_model *spm_load(const void *bytes, size_t n, char *err, size_t errlen);
void spm_free(spm_model *sp);

/* Split text into pieces. Returns 0, or -1 (err set) if the library refused. */
int spm_encode(const spm_model *sp, const char *text, size_t len, spm_pieces *out,
               char *err, size_t errlen);
void spm_pieces_free(spm_pieces *p);

/* Join pieces back into text (malloc'd, caller frees); NULL on failure. */
char *spm_decode(const spm_model *sp, const char *const *pieces, int n);

#ifdef __cplusplus
}
#endif
#endif
