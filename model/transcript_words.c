/* transcript_words: a transcript's words and their times (transcript_words.h). Each window's
 * token times come from token_times() over its alignment heads' cross-attention; the
 * words from token_words() over each segment's text tokens, as HF's pipeline
 * (_decode_asr, _collate_word_timestamps) builds them from the segments' token timestamps
 * laid end to end: a token runs from its time to the next token's (both rounded to 0.01 s),
 * the next token being the segment's next one (a timestamp token included) or the next
 * segment's first; the transcript's very last token ends where it starts (HF: None). */
#include "transcript_words.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tokenizer/bpe.h"
#include "attend_model.h"
#include "token_times.h"

#define MEDIAN_WIDTH 7          /* WhisperConfig.median_filter_width (every OpenAI checkpoint's) */
#define SECONDS_PER_COLUMN 0.02 /* an encoder frame */

/* ---------------------------------------------------------------------------------------
 * Token times, window by window */

int word_timer_start(word_timer *w, const attend_config *c, attend_params *p, char *err, size_t errlen) {
    if (c->n_alignment_heads < 1) {
        snprintf(err, errlen, "word timestamps: this model's file records no alignment heads "
                              "(whisper.alignment_heads; export it again with tools/export_whisper.py)");
        return -1;
    }
    w->n_heads = c->n_alignment_heads;
    p->cross_heads = c->alignment_heads, p->n_cross_heads = c->n_alignment_heads;
    return 0;
}

static int append_tokens(word_timer *w, const double *times, const float *logprob, int n, double offset) {
    if (w->n + (size_t)n > w->cap) {
        const size_t cap = w->n + (size_t)n > 2 * w->cap ? w->n + (size_t)n : 2 * w->cap;
        float *t = realloc(w->times, sizeof(float) * (cap + 1));
        if (t) w->times = t;
        float *p = realloc(w->probs, sizeof(float) * (cap + 1));
        if (p) w->probs = p;
        if (!t || !p) return -1;
        w->cap = cap;
    }
    for (int i = 0; i < n; i++) {
        /* HF: the float32 timestamps plus the window's offset, summed in float32 */
        w->times[w->n] = (float)times[i] + (float)offset;
        w->probs[w->n++] = logprob ? expf(logprob[i]) : 0.0f;
    }
    return 0;
}

int word_timer_window(word_timer *w, const attend_result *r, int k, const attend_transcript *t, int first,
                      double offset, int audio_frames, char *err, size_t errlen) {
    int used = 0;
    for (int s = first; s < t->n_segments; s++) used += t->segments[s].n_ids;
    if (used == 0) return 0;
    if (!r->head_cross || w->n_heads < 1 || k + used > r->n_tgt) {
        snprintf(err, errlen, "word timestamps: the window's alignment-head attention is missing");
        return -1;
    }
    double *times = malloc(sizeof(double) * (size_t)r->n_tgt);
    if (!times) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = token_times(r->head_cross, w->n_heads, r->n_tgt, r->n_src, audio_frames / 2, MEDIAN_WIDTH,
                         SECONDS_PER_COLUMN, times, err, errlen);
    /* row k + j predicted the window's token j: that token's time */
    if (!rc && append_tokens(w, times + k, r->logprob ? r->logprob + k : NULL, used, offset)) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
    }
    free(times);
    return rc;
}

void word_timer_free(word_timer *w) {
    free(w->times);
    free(w->probs);
    w->times = w->probs = NULL;
    w->n = w->cap = 0;
}

/* ---------------------------------------------------------------------------------------
 * Token bytes */

/* GPT-2's byte-level alphabet: bytes 33-126, 161-172 and 174-255 stand for themselves, the
 * others, in order, for code points 256 on. */
static int printable_byte(int b) {
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}

/* The byte code point cp stands for, or -1. */
static int alphabet_byte(uint32_t cp) {
    if (cp < 256) return printable_byte((int)cp) ? (int)cp : -1;
    int k = (int)cp - 256;
    for (int b = 0; b < 256; b++)
        if (!printable_byte(b) && k-- == 0) return b;
    return -1;
}

/* Text token id's bytes into out (room for its byte-level string's length): their count,
 * or -1 for an id without such a string. */
static int token_bytes(const bpe_model *bpe, int id, char *out) {
    const unsigned char *s = (const unsigned char *)bpe_token(bpe, id);
    if (!s) return -1;
    int n = 0;
    while (*s) {
        uint32_t cp = *s++;
        if (cp >= 0xc0 && (*s & 0xc0) == 0x80) cp = (cp & 0x1f) << 6 | (*s++ & 0x3f); /* the alphabet: < U+0800 */
        const int b = alphabet_byte(cp);
        if (b < 0) return -1;
        out[n++] = (char)b;
    }
    return n;
}

/* ---------------------------------------------------------------------------------------
 * Words, segment by segment */

/* Python's round(x, 2) of a time near a multiple of 0.01 s (no halfway cases there). */
static double round_centis(float x) {
    return nearbyint((double)x * 100.0) / 100.0;
}

/* Append words[0..n) to t->words (*cap allocated). 0 or -1 (OOM). */
static int add_words(attend_transcript *t, int *cap, const timed_word *words, int n) {
    if (t->n_words + n > *cap) {
        const int c = t->n_words + n > 2 * *cap ? t->n_words + n : 2 * *cap;
        attend_word *a = realloc(t->words, sizeof *a * (size_t)c);
        if (!a) return -1;
        t->words = a, *cap = c;
    }
    for (int i = 0; i < n; i++) {
        char *text = strdup(words[i].text);
        if (!text) return -1;
        t->words[t->n_words++] = (attend_word){words[i].start, words[i].end, text, words[i].probability};
    }
    return 0;
}

/* Segment s's text tokens (ids below <|endoftext|>) with times T and probabilities P (one
 * per id), next: the next segment's first time (NULL: none), merged into words appended to
 * t. 0, or -1 with err. */
static int segment_words(const s2s_model *m, const attend_segment *s, const float *T, const float *P,
                         const float *next, int unicode, attend_transcript *t, int *cap, char *err, size_t errlen) {
    const int n = s->n_ids;
    size_t room = 1;
    for (int i = 0; i < n; i++) {
        const char *name = s->ids[i] < m->c.eos_id ? bpe_token(m->bpe, s->ids[i]) : NULL;
        room += name ? strlen(name) : 0;
    }
    char *bytes = malloc(room), **tok = malloc(sizeof(char *) * (size_t)n + 1);
    int *len = malloc(sizeof(int) * (size_t)n + 1), kept = 0, rc = -1, nw = 0;
    double *start = malloc(sizeof(double) * (size_t)n + 1), *end = malloc(sizeof(double) * (size_t)n + 1);
    float *prob = malloc(sizeof(float) * (size_t)n + 1);
    timed_word *words = NULL;
    if (!bytes || !tok || !len || !start || !end || !prob) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        if (s->ids[i] >= m->c.eos_id) continue; /* timestamps and other special tokens */
        const int b = token_bytes(m->bpe, s->ids[i], bytes + at);
        if (b < 0) {
            snprintf(err, errlen, "word timestamps: token %d has no bytes", s->ids[i]);
            goto done;
        }
        tok[kept] = bytes + at, len[kept] = b, at += (size_t)b;
        start[kept] = round_centis(T[i]);
        end[kept] = round_centis(i + 1 < n ? T[i + 1] : next ? *next : T[i]);
        prob[kept++] = P[i];
    }
    nw = kept ? token_words((const char *const *)tok, len, kept, start, end, prob, unicode, &words, err, errlen) : 0;
    rc = nw < 0 ? -1 : add_words(t, cap, words, nw);
    if (nw >= 0 && rc) snprintf(err, errlen, "out of memory");
done:
    timed_words_free(words, nw > 0 ? nw : 0);
    free(bytes), free(tok), free(len), free(start), free(end), free(prob);
    return rc;
}

int word_timer_words(const word_timer *w, const attend_model *am, attend_transcript *t, char *err, size_t errlen) {
    size_t total = 0;
    for (int s = 0; s < t->n_segments; s++) total += (size_t)t->segments[s].n_ids;
    if (total != w->n) {
        snprintf(err, errlen, "word timestamps: %zu token times for %zu tokens", w->n, total);
        return -1;
    }
    const int unicode = token_words_unicode_language(t->language);
    int cap = 0;
    size_t at = 0;
    for (int s = 0; s < t->n_segments; s++) {
        attend_segment *seg = &t->segments[s];
        const float *next = s + 1 < t->n_segments ? &w->times[at + (size_t)seg->n_ids] : NULL;
        seg->first_word = t->n_words;
        if (segment_words(am->m, seg, w->times + at, w->probs + at, next, unicode, t, &cap, err, errlen)) return -1;
        seg->n_words = t->n_words - seg->first_word;
        at += (size_t)seg->n_ids;
    }
    return 0;
}
