/* text/chars.c: UTF-8 code points and what they are to the splitters. No locale: a small
 * table of case ranges (Latin, Greek, Cyrillic, Armenian, fullwidth Latin) is enough to tell
 * a sentence start from a word inside a sentence. */
#include "text.h"

/* ---------------------------------------------------------------------------------------
 * decoding */

int tx_decode(const char *s, size_t n, long *cp) {
    const unsigned char *u = (const unsigned char *)s;
    unsigned c = u[0];
    int len;
    long v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) len = 2, v = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, v = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, v = c & 0x07, min = 0x10000;
    else len = 0, v = 0, min = 0;
    if (len == 0 || (size_t)len > n) {
        *cp = -1;
        return 1;
    }
    for (int i = 1; i < len; i++) {
        if ((u[i] & 0xC0) != 0x80) {
            *cp = -1;
            return 1;
        }
        v = v << 6 | (u[i] & 0x3F);
    }
    /* overlong forms, UTF-16 surrogates and code points past U+10FFFF are invalid bytes */
    if (v < min || (v >= 0xD800 && v <= 0xDFFF) || v > 0x10FFFF) {
        *cp = -1;
        return 1;
    }
    *cp = v;
    return len;
}

/* ---------------------------------------------------------------------------------------
 * classes */

static int is_space(long cp) {
    return cp == ' ' || (cp >= '\t' && cp <= '\r') || cp == 0 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}

/* Blocks where upper and lower case alternate: even code points upper (odd_upper: odd). */
static const struct {
    long lo, hi;
    int odd_upper;
} alternating[] = {
    {0x0100, 0x0137, 0}, {0x0139, 0x0148, 1}, {0x014A, 0x0177, 0}, {0x0179, 0x017E, 1},
    {0x01CD, 0x01DC, 1}, {0x01DE, 0x01EF, 0}, {0x01F8, 0x024F, 0}, {0x03D8, 0x03EF, 0},
    {0x0460, 0x0481, 0}, {0x048A, 0x04BF, 0}, {0x04C1, 0x04CE, 1}, {0x04D0, 0x052F, 0},
    {0x1E00, 0x1E95, 0}, {0x1EA0, 0x1EFF, 0}, {0x2C80, 0x2CE3, 0}, {0xA640, 0xA66D, 0},
    {0xA680, 0xA69B, 0}, {0xA722, 0xA72F, 0}, {0xA732, 0xA76F, 0}, {0xA779, 0xA77C, 1},
};

/* Whole ranges of one case. */
static const struct {
    long lo, hi;
    tx_class c;
} ranges[] = {
    {'A', 'Z', TX_UPPER},         {'a', 'z', TX_LOWER},         {0xC0, 0xD6, TX_UPPER},
    {0xD8, 0xDE, TX_UPPER},       {0xDF, 0xF6, TX_LOWER},       {0xF8, 0xFF, TX_LOWER},
    {0x0138, 0x0138, TX_LOWER},   {0x0149, 0x0149, TX_LOWER},   {0x0178, 0x0178, TX_UPPER},
    {0x017F, 0x017F, TX_LOWER},   {0x0250, 0x02AF, TX_LOWER},   {0x0386, 0x0386, TX_UPPER},
    {0x0388, 0x038F, TX_UPPER},   {0x0390, 0x0390, TX_LOWER},   {0x0391, 0x03AB, TX_UPPER},
    {0x03AC, 0x03CE, TX_LOWER},   {0x0400, 0x042F, TX_UPPER},   {0x0430, 0x045F, TX_LOWER},
    {0x04C0, 0x04C0, TX_UPPER},   {0x04CF, 0x04CF, TX_LOWER},   {0x0531, 0x0556, TX_UPPER},
    {0x0560, 0x0588, TX_LOWER},   {0x10A0, 0x10CD, TX_UPPER},   {0x13A0, 0x13F5, TX_UPPER},
    {0x1C90, 0x1CBF, TX_UPPER},   {0x1D00, 0x1DBF, TX_LOWER},   {0x1E96, 0x1E9D, TX_LOWER},
    {0x1E9E, 0x1E9E, TX_UPPER},   {0x2C00, 0x2C2F, TX_UPPER},   {0x2C30, 0x2C5F, TX_LOWER},
    {0xFF21, 0xFF3A, TX_UPPER},   {0xFF41, 0xFF5A, TX_LOWER},
};

/* Greek with accents and breathings (U+1F00..U+1FFF): in most rows of 16 the first eight are
 * lower case and the last eight upper; near enough to tell a sentence start. */
static tx_class greek_extended(long cp) {
    return (cp & 0xF) >= 8 ? TX_UPPER : TX_LOWER;
}

/* Punctuation and symbols outside ASCII that must not count as letters. */
static int is_punct(long cp) {
    return (cp >= 0xA1 && cp <= 0xBF) || cp == 0xD7 || cp == 0xF7 || (cp >= 0x2010 && cp <= 0x2BFF) ||
           (cp >= 0x3001 && cp <= 0x3004) || (cp >= 0x3008 && cp <= 0x3020) || cp == 0x30FB ||
           (cp >= 0xFE10 && cp <= 0xFE6F) || (cp >= 0xFF01 && cp <= 0xFF0F) ||
           (cp >= 0xFF1A && cp <= 0xFF20) || (cp >= 0xFF3B && cp <= 0xFF40) ||
           (cp >= 0xFF5B && cp <= 0xFF65) || cp == 0x037E || cp == 0x0387 || cp == 0x055C ||
           cp == 0x055D || cp == 0x055E || cp == 0x0589 || cp == 0x060C || cp == 0x061B ||
           cp == 0x061F || cp == 0x06D4 || cp == 0x0964 || cp == 0x0965 || cp == 0x1362 ||
           (cp >= 0x1F000 && cp <= 0x1FAFF);
}

static int is_digit(long cp) {
    return (cp >= '0' && cp <= '9') || (cp >= 0x0660 && cp <= 0x0669) || (cp >= 0x06F0 && cp <= 0x06F9) ||
           (cp >= 0x0966 && cp <= 0x096F) || (cp >= 0xFF10 && cp <= 0xFF19);
}

tx_class tx_classify(long cp) {
    if (cp < 0) return TX_OTHER;
    if (is_space(cp)) return TX_SPACE;
    if (is_digit(cp)) return TX_DIGIT;
    if (cp < 0x80) return ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') ? (cp < 'a' ? TX_UPPER : TX_LOWER) : TX_OTHER;
    for (size_t i = 0; i < sizeof ranges / sizeof *ranges; i++)
        if (cp >= ranges[i].lo && cp <= ranges[i].hi) return ranges[i].c;
    for (size_t i = 0; i < sizeof alternating / sizeof *alternating; i++)
        if (cp >= alternating[i].lo && cp <= alternating[i].hi)
            return ((cp & 1) == alternating[i].odd_upper) ? TX_UPPER : TX_LOWER;
    if (cp >= 0x1F00 && cp <= 0x1FFF) return greek_extended(cp);
    if (is_punct(cp)) return TX_OTHER;
    return TX_LETTER;
}

tx_class tx_class_at(const char *s, size_t n) {
    long cp;
    tx_decode(s, n, &cp);
    return tx_classify(cp);
}

size_t tx_skip_space(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        long cp;
        int k = tx_decode(s + i, n - i, &cp);
        if (!is_space(cp) || cp < 0) break;
        i += (size_t)k;
    }
    return i;
}

/* ---------------------------------------------------------------------------------------
 * stops, quotes and brackets */

int tx_stop_kind(long cp) {
    switch (cp) {
    case '.':
    case 0x2026: /* … */
        return 1;
    case '!':
    case '?':
    case 0x061F: /* Arabic question mark */
    case 0x037E: /* Greek question mark (most text uses ';', which cannot count) */
    case 0x06D4: /* Urdu full stop */
    case 0x0589: /* Armenian full stop */
    case 0x0964: /* Devanagari danda */
    case 0x0965: /* double danda */
    case 0x1362: /* Ethiopic full stop */
    case 0x203C: /* ‼ */
    case 0x2047: /* ⁇ */
    case 0x2048: /* ⁈ */
    case 0x2049: /* ⁉ */
        return 2;
    case 0x3002: /* 。 */
    case 0xFF01: /* ！ */
    case 0xFF1F: /* ？ */
    case 0xFF61: /* ｡ */
        return 3;
    default:
        return 0;
    }
}

/* Quotes serve both ways: German „…“ closes with the English opening quote, Swiss «…» and
 * German »…« use the same guillemets in opposite directions. Only the position decides:
 * right after a stop a quote closes, right before a word it opens. */
static int is_quote(long cp) {
    return cp == '"' || cp == '\'' || cp == 0xAB || cp == 0xBB || (cp >= 0x2018 && cp <= 0x201F) ||
           cp == 0x2039 || cp == 0x203A || cp == 0x300C || cp == 0x300D || cp == 0x300E ||
           cp == 0x300F || cp == 0xFF02 || cp == 0xFF07;
}

int tx_is_closer(long cp) {
    return is_quote(cp) || cp == ')' || cp == ']' || cp == '}' || cp == 0xFF09 || cp == 0x3011 ||
           cp == 0x3009 || cp == 0x300B || cp == 0xFF3D;
}

int tx_is_opener(long cp) {
    return is_quote(cp) || cp == '(' || cp == '[' || cp == '{' || cp == 0xFF08 || cp == 0x3010 ||
           cp == 0x3008 || cp == 0x300A || cp == 0xFF3B || cp == 0xBF /* ¿ */ || cp == 0xA1 /* ¡ */;
}
