/* token_times: when each token of a Whisper transcript was heard, read from the
 * cross-attention of the model's alignment heads as Hugging Face's
 * _extract_token_timestamps reads it, and the tokens merged into timed words by its
 * pipeline's rules (tools/reference_whisper_timing.py is the reference both are tested on).
 *
 *   double times[ROWS];
 *   if (token_times(cross, heads, rows, 1500, audio_frames, 7, 0.02, times, err, sizeof err)) ...;
 *   // the token predicted by row r was heard from times[r] to times[r + 1]
 *   timed_word *w;
 *   int n = token_words(bytes, lens, n_tokens, starts, ends, NULL, 0, &w, err, sizeof err);
 *   ...
 *   timed_words_free(w, n);
 *
 * Thread safety: pure functions; no shared state. */
#ifndef ATTEND_TOKEN_TIMES_H
#define ATTEND_TOKEN_TIMES_H

#include <stddef.h>

/* The time each decoder row reaches on the dynamic-time-warping path through the alignment
 * heads' attention. attention: [heads][rows][frames] floats, the cross-attention of one
 * hypothesis over the encoder's frames, row r being the decoder position that predicted
 * token r + 1 of the sequence (the prompt's rows included: attend's row r of tgt_ids).
 * audio_frames: the encoder frames the audio covers (HF's num_frames // 2); only columns
 * [0, audio_frames) are read; <= 0 or above frames: all of them.
 * median_width: the median filter's width (odd; Whisper's median_filter_width is 7).
 * precision: seconds per encoder frame (0.02).
 * Steps, as HF: every column normalised over the rows (minus the mean, over the population
 * standard deviation, both summed in double and rounded to float: torch sums the mean in
 * float32 in an order of its own, which moves a value by an ulp at most, and no path in the
 * tests; a column whose rows are all equal becomes NaN (0 / 0), as HF's does for one row,
 * while for several equal rows HF gets NaN or +-inf depending on that rounding),
 * a median filter of median_width along each row (edges reflected; rows of median_width / 2
 * frames or fewer stay as they are), the mean over the heads, then DTW over minus that
 * matrix (float32 cumulative costs; the diagonal step only when strictly the cheapest, then
 * the upper cell, else the left cell). times[r] = (column where the path first reaches row
 * r) * precision, -precision when it reaches it before any column. HF's timestamps array is
 * 0 followed by times[0 .. rows) (HF keeps them as float32).
 * 0, or -1 with err: sizes out of range, an even width, a non-finite attention value in the
 * columns read, out of memory. */
int token_times(const float *attention, int heads, int rows, int frames, int audio_frames, int median_width,
                double precision, double *times, char *err, size_t errlen);

/* One word and when it was heard. */
typedef struct {
    char *text;         /* UTF-8 as Python decodes the tokens' bytes (U+FFFD for invalid bytes);
                         * starts with the space before the word, if any */
    int first, n;       /* its tokens: [first, first + n) of the tokens given */
    double start, end;  /* its first token's start, its last token's end */
    float probability;  /* the mean of its tokens' probabilities (0 when none were given) */
} timed_word;

/* Merge n text tokens into words as HF's pipeline does (_combine_tokens_into_words):
 * token[i] holds len[i] bytes (the token's decoded bytes, special tokens left out by the
 * caller); tokens are grouped until the group decodes to whole characters (a group never
 * completed by the last token is dropped, as HF drops it); unless unicode_split, a group
 * opens a new word when it starts with a space or is ASCII punctuation once stripped, else
 * it joins the word before; then punctuation in "\"'“¡¿([{-" after a space joins the next
 * word, and punctuation in "\"'.。,，!！?？:：”)]}、" the word before (OpenAI's lists).
 * unicode_split: 1 for languages written without spaces (token_words_unicode_language),
 * where every group is a word. start[i], end[i]: token i's times; prob (optional): its
 * probability. Returns the number of words, in *words (malloc'd; timed_words_free), or -1
 * with err (out of memory, a negative length). */
int token_words(const char *const *token, const int *len, int n, const double *start, const double *end,
                const float *prob, int unicode_split, timed_word **words, char *err, size_t errlen);
void timed_words_free(timed_word *words, int n);

/* 1 for the language codes HF splits at characters: zh, ja, th, lo, my, yue. */
int token_words_unicode_language(const char *code);

#endif
