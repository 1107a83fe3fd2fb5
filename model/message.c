/* The loaders' one-line error messages: a printf into the caller's buffer, and file strings
 * made safe to show in one. Shared by model/ and tokenizer/ (model/load.h). */
#include "load.h"

#include <stdarg.h>
#include <stdio.h>

void s2s_fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

const char *s2s_shown(char *buf, size_t n, gguf_str s) {
    size_t k = 0;
    for (uint64_t i = 0; i < s.len && i < 40 && k + 1 < n; i++) {
        unsigned char ch = (unsigned char)s.ptr[i];
        buf[k++] = ch < 32 || ch == 127 ? '?' : (char)ch;
    }
    buf[k] = 0;
    return buf;
}
