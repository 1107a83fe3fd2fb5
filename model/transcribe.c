/* attend_transcribe_features: audio of any length as a list of timed segments, window by
 * window (attend.h). Each window of at most 30 s of features is decoded by
 * attend_decode_features; with timestamps its tokens are cut into segments at timestamp
 * pairs, and the next window starts where the last complete segment ended (HF's long-form
 * generate() and its _retrieve_segment: the seek rule). */
#include "attend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attend_model.h"
#include "transcript_words.h"
#include "speech.h"

#define SECONDS_PER_TOKEN 0.02 /* a timestamp token's step */
#define SECONDS_PER_FRAME 0.01 /* a feature frame (hop 160 at 16 kHz) */

typedef struct {
    attend_model *m;
    const attend_config *c;
    int eot, tb;       /* <|endoftext|>, the first timestamp token */
    attend_transcript *t;
    int cap;           /* segments allocated */
    word_timer *wt;    /* word timestamps: the token times so far (else NULL) */
    int audio_frames;  /* word timestamps: the mel frames of sound (0: every window whole) */
    int heard;         /* the features' frames of sound (a short clip's padding is none) */
} transcriber;

/* Append segment ids[0..n) from start to end seconds. 0 or -1 (OOM). */
static int add_segment(transcriber *x, const int *ids, const float *logprob, int n, double start, double end) {
    attend_transcript *t = x->t;
    if (t->n_segments == x->cap) {
        const int cap = x->cap ? 2 * x->cap : 8;
        attend_segment *s = realloc(t->segments, sizeof *s * (size_t)cap);
        if (!s) return -1;
        t->segments = s, x->cap = cap;
    }
    attend_segment *s = &t->segments[t->n_segments];
    memset(s, 0, sizeof *s);
    s->start = start, s->end = end;
    s->ids = malloc(sizeof(int) * ((size_t)n + 1));
    if (!s->ids) return -1;
    memcpy(s->ids, ids, sizeof(int) * (size_t)n);
    s->n_ids = n;
    double sum = 0;
    for (int i = 0; logprob && i < n; i++) sum += logprob[i];
    s->avg_logprob = n ? (float)(sum / n) : 0.0f;
    t->n_segments++;
    s->text = attend_detokenize(x->m, ids, n);
    return s->text ? 0 : -1;
}

/* A window's end in timestamp steps: its frames at 0.01 s rounded down to the 0.02 s step
 * (HF's int(seek_num_frames * time_precision_features / time_precision)). */
static int window_end_steps(int frames) {
    return (int)(frames * SECONDS_PER_FRAME / SECONDS_PER_TOKEN);
}

/* A window's tokens (after the prompt, without <|endoftext|>) into segments, as HF's
 * _retrieve_segment cuts them; *advance gets the frames the next window starts after.
 * offset: the window's start in seconds; frames: its real (unpadded) frames, heard: those of
 * them that hold sound (where a segment without a closing timestamp ends). */
static int cut_segments(transcriber *x, const int *seq, const float *lp, int n, double offset, int frames,
                        int heard, int *advance) {
    const int tb = x->tb;
    int pairs = 0, last_cut = 0, rc = 0;
    const int single_end = n >= 2 && seq[n - 2] < tb && seq[n - 1] >= tb;
    for (int i = 0; i + 1 < n; i++) pairs += seq[i] >= tb && seq[i + 1] >= tb;
    if (pairs == 0) { /* one segment: to the last timestamp, else to the window's end */
        int last = -1;
        for (int i = 0; i < n; i++) last = seq[i] >= tb ? seq[i] - tb : last;
        const double end = offset + (last > 0 ? last : window_end_steps(heard)) * SECONDS_PER_TOKEN;
        *advance = frames;
        return add_segment(x, seq, lp, n, offset, end);
    }
    /* cuts after each pair's first token; the last segment keeps its closing timestamp */
    int seen = 0;
    for (int i = 0; i + 1 < n && !rc; i++) {
        if (!(seq[i] >= tb && seq[i + 1] >= tb)) continue;
        const int closing = ++seen == pairs && !single_end; /* the last pair stays whole */
        const int cut = i + 1 + closing;
        const int *s = seq + last_cut, len = cut - last_cut;
        const int end_tok = s[len - 1 - closing]; /* the pair's first timestamp */
        rc = add_segment(x, s, lp ? lp + last_cut : NULL, len, offset + (s[0] - tb) * SECONDS_PER_TOKEN,
                         offset + (end_tok - tb) * SECONDS_PER_TOKEN);
        last_cut = cut;
    }
    if (!rc && single_end) rc = add_segment(x, seq + last_cut, lp ? lp + last_cut : NULL, n - last_cut,
                                           offset + (seq[last_cut] - tb) * SECONDS_PER_TOKEN,
                                           offset + (seq[n - 1] - tb) * SECONDS_PER_TOKEN);
    /* a single timestamp at the end: no speech after it, the whole window is done;
     * otherwise start again at the last complete segment's end, the first timestamp of the
     * last pair (HF's seek_sequence[last_slice - 2], OpenAI's tokens[last_slice - 1]; the
     * pair's second can be later), 2 frames a token step */
    *advance = single_end ? frames : 2 * (seq[last_cut - 2] - tb);
    return rc;
}

/* Window w of the features: frames [seek, seek + frames) of every mel row, zero-padded to a
 * whole window (HF pads a short last segment with zeros). */
static void take_window(const attend_config *c, const float *mel, int n_frames, int seek, int frames, float *w) {
    const int W = c->audio_frames;
    for (int r = 0; r < c->n_mels; r++) {
        memcpy(w + (size_t)r * W, mel + (size_t)r * n_frames + seek, sizeof(float) * (size_t)frames);
        memset(w + (size_t)r * W + frames, 0, sizeof(float) * (size_t)(W - frames));
    }
}

/* The window's measures onto its segments first .. t->n_segments (OpenAI's verbose_json
 * gives each segment its window's). */
static void window_measures(attend_transcript *t, int first, const speech_window *w) {
    for (int i = first; i < t->n_segments; i++) {
        attend_segment *s = &t->segments[i];
        s->avg_logprob = w->avg_logprob, s->no_speech_prob = w->no_speech_prob;
        s->temperature = w->temperature, s->compression_ratio = w->compression_ratio;
    }
}

/* Decode the window at seek into segments; *advance: frames to move on. 0 or -1 with err. */
static int transcribe_window(transcriber *x, const float *win, int seek, int frames, const attend_speech_params *sp,
                             const attend_params *p, int *advance, char *err, size_t errlen) {
    speech_window w;
    if (speech_decode_window(x->m, win, sp, p, &w, err, errlen)) return -1;
    const attend_result r = w.r;
    if (w.language) x->t->language = w.language;
    /* the prompt's tokens after <|startoftranscript|> come first: skip them, and the end */
    const int k = w.n_prompt, first = x->t->n_segments;
    const int heard = x->heard - seek < frames ? (x->heard > seek ? x->heard - seek : 0) : frames;
    int n = w.skip ? 0 : r.n_tgt - k; /* a window of no speech gives no segment */
    if (n > 0 && r.tgt_ids[r.n_tgt - 1] == x->eot) n--;
    int rc = 0;
    if (n > 0 && sp->timestamps)
        rc = cut_segments(x, r.tgt_ids + k, r.logprob ? r.logprob + k : NULL, n, seek * SECONDS_PER_FRAME, frames,
                          heard, advance);
    else if (n > 0) /* one decode, one segment (see docs/whisper.md: HF would still cut at pairs) */
        rc = add_segment(x, r.tgt_ids + k, r.logprob ? r.logprob + k : NULL, n, seek * SECONDS_PER_FRAME,
                         seek * SECONDS_PER_FRAME + window_end_steps(heard) * SECONDS_PER_TOKEN);
    if (n <= 0 || !sp->timestamps || *advance < 1) *advance = frames; /* never stand still */
    window_measures(x->t, first, &w);
    if (rc) snprintf(err, errlen, "out of memory");
    else if (x->wt) rc = word_timer_window(x->wt, &r, k, x->t, first, seek * SECONDS_PER_FRAME, x->audio_frames, err,
                                           errlen);
    attend_result_free(&w.r);
    return rc;
}

/* The segments' texts end to end. */
static char *join_texts(const attend_transcript *t) {
    size_t n = 1;
    for (int i = 0; i < t->n_segments; i++) n += strlen(t->segments[i].text);
    char *s = malloc(n), *at = s;
    if (!s) return NULL;
    for (int i = 0; i < t->n_segments; i++) at = stpcpy(at, t->segments[i].text);
    *at = 0;
    return s;
}

int attend_transcribe_features(attend_model *am, const float *mel, int n_frames, const attend_speech_params *sp,
                               const attend_params *p, attend_transcript *out, char *err, size_t errlen) {
    const attend_config *c = attend_get_config(am);
    memset(out, 0, sizeof *out);
    if (!c->audio || !mel || n_frames < 1) {
        snprintf(err, errlen, !c->audio ? "a text model: it does not read audio" : "no features");
        return -1;
    }
    const int W = c->audio_frames;
    attend_speech_params wsp = sp ? *sp : attend_default_speech_params();
    attend_params wp = p ? *p : attend_default_params();
    wp.want_scores = 1;
    wsp.timestamps = wsp.timestamps || n_frames > W; /* long-form needs the segments' times */
    const char *forced = speech_forced_language(am, &wsp); /* read before the task is resolved */
    wsp.task = speech_resolve_task(am, &wsp); /* once, as HF's init tokens: the language found is not "given" */
    if (forced) wsp.language = forced;
    transcriber x = {am, c, c->eos_id, am->m->c.speech.timestamp_begin_id, out, 0, NULL, 0, 0};
    word_timer wt = {0};
    float *win = malloc(sizeof(float) * (size_t)c->n_mels * W);
    int rc = -1;
    if (wsp.word_timestamps && word_timer_start(&wt, c, &wp, err, errlen)) goto done;
    if (wsp.word_timestamps) x.wt = &wt, x.audio_frames = n_frames <= W ? wsp.audio_frames : 0;
    x.heard = n_frames <= W && wsp.audio_frames > 0 && wsp.audio_frames < n_frames ? wsp.audio_frames : n_frames;
    if (!win) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    out->language = "en";
    /* the seek stops at the sound's end: HF's max_frames, from the attention mask of a known length */
    for (int seek = 0, advance = 0; seek < x.heard; seek += advance) {
        const int frames = n_frames - seek < W ? n_frames - seek : W;
        take_window(c, mel, n_frames, seek, frames, win);
        if (transcribe_window(&x, win, seek, frames, &wsp, &wp, &advance, err, errlen)) goto done;
        wsp.language = out->language; /* detected once, in the first window's decode, then kept */
    }
    /* the audio's own length when known: one short clip's features are padded to a window */
    out->duration = x.heard * SECONDS_PER_FRAME;
    out->text = join_texts(out);
    rc = out->text ? 0 : -1;
    if (rc) snprintf(err, errlen, "out of memory");
    else if (x.wt) rc = word_timer_words(x.wt, am, out, err, errlen);
done:
    word_timer_free(&wt);
    free(win);
    if (rc) attend_transcript_free(out);
    return rc;
}

void attend_transcript_free(attend_transcript *t) {
    if (!t) return;
    for (int i = 0; i < t->n_segments; i++) {
        free(t->segments[i].text);
        free(t->segments[i].ids);
    }
    for (int i = 0; i < t->n_words; i++) free(t->words[i].word);
    free(t->segments);
    free(t->words);
    free(t->text);
    memset(t, 0, sizeof *t);
}
