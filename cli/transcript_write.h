/* transcript_write: a transcript (attend_transcript) in the formats speech tools exchange,
 * for attend transcribe --output and attend serve's /v1/audio endpoints:
 *
 *   transcript_write_options o = transcript_default_write_options();
 *   o.task = "transcribe";
 *   transcript_write(stdout, &t, "srt", &o);
 *
 * "text": the text, one line; "json": OpenAI's {"text": ...}; "verbose_json": OpenAI's
 * (task, language by name, duration, text, segments with id, seek, start, end, text,
 * tokens, temperature, avg_logprob, compression_ratio, no_speech_prob; words when asked);
 * "srt" and "vtt": one cue per segment, as openai-whisper's writers make them (the text
 * stripped, "-->" inside it written "->"). */
#ifndef ATTEND_CLI_TRANSCRIPT_WRITE_H
#define ATTEND_CLI_TRANSCRIPT_WRITE_H

#include <stdio.h>

#include "../model/attend.h"

typedef struct {
    const char *task;    /* verbose_json: "transcribe" or "translate" */
    double duration;     /* verbose_json: seconds of audio (<= 0: the transcript's) */
    int words;           /* verbose_json: the "words" list (empty when the transcript has none) */
    int timestamp_begin; /* the model's <|0.00|> id, for each segment's seek (-1: unknown) */
} transcript_write_options;

transcript_write_options transcript_default_write_options(void);

/* The formats transcript_write takes, NULL-terminated. */
extern const char *const TRANSCRIPT_FORMATS[];

/* t in format (one of TRANSCRIPT_FORMATS) to f. 0, or -1 for an unknown format (nothing
 * written). */
int transcript_write(FILE *f, const attend_transcript *t, const char *format, const transcript_write_options *o);

/* The model's <|0.00|> token (transcript_write_options.timestamp_begin), or -1. */
int transcript_timestamp_begin(const attend_model *m);

/* Whisper's English name of a language code ("de" -> "german"), or the code itself. */
const char *transcript_language_name(const char *code);
/* The code of a Whisper language name ("German", any case) or code: the code, or NULL. */
const char *transcript_language_code(const char *name);

#endif
