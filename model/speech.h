/* speech: the internal pieces of the speech calls that transcribe.c and speech_fallback.c
 * share with speech_api.c. Internal to libattend; the public API is attend.h. */
#ifndef ATTEND_SPEECH_H
#define ATTEND_SPEECH_H

#include "attend.h"

/* What attend_decode_features does not give its callers, asked for by the library's own. */
typedef struct {
    float *first_logits;   /* if not NULL: n rows of decoder_vocab_size raw logits, those after
                              <|startoftranscript|> (the no-speech probability reads them) */
    int processed_logprob; /* out[i].logprob under HF's recorded (processed) scores */
    struct s2s_encoded *encoded; /* if not NULL: n windows' encoder outputs kept across calls
                                    (translate.h's s2s_source.encoded) */
} speech_extras;

/* attend_decode_features with extras (x may be NULL). */
int speech_decode(attend_model *am, const float *const *mels, int n, const attend_speech_params *sp,
                  const attend_params *p, const speech_extras *x, attend_result *out, const char **languages,
                  char *err, size_t errlen);
/* sp->task with ATTEND_TASK_MODEL resolved as HF's _retrieve_init_tokens does:
 * ATTEND_TASK_TRANSCRIBE, _TRANSLATE, or SPEECH_TASK_NONE (no task token). */
#define SPEECH_TASK_NONE 3
int speech_resolve_task(const attend_model *am, const attend_speech_params *sp);
/* The code of the language the checkpoint's forced_decoder_ids fix, when sp gives neither a
 * language nor a task (HF's generate() writes it then instead of detecting one); else NULL. */
const char *speech_forced_language(const attend_model *am, const attend_speech_params *sp);
/* The decoder prompt's tokens after <|startoftranscript|> (language, task, <|notimestamps|>)
 * that attend_decode_features puts first in tgt_ids. */
int speech_prompt_length(const attend_model *am, const attend_speech_params *sp);

/* One window decoded with HF's temperature fallback (generate_with_fallback). */
typedef struct {
    attend_result r;         /* the decode kept: the last temperature tried */
    int n_prompt;            /* r.tgt_ids starts with this many prompt tokens */
    float temperature;       /* the one r was decoded at */
    float avg_logprob;       /* HF's _retrieve_avg_logprobs of r (<|endoftext|> counted) */
    float compression_ratio; /* HF's _retrieve_compression_ratio of r's generated ids */
    float no_speech_prob;    /* softmax of the logits after <|startoftranscript|> at <|nospeech|> */
    int fallback;            /* the kept decode still asked for fallback (no temperature was left) */
    int skip;                /* no speech: the window gives no segments */
    const char *language;    /* the window's language code (given or detected; "en": English-only) */
} speech_window;

/* Decode one window (mel: n_mels x audio_frames) with sp's temperatures and thresholds, p's
 * search at temperature 0. 0, or -1 with err; free w->r with attend_result_free. */
int speech_decode_window(attend_model *am, const float *mel, const attend_speech_params *sp, const attend_params *p,
                         speech_window *w, char *err, size_t errlen);
/* HF's zlib compression ratio of ids (each id as int(log2(vocab) / 8) + 1 little-endian bytes). */
float speech_compression_ratio(const int *ids, int n, int vocab_size);

#endif
