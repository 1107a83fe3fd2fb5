/* Byte-level BPE decoding as HF's slow tokenizers do it: runs of tokens' bytes decoded as
 * UTF-8 with errors="replace", added tokens as their text; Whisper's prompt and timestamp
 * rules on top (bpe_whisper_decode). */
#include <stdlib.h>
#include <string.h>

#include "bpe_internal.h"

/* Valid UTF-8 of in[0..n) to out, each maximal invalid subsequence (the longest start of a
 * valid sequence, or one byte) as U+FFFD, as Python's bytes.decode("utf-8", "replace").
 * out needs 3 bytes per input byte at most (one U+FFFD per byte); returns bytes written. */
static size_t utf8_replace(const unsigned char *in, size_t n, unsigned char *out) {
    size_t o = 0, k;
    uint32_t cp;
    for (size_t i = 0; i < n;) {
        if (bpe_utf8_next(in + i, n - i, &cp, &k) == 0) {
            memcpy(out + o, in + i, k);
            o += k;
            i += k;
            continue;
        }
        /* the maximal subpart: a lead byte and the continuation bytes that still fit it */
        size_t want = in[i] >= 0xf0 ? 4 : in[i] >= 0xe0 ? 3 : 2, j = 1;
        if (in[i] >= 0xc2 && in[i] <= 0xf4) {
            unsigned lo = in[i] == 0xe0 ? 0xa0 : in[i] == 0xf0 ? 0x90 : 0x80;
            unsigned hi = in[i] == 0xed ? 0x9f : in[i] == 0xf4 ? 0x8f : 0xbf;
            while (j < want && i + j < n && in[i + j] >= (j == 1 ? lo : 0x80) && in[i + j] <= (j == 1 ? hi : 0xbf)) j++;
        }
        o += bpe_utf8_put(0xfffd, out + o);
        i += j;
    }
    return o;
}

/* Whether id gives no text: out of range, no token, or skipped as special. */
static int silent(const bpe_model *m, int id, int skip_special) {
    if (id < 0 || id >= m->n_tokens || m->token_sym[id] < 0) return 1;
    return skip_special && m->kind[id] == BPE_SPECIAL;
}

char *bpe_decode(const bpe_model *m, const int *ids, int n, int skip_special, size_t *len) {
    size_t total = 0, run_max = 0, run = 0;
    for (int i = 0; i < n; i++) { /* the output's bound: a run's bytes may triple */
        if (silent(m, ids[i], skip_special)) continue;
        size_t b = m->bytes_len[ids[i]];
        if (m->kind[ids[i]] == BPE_NORMAL) {
            run += b;
            total += 3 * b;
        } else {
            run = 0;
            total += b;
        }
        if (run > run_max) run_max = run;
    }
    unsigned char *out = malloc(total + 1), *pending = malloc(run_max + 1);
    if (!out || !pending) {
        free(out);
        free(pending);
        return NULL;
    }
    size_t o = 0, np = 0;
    for (int i = 0; i < n; i++) {
        int id = ids[i];
        if (silent(m, id, skip_special)) continue;
        const unsigned char *b = m->bytes + m->bytes_off[id];
        if (m->kind[id] == BPE_NORMAL) {
            memcpy(pending + np, b, m->bytes_len[id]);
            np += m->bytes_len[id];
            continue;
        }
        o += utf8_replace(pending, np, out + o); /* an added token ends the run before it */
        np = 0;
        memcpy(out + o, b, m->bytes_len[id]);
        o += m->bytes_len[id];
    }
    o += utf8_replace(pending, np, out + o);
    free(pending);
    out[o] = 0;
    if (len) *len = o;
    return (char *)out;
}

/* "<|" digits "." digits "|>" at text[i..len): its length, or 0 (digits: Unicode \d) */
static size_t timestamp_at(const unsigned char *t, size_t len, size_t i) {
    if (i + 2 > len || t[i] != '<' || t[i + 1] != '|') return 0;
    size_t j = i + 2;
    for (int part = 0; part < 2; part++) {
        size_t start = j, k;
        uint32_t cp;
        while (j < len && bpe_utf8_next(t + j, len - j, &cp, &k) == 0 && bpe_is_digit(cp)) j += k;
        if (j == start) return 0;
        if (part == 0) {
            if (j >= len || t[j] != '.') return 0;
            j++;
        }
    }
    if (j + 2 > len || t[j] != '|' || t[j + 1] != '>') return 0;
    return j + 2 - i;
}

size_t bpe_strip_timestamps(char *text, size_t len) {
    unsigned char *t = (unsigned char *)text;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t k = timestamp_at(t, len, i);
        if (k) {
            i += k;
            continue;
        }
        t[o++] = t[i++];
    }
    if (o < len) t[o] = 0;
    return o;
}

char *bpe_whisper_decode(const bpe_model *m, const int *ids, int n, int skip_special, int startofprev,
                         int startoftranscript, size_t *len) {
    if (skip_special && n > 0 && startofprev >= 0 && ids[0] == startofprev) {
        int i = 0; /* HF's _strip_prompt: keep from <|startoftranscript|> on, or nothing */
        while (i < n && ids[i] != startoftranscript) i++;
        ids += i;
        n -= i;
    }
    size_t n_out;
    char *text = bpe_decode(m, ids, n, skip_special, &n_out);
    if (!text) return NULL;
    n_out = bpe_strip_timestamps(text, n_out);
    text[n_out] = 0;
    if (len) *len = n_out;
    return text;
}
