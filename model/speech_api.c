/* The public speech calls (attend.h: attend_decode_features, attend_detect_language): one
 * 30-second window of log-mel features decoded as HF's WhisperForConditionalGeneration
 * .generate() decodes it. The prompt, the processors' settings and language detection live
 * here; the search itself is the one every model uses (generate.c, search.c). */
#include "attend.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../engine/kernels.h"
#include "api_run.h"
#include "attend_model.h"
#include "speech.h"

attend_speech_params attend_default_speech_params(void) {
    attend_speech_params sp = {0};
    sp.task = ATTEND_TASK_MODEL;
    return sp;
}

int speech_resolve_task(const attend_model *am, const attend_speech_params *sp) {
    const s2s_speech *s = &am->m->c.speech;
    if (sp->task != ATTEND_TASK_MODEL) return sp->task;
    if (sp->language && strcmp(sp->language, "auto")) return ATTEND_TASK_TRANSCRIBE; /* HF's default then */
    return s->forced_task_id == s->transcribe_id ? ATTEND_TASK_TRANSCRIBE
           : s->forced_task_id == s->translate_id ? ATTEND_TASK_TRANSLATE
                                                  : SPEECH_TASK_NONE;
}

/* The checkpoint's forced language (forced_decoder_ids' position 1), its index in
 * m->lang_code, when sp gives neither a language nor a task: only then does HF's
 * _retrieve_init_tokens read forced_decoder_ids. -1 otherwise. */
static int forced_language(const s2s_model *m, const attend_speech_params *sp) {
    const int id = m->c.speech.forced_language_id;
    if (id < 0 || !m->c.speech.multilingual || sp->task != ATTEND_TASK_MODEL ||
        (sp->language && strcmp(sp->language, "auto")))
        return -1;
    for (int i = 0; i < m->n_langs; i++)
        if (m->lang_id[i] == id) return i;
    return -1;
}

const char *speech_forced_language(const attend_model *am, const attend_speech_params *sp) {
    const int lang = forced_language(am->m, sp);
    return lang >= 0 ? am->m->lang_code[lang] : NULL;
}

static int need_speech(const attend_model *am, char *err, size_t errlen) {
    if (!am->m->c.family->audio) {
        snprintf(err, errlen, "a text model (%s): it translates text, it does not read audio",
                 am->m->c.family->name);
        return -1;
    }
    if (am->inspect_only) {
        snprintf(err, errlen, "the model was loaded for inspection only (attend_load_params.inspect_only)");
        return -1;
    }
    return 0;
}

/* The language token of code, or -1 with err naming the codes. */
static int speech_language(const s2s_model *m, const char *code, char *err, size_t errlen) {
    for (int i = 0; i < m->n_langs; i++)
        if (!strcmp(m->lang_code[i], code)) return i;
    snprintf(err, errlen, "language '%s' is not one of this model's %d (en, de, fr, ...; or auto)", code,
             m->n_langs);
    return -1;
}

int attend_detect_language(attend_model *am, const float *mel, const attend_params *p, const char **code,
                           float *probs, char *err, size_t errlen) {
    const s2s_model *m = am->m;
    if (need_speech(am, err, errlen)) return -1;
    if (!m->c.speech.multilingual || m->n_langs == 0) {
        snprintf(err, errlen, "an English-only model: it has no language to detect");
        return -1;
    }
    if (!mel) {
        snprintf(err, errlen, "no features");
        return -1;
    }
    /* one decoder step from <|startoftranscript|>, its raw logits (no processors: HF runs the
     * model's forward directly) */
    s2s_search s = s2s_search_defaults(m);
    s.beams = 1, s.n_best = 1;
    s2s_timing timing;
    s2s_opts o = {.search = &s, .max_length = 2, .want_logits = 1, .stop = p ? p->stop : NULL,
                  .timing = p && p->stats ? &timing : NULL};
    s2s_source src = {.n = m->c.speech.n_frames, .mel = mel};
    s2s_output out = {0};
    const int caller_threads = at_set_threads(p ? p->threads : 0);
    const int rc = s2s_translate_ids(m, &src, 1, &o, &out, err, errlen);
    at_set_threads(caller_threads);
    if (rc) return -1;
    if (o.timing) { /* the caller's stats count this pass too */
        p->stats->encode_seconds += timing.encode, p->stats->decode_seconds += timing.decode;
        p->stats->steps += timing.steps, p->stats->encoder_passes += timing.encoded;
    }
    const float *row = out.logits;
    int best = 0;
    for (int i = 1; i < m->n_langs; i++)
        if (row[m->lang_id[i]] > row[m->lang_id[best]]) best = i; /* the first of equals, as argmax */
    if (probs) {
        double total = 0;
        for (int i = 0; i < m->n_langs; i++) total += exp((double)row[m->lang_id[i]] - row[m->lang_id[best]]);
        for (int i = 0; i < m->n_langs; i++)
            probs[i] = (float)(exp((double)row[m->lang_id[i]] - row[m->lang_id[best]]) / total);
    }
    *code = m->lang_code[best];
    s2s_output_free(&out);
    return 0;
}

/* The decoder prompt after <|startoftranscript|>: language and task (multilingual models;
 * task resolved by speech_resolve_task), <|notimestamps|> unless timestamps. Returns its
 * length (at most 3). */
static int speech_prompt(const s2s_model *m, int lang, const attend_speech_params *sp, int task, int *ids) {
    const s2s_speech *s = &m->c.speech;
    int n = 0;
    if (s->multilingual) {
        ids[n++] = m->lang_id[lang];
        if (task != SPEECH_TASK_NONE) ids[n++] = task == ATTEND_TASK_TRANSLATE ? s->translate_id : s->transcribe_id;
    }
    if (!sp->timestamps) ids[n++] = s->no_timestamps_id;
    return n;
}

/* Window i's language: given, or detected. Its index in m->lang_code, -1 for English-only
 * models, or -2 with err. */
static int window_language(attend_model *am, const float *mel, const attend_speech_params *sp,
                           const attend_params *p, char *err, size_t errlen) {
    const s2s_model *m = am->m;
    if (!m->c.speech.multilingual) {
        if (sp->language && strcmp(sp->language, "auto") && strcmp(sp->language, "en")) {
            snprintf(err, errlen, "an English-only model: language '%s' cannot be set", sp->language);
            return -2;
        }
        return -1;
    }
    const char *code = sp->language;
    if (!code || !strcmp(code, "auto")) {
        if (attend_detect_language(am, mel, p, &code, NULL, err, errlen)) return -2;
    }
    const int lang = speech_language(m, code, err, errlen);
    return lang >= 0 ? lang : -2;
}

/* The search for speech: p's over the model's defaults, with Whisper's processors. */
static int speech_search(const s2s_model *m, const attend_params *p, const attend_speech_params *sp, int n_prompt,
                         s2s_search *s, char *err, size_t errlen) {
    if (api_resolve_search(m, p, s, err, errlen)) return -1;
    s->suppress_tokens = m->suppress_ids;
    s->n_suppress_tokens = m->n_suppress_ids;
    s->begin_suppress = m->begin_suppress_ids;
    s->n_begin_suppress = m->n_begin_suppress_ids;
    s->begin_index = 1 + n_prompt;
    s->timestamps = sp->timestamps != 0;
    return 0;
}

/* The code of a language token chosen by the decode. */
static const char *detected_language(const s2s_model *m, int id) {
    for (int i = 0; i < m->n_langs; i++)
        if (m->lang_id[i] == id) return m->lang_code[i];
    return m->lang_code[0];
}

int attend_decode_features(attend_model *am, const float *const *mels, int n, const attend_speech_params *sp,
                           const attend_params *p, attend_result *out, const char **languages, char *err,
                           size_t errlen) {
    if (sp && sp->task == SPEECH_TASK_NONE) { /* internal: not the caller's to ask */
        snprintf(err, errlen, "bad arguments: task %d", sp->task);
        return -1;
    }
    return speech_decode(am, mels, n, sp, p, NULL, out, languages, err, errlen);
}

int speech_prompt_length(const attend_model *am, const attend_speech_params *sp) {
    int ids[3];
    return speech_prompt(am->m, 0, sp, speech_resolve_task(am, sp), ids);
}

int speech_decode(attend_model *am, const float *const *mels, int n, const attend_speech_params *sp,
                  const attend_params *p, const speech_extras *x, attend_result *out, const char **languages,
                  char *err, size_t errlen) {
    attend_params dp = attend_default_params();
    attend_speech_params dsp = attend_default_speech_params();
    if (!p) p = &dp;
    if (!sp) sp = &dsp;
    if (need_speech(am, err, errlen)) return -1;
    if (n < 0 || (n > 0 && !mels) || sp->task < 0 || sp->task > SPEECH_TASK_NONE) {
        snprintf(err, errlen, "bad arguments: n %d, mels %s, task %d", n, mels ? "set" : "NULL", sp->task);
        return -1;
    }
    const s2s_model *m = am->m;
    const int task = speech_resolve_task(am, sp), forced = forced_language(m, sp);
    const int detect =
        forced < 0 && m->c.speech.multilingual && m->n_langs > 0 && (!sp->language || !strcmp(sp->language, "auto"));
    memset(out, 0, sizeof *out * (size_t)n);
    s2s_source *src = calloc((size_t)n + 1, sizeof *src);
    int *prompts = malloc(sizeof(int) * 3 * ((size_t)n + 1)), n_prompt = 0, rc = -1;
    if (!src || !prompts) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        if (!mels[i]) {
            snprintf(err, errlen, "window %d: no features", i);
            goto done;
        }
        /* a language to detect is chosen at the decode's first step, on its own encoder
         * output (one encoder run a window); prompt[0] is a stand-in until then */
        const int lang = detect ? 0 : forced >= 0 ? forced : window_language(am, mels[i], sp, p, err, errlen);
        if (lang == -2) goto done;
        if (languages) languages[i] = lang >= 0 ? m->lang_code[lang] : "en";
        n_prompt = speech_prompt(m, lang, sp, task, prompts + 3 * i);
        out[i].n_src = m->c.speech.n_frames; /* the encoder's frames: the cross attention's columns */
        src[i] = (s2s_source){.n = m->c.speech.n_frames, .mel = mels[i], .prefix = n_prompt ? prompts + 3 * i : NULL,
                              .n_prefix = n_prompt,
                              .first_logits = x && x->first_logits ? x->first_logits + (size_t)i * m->c.decoder_vocab_size
                                                                   : NULL,
                              .first_choices = detect ? m->lang_id : NULL, .n_first_choices = detect ? m->n_langs : 0,
                              .encoded = x && x->encoded ? x->encoded + i : NULL};
    }
    s2s_search search;
    if (speech_search(m, p, sp, n_prompt, &search, err, errlen)) goto done;
    search.processed_logprob = x && x->processed_logprob;
    const int caller_threads = at_set_threads(p->threads);
    rc = api_run_batched(am, src, n, p, &search, out, err, errlen);
    at_set_threads(caller_threads);
    for (int i = 0; !rc && detect && languages && i < n; i++) languages[i] = detected_language(m, prompts[3 * i]);
done:
    free(src);
    free(prompts);
    return rc;
}
