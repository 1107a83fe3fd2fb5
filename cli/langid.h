/* Language identification: a small C interface over libcld2 (Debian's libcld2-dev), linked
 * into the attend binary only (not libattend). Any bytes are accepted: invalid UTF-8 and
 * control characters are blanked, long texts are cut to their first LANGID_MAX_BYTES. */
#ifndef ATTEND_LANGID_H
#define ATTEND_LANGID_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LANGID_MAX_BYTES (64 * 1024) /* cld2 needs far less to decide; bounds the time */
#define LANGID_MAX_GUESSES 3

typedef struct {
    char code[64];     /* the candidate's own spelling ("deu_Latn"), or cld2's ISO 639-1 code */
    double confidence; /* 0..100 */
} langid_guess;

/* Guess the language of text[0..len). among: n_among candidate codes in any model's form
 * ("de", "de_DE", "deu_Latn", "__de__"), or NULL for any language cld2 knows. Writes up to
 * LANGID_MAX_GUESSES guesses to out, best first, and returns their number: with candidates
 * always >= 1 (the best candidate, with a low confidence when the text says little), without
 * them 0 when nothing was recognised (empty text, digits only). */
int langid_detect(const char *text, size_t len, const char *const *among, int n_among, langid_guess *out);

/* The ISO 639-1 code a model's language code stands for into out ("deu_Latn" -> "de",
 * "de_DE" -> "de", "nb" -> "no"); 0, or -1 when it has none we know (out gets its base). */
int langid_iso_code(const char *code, char out[8]);

#ifdef __cplusplus
}
#endif
#endif
