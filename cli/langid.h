/* langid: which language a text is in, for attend serve's POST /detect and "source":
 * "auto" and for attend detect. A thin wrapper over CLD2 (Debian's libcld2: a maintained
 * identifier of 80+ languages from character n-grams, made for this job) behind a C
 * interface; linked into the attend binary only, never into libattend. */
#ifndef ATTEND_CLI_LANGID_H
#define ATTEND_CLI_LANGID_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    char code[32];    /* a candidate's code as given (e.g. "deu_Latn"), else CLD2's ("de") */
    float confidence; /* 0..100: CLD2's share of the text in that language, halved when
                       * CLD2 does not call its answer reliable (short text) */
} langid_guess;

/* Up to max guesses for the language of text (any bytes: invalid UTF-8 and control
 * characters are read as spaces; only the first 64 KiB are looked at), best first.
 * candidates (n_candidates > 0): only these codes are answered (ISO 639-1 "de", a model's
 * "de_DE" or "deu_Latn"), and a text in none of them gets the first candidate with
 * confidence 0. Returns the guesses written
 * (0: nothing to say, e.g. an empty text without candidates). */
int langid_detect(const char *text, size_t len, const char *const *candidates, int n_candidates, langid_guess *out,
                  int max);

/* The ISO 639-1 code a model's language code stands for ("de_DE", "deu_Latn", "de" -> "de"),
 * written to out; "" when it has none. */
void langid_iso(const char *code, char *out, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
