/* TEMPORARY stub header (replaced by the split branch) */
#ifndef ATTEND_SENTENCES_H
#define ATTEND_SENTENCES_H
#include <stddef.h>
#include "../model/attend.h"
typedef struct { size_t begin, end; } attend_span;
ATTEND_API int attend_split_sentences(const char *text, size_t len, const char *lang, attend_span **spans, char *err, size_t errlen);
ATTEND_API int attend_split_clauses(const char *text, size_t len, const char *lang, int (*fits)(void *user, const char *s, size_t n), void *user, attend_span **spans, char *err, size_t errlen);
#endif
