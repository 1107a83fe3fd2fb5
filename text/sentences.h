/* text: split a line of text into sentences, and an over-long sentence into clauses, by
 * per-language rules kept as data (text/split_rules.c). Byte offsets in, byte offsets out: the
 * text is never copied or changed, so the caller can join translated pieces with the original
 * separators.
 *
 *   attend_span *s;
 *   char err[128];
 *   int n = attend_split_sentences(line, strlen(line), "de", &s, err, sizeof err);
 *   for (int i = 0; i < n; i++) printf("%.*s\n", (int)(s[i].end - s[i].begin), line + s[i].begin);
 *   free(s);
 *
 * Both functions are pure: no global state, safe from any number of threads at once. They
 * take any bytes (invalid UTF-8 reads as ordinary non-letters) and run in time linear in the
 * text (clauses: n log n in the worst case, plus what fits() costs). docs/splitting.md has the
 * rules. */
#ifndef ATTEND_TEXT_SENTENCES_H
#define ATTEND_TEXT_SENTENCES_H

#include <stddef.h>

#include "../model/attend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes [begin, end) of the text. */
typedef struct {
    size_t begin, end;
} attend_span;

/* Split text (len bytes, any bytes) into sentences. lang: a language code ("de", "en",
 * "de_DE", "deu_Latn", "fr"...: its leading 2-3 letters count); unknown codes use the generic
 * rules; NULL = language unknown: every language's data together with the generic rules.
 * *spans: malloc'd (free with free or attend_mem_free), NULL when there are none; each span
 * is one sentence without the whitespace around it, so the bytes between spans are whitespace
 * (NUL bytes count as whitespace). Blank text gives 0 spans.
 * Returns the number of spans, or -1 with a message in err (out of memory only). */
ATTEND_API int attend_split_sentences(const char *text, size_t len, const char *lang, attend_span **spans,
                                      char *err, size_t errlen);

/* Split one sentence into pieces that each fit: fits(user, s, n) says whether bytes s[0..n)
 * fit the model. Breaks at clause boundaries, the strongest kind first (after ';', then after
 * ':', then after ',' or a dash, then before a conjunction of the language), among equals the
 * one nearest the middle, recursively until every piece fits; then at whitespace; a piece
 * with no break point left stays as it is (longer than fits allows). Pieces are trimmed of
 * whitespace, in order, and together hold every non-whitespace byte of the text. Text that
 * fits whole is one piece; blank text none.
 * Returns the number of pieces in *spans (malloc'd, as above), or -1 with err (out of memory). */
ATTEND_API int attend_split_clauses(const char *text, size_t len, const char *lang,
                                    int (*fits)(void *user, const char *s, size_t n), void *user,
                                    attend_span **spans, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
