/* explore_audio: attend explore on speech (a Whisper model). The first 30-second window of an
 * audio file (as attend transcribe --dump-attention reads it) is decoded with every decoder
 * head's cross-attention kept (not the self-attention, which the page does not show), and
 * written as one self-contained page
 * (python/attend/explore_audio.html, compiled in as explore_audio_html): the log-mel
 * spectrogram, the tokens placed in time, every decoder layer and head's cross-attention over
 * the 1500 encoder frames, the alignment heads. */
#ifndef ATTEND_CLI_EXPLORE_AUDIO_H
#define ATTEND_CLI_EXPLORE_AUDIO_H

#include "../model/attend.h"

typedef struct {
    const char *audio;      /* the file; "-": standard input */
    const char *output;     /* the page (NULL: explore.html; "-": standard output) */
    const char *model_name; /* the page header's model name */
    attend_speech_params sp;
    attend_params p;        /* search, threads, max_length */
    double max_seconds;     /* longer audio is refused (its features are of the whole audio) */
} explore_audio_options;

/* Read, decode and write the page; the exit status (after a message on failure; no page is
 * left behind). */
int explore_audio(attend_model *m, const explore_audio_options *o);

#endif
