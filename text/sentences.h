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

/* attend_span, attend_split_sentences and attend_split_clauses are declared in attend.h
 * (the public header); their contracts are there. */

#ifdef __cplusplus
}
#endif

#endif
