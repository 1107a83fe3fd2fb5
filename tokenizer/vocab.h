/* vocab: the model's piece <-> id map (opus-mt's vocab.json, not SentencePiece's own ids).
 *
 *   vocab *v = vocab_new(pieces, lens, n, err, sizeof err);   // piece strings in id order
 *   int id = vocab_id(v, "▁Haus", 4);                         // -1 if absent
 *   const char *p = vocab_piece(v, id);
 *   vocab_free(v);                                             */
#ifndef ATTEND_VOCAB_H
#define ATTEND_VOCAB_H

#include <stddef.h>
#include <stdint.h>

typedef struct vocab vocab;

/* Copies the pieces. Empty pieces (ids with no piece) are kept but never matched. */
vocab *vocab_new(const char *const *pieces, const uint64_t *lens, int n, char *err, size_t errlen);
void vocab_free(vocab *v);
int vocab_size(const vocab *v);
int vocab_id(const vocab *v, const char *piece, size_t len);
const char *vocab_piece(const vocab *v, int id); /* NUL-terminated; NULL if out of range */

#endif
