/* transcript_write: a transcript (attend_transcript: segments, optional words) as plain text,
 * SubRip (.srt), WebVTT (.vtt) or JSON in the shape of OpenAI's verbose_json.
 *
 *   transcript_options o = {TRANSCRIPT_SRT, NULL, NULL};
 *   transcript_write(stdout, &transcript, &o);
 *
 * txt:  the transcript's text on one line (leading spaces dropped, line breaks as spaces).
 * srt:  numbered cues "1\n00:00:01,500 --> 00:00:03,000\ntext\n\n" (HH:MM:SS,mmm).
 * vtt:  "WEBVTT\n\n" then cues "00:00:01.500 --> 00:00:03.000\ntext\n\n" (HH:MM:SS.mmm).
 *       In both, a cue's text is its segment's without the spaces around it and with line
 *       breaks as spaces (a blank line would end the cue); srt turns "-->" into "->" as
 *       OpenAI's writer does, vtt escapes &, < and > (WebVTT's entities), so neither text
 *       holds a cue timing arrow. Segments whose text is blank get no cue; cues are numbered
 *       without gaps. Hours take as many digits as they need: 100 hours is "100:00:00,000"
 *       (WebVTT allows it; SRT players expect two digits, so past 99 hours they may not read
 *       the file). Negative times are written as 0.
 * json: {"file"?, "task"?, "language", "duration", "text", "segments": [{"id", "start",
 *       "end", "text", "tokens", "avg_logprob"}], "words"?: [{"word", "start", "end",
 *       "probability"}]}: times in seconds to the millisecond; a segment's text keeps its
 *       leading space (as OpenAI's do), the top text and the words do not; avg_logprob null
 *       when it is not a number; words only when the transcript has them.
 * Output is valid UTF-8: invalid bytes become U+FFFD. */
#ifndef ATTEND_TRANSCRIPT_WRITE_H
#define ATTEND_TRANSCRIPT_WRITE_H

#include <stddef.h>
#include <stdio.h>

#include "../model/attend.h"

enum { TRANSCRIPT_TXT, TRANSCRIPT_SRT, TRANSCRIPT_VTT, TRANSCRIPT_JSON };

typedef struct {
    int format;        /* TRANSCRIPT_* */
    const char *file;  /* json: a "file" field (NULL: none) */
    const char *task;  /* json: a "task" field, e.g. "transcribe" (NULL: none) */
} transcript_options;

/* The format named "txt", "srt", "vtt" or "json"; -1 for any other name. */
int transcript_format(const char *name);

/* seconds as HH:MM:SS followed by sep (',' for SRT, '.' for WebVTT) and milliseconds,
 * rounded to the nearest millisecond, into out (n bytes; 32 always suffice). */
void transcript_timestamp(char *out, size_t n, double seconds, char sep);

/* Write t to f in o->format. */
void transcript_write(FILE *f, const attend_transcript *t, const transcript_options *o);

#endif
