/* GPT-2's pre-tokenizer on UTF-8 bytes: the pattern
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * matched by hand, alternative by alternative, as the Python regex module's findall does
 * (leftmost match, first alternative that matches), with its character classes from the
 * generated tables in bpe_unicode.c. */
#include "bpe_internal.h"

int bpe_utf8_next(const unsigned char *s, size_t n, uint32_t *cp, size_t *len) {
    unsigned c = s[0];
    *len = 1;
    if (c < 0x80) {
        *cp = c;
        return 0;
    }
    size_t k;
    uint32_t v, lo = 0x80, hi = 0xbf; /* the second byte's range (Unicode table 3-7) */
    if (c >= 0xc2 && c <= 0xdf) k = 2, v = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) k = 3, v = c & 0x0f, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    else if (c >= 0xf0 && c <= 0xf4) k = 4, v = c & 0x07, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    else return -1;
    if (n < k || s[1] < lo || s[1] > hi) return -1;
    for (size_t i = 1; i < k; i++) {
        if (i > 1 && (s[i] < 0x80 || s[i] > 0xbf)) return -1;
        v = v << 6 | (s[i] & 0x3f);
    }
    *cp = v;
    *len = k;
    return 0;
}

size_t bpe_utf8_put(uint32_t cp, unsigned char *out) {
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xc0 | cp >> 6);
        out[1] = (unsigned char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xe0 | cp >> 12);
        out[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
        out[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (unsigned char)(0xf0 | cp >> 18);
    out[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
    out[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
    out[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

/* whether cp lies in one of n sorted inclusive ranges (binary search) */
static int in_ranges(const uint32_t (*r)[2], int n, uint32_t cp) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < r[mid][0]) hi = mid - 1;
        else if (cp > r[mid][1]) lo = mid + 1;
        else return 1;
    }
    return 0;
}

int bpe_char_class(uint32_t cp) {
    if (in_ranges(bpe_letter_ranges, bpe_letter_count, cp)) return BPE_LETTER;
    if (in_ranges(bpe_number_ranges, bpe_number_count, cp)) return BPE_NUMBER;
    if (in_ranges(bpe_space_ranges, bpe_space_count, cp)) return BPE_SPACE;
    return BPE_OTHER;
}

int bpe_is_digit(uint32_t cp) { return in_ranges(bpe_digit_ranges, bpe_digit_count, cp); }

/* The class of the character at text[pos] (pos < len) and its length; an invalid byte is a
 * one-byte BPE_OTHER. ASCII, most of the text, skips the tables. */
static int class_at(const unsigned char *text, size_t len, size_t pos, size_t *k) {
    unsigned c = text[pos];
    if (c < 0x80) {
        *k = 1;
        if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return BPE_LETTER;
        if (c >= '0' && c <= '9') return BPE_NUMBER;
        return c == ' ' || (c >= 9 && c <= 13) ? BPE_SPACE : BPE_OTHER;
    }
    uint32_t cp;
    if (bpe_utf8_next(text + pos, len - pos, &cp, k) < 0) return BPE_OTHER;
    return bpe_char_class(cp);
}

/* the end of the run of class cls that starts at pos (pos itself may be past it) */
static size_t run_end(const unsigned char *text, size_t len, size_t pos, int cls) {
    size_t k;
    while (pos < len && class_at(text, len, pos, &k) == cls) pos += k;
    return pos;
}

/* 's 't 're 've 'm 'll 'd at pos: the contraction's length, or 0 */
static size_t contraction(const unsigned char *t, size_t len, size_t pos) {
    if (t[pos] != '\'' || pos + 1 >= len) return 0;
    unsigned a = t[pos + 1], b = pos + 2 < len ? t[pos + 2] : 0;
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

size_t bpe_piece_end(const unsigned char *text, size_t len, size_t pos) {
    size_t k, k2, n = contraction(text, len, pos);
    if (n) return pos + n;
    int cls = class_at(text, len, pos, &k);
    /* ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: a space joins the run after it */
    if (text[pos] == ' ' && pos + 1 < len) {
        int next = class_at(text, len, pos + 1, &k2);
        if (next != BPE_SPACE) return run_end(text, len, pos + 1, next);
    }
    if (cls != BPE_SPACE) return run_end(text, len, pos, cls);
    /* `\s+(?!\S)`: the whitespace run, less its last character when text follows (if that
     * leaves any); else `\s+`: the whole run */
    size_t end = run_end(text, len, pos, BPE_SPACE);
    if (end == len) return end;
    size_t last = end - 1;
    while (last > pos && (text[last] & 0xc0) == 0x80) last--; /* the last character's start */
    return last > pos ? last : end;
}
