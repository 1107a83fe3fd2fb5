/* Python's whitespace (str.isspace) in UTF-8: the ASCII controls and space, U+001C..U+001F,
 * U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000. */
#include "pystrip.h"

size_t py_space_len(const unsigned char *s, size_t n) {
    if (n >= 1 && ((s[0] >= 9 && s[0] <= 13) || s[0] == ' ' || (s[0] >= 0x1c && s[0] <= 0x1f))) return 1;
    if (n >= 2 && s[0] == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0)) return 2;
    if (n >= 3 && s[0] == 0xe1 && s[1] == 0x9a && s[2] == 0x80) return 3;
    if (n >= 3 && s[0] == 0xe2 && s[1] == 0x80 && (s[2] <= 0x8a || s[2] == 0xa8 || s[2] == 0xa9 || s[2] == 0xaf)) return 3;
    if (n >= 3 && s[0] == 0xe2 && s[1] == 0x81 && s[2] == 0x9f) return 3;
    if (n >= 3 && s[0] == 0xe3 && s[1] == 0x80 && s[2] == 0x80) return 3;
    return 0;
}

size_t py_leading_space(const char *text, size_t n) {
    size_t a = 0, k;
    while (a < n && (k = py_space_len((const unsigned char *)text + a, n - a))) a += k;
    return a;
}

size_t py_rstripped(const char *text, size_t n) {
    for (;;) { /* trailing: test each possible character start */
        size_t found = 0;
        for (size_t w = 1; w <= 3 && w <= n; w++)
            if (py_space_len((const unsigned char *)text + n - w, w) == w) { found = w; break; }
        if (!found) return n;
        n -= found;
    }
}
