/* pystrip: Python's str.strip() whitespace on UTF-8 bytes, which HF's tokenizers strip
 * around a decoded text and before NllbTokenizer's <mask>. */
#ifndef ATTEND_PYSTRIP_H
#define ATTEND_PYSTRIP_H

#include <stddef.h>

/* Length of the Python-whitespace character at s (n bytes readable), or 0 if none. */
size_t py_space_len(const unsigned char *s, size_t n);
/* Bytes of leading whitespace in text[0..n): what str.lstrip() removes. */
size_t py_leading_space(const char *text, size_t n);
/* Bytes of text[0..n) left after str.rstrip(). */
size_t py_rstripped(const char *text, size_t n);

#endif
