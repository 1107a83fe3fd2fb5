/* transcript_words: word timestamps of a transcript (attend_speech_params.word_timestamps),
 * gathered window by window and made into words at the end, as Hugging Face's
 * return_token_timestamps and its pipeline make them (docs/whisper.md):
 *
 *   word_timer w = {0};
 *   word_timer_start(&w, config, &p, err, errlen);   // p now keeps the alignment heads
 *   for each window:  decode with p.cross_heads = the alignment heads, cut the segments, then
 *       word_timer_window(&w, &r, k, t, first_new_segment, offset, audio_frames, err, errlen);
 *   word_timer_words(&w, m, t, err, errlen);   // t->words, each segment's first_word/n_words
 *   word_timer_free(&w);
 *
 * Internal to libattend. */
#ifndef ATTEND_TRANSCRIPT_WORDS_H
#define ATTEND_TRANSCRIPT_WORDS_H

#include <stddef.h>

#include "attend.h"

/* Every segment token's time so far (seconds from the audio's start, float32 as HF keeps
 * them), in the order of the transcript's segments and their ids. */
typedef struct {
    int n_heads;  /* the alignment heads each window's head_cross holds (the caller's) */
    float *times; /* [n] each token's time */
    float *probs; /* [n] each token's probability (exp of the window's attend_result.logprob) */
    size_t n, cap;
} word_timer;

/* Word timestamps asked for: p (the windows' decoding) keeps the alignment heads'
 * cross-attention, w reads them. 0, or -1 with err (a model without alignment heads). */
int word_timer_start(word_timer *w, const attend_config *c, attend_params *p, char *err, size_t errlen);

/* One window's token times: r is the window's result with head_cross (the alignment heads,
 * attend_params.cross_heads), k the prompt's tokens at the start of r->tgt_ids, and
 * t->segments[first ..) the segments cut from r->tgt_ids + k (in order, end to end).
 * offset: the window's start in seconds; audio_frames: mel frames holding sound (HF's
 * num_frames; 0: the whole window). 0, or -1 with err. */
int word_timer_window(word_timer *w, const attend_result *r, int k, const attend_transcript *t, int first,
                      double offset, int audio_frames, char *err, size_t errlen);

/* t's words from the times gathered (one per segment token of t): t->words, t->n_words and
 * each segment's first_word / n_words. 0, or -1 with err (out of memory). */
int word_timer_words(const word_timer *w, const attend_model *m, attend_transcript *t, char *err, size_t errlen);

void word_timer_free(word_timer *w);

#endif
