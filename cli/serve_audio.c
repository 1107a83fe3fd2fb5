/* POST /v1/audio/transcriptions and /v1/audio/translations (serve.h): the multipart form
 * OpenAI's clients send (file, model, language, prompt, response_format, temperature,
 * timestamp_granularities[]) checked on the HTTP thread into a job for a speech model's
 * worker, and errors in OpenAI's shape. Only the form is read here (pointers into the body,
 * serve_multipart.c); the audio itself is decoded by the worker (serve_speech.c). Fields the
 * server does not use are ignored, as OpenAI-compatible servers do; "prompt" is accepted and
 * not used (docs/serve.md). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "json.h"
#include "serve.h"
#include "transcript_write.h"

/* ---------------------------------------------------------------------------------------
 * OpenAI's errors */

int serve_oai_fail(serve_oai_error *e, int status, const char *param, const char *code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    e->status = status, e->param = param, e->code = code;
    return status;
}

/* OpenAI's "type" for a status. */
static const char *error_type(int status) {
    if (status == 429) return "requests";
    if (status >= 500) return "server_error";
    return "invalid_request_error";
}

char *serve_oai_error_body(const serve_oai_error *e, size_t *len) {
    char *out = NULL;
    FILE *f = open_memstream(&out, len);
    if (!f) return *len = 0, NULL;
    fputs("{\"error\":{\"message\":", f);
    json_str(f, e->message);
    fprintf(f, ",\"type\":\"%s\",\"param\":", error_type(e->status));
    if (e->param) json_str(f, e->param);
    else fputs("null", f);
    fputs(",\"code\":", f);
    if (e->code) json_str(f, e->code);
    else fputs("null", f);
    fputs("}}\n", f);
    if (fclose(f)) return free(out), *len = 0, NULL;
    return out;
}

void serve_audio_job_free(serve_audio_job *job) {
    if (!job) return;
    free(job->body);
    free(job->answer);
    free(job);
}

/* ---------------------------------------------------------------------------------------
 * The form's fields */

enum { FIELD_MAX = 256 }; /* bytes of a plain field's value */

static int named(const serve_part *p, const char *name) {
    return p->name_len == strlen(name) && !memcmp(p->name, name, p->name_len);
}

/* The last part named name, or NULL. */
static const serve_part *find(const serve_part *parts, int n, const char *name) {
    const serve_part *found = NULL;
    for (int i = 0; i < n; i++)
        if (named(&parts[i], name)) found = &parts[i];
    return found;
}

/* A plain field's value into out ("" when absent). 0, or 400 (too long, a NUL byte). */
static int field(const serve_part *parts, int n, const char *name, char out[FIELD_MAX], serve_oai_error *e) {
    const serve_part *p = find(parts, n, name);
    out[0] = 0;
    if (!p) return 0;
    if (p->len >= FIELD_MAX || memchr(p->data, 0, p->len))
        return serve_oai_fail(e, 400, name, NULL, "%s: at most %d bytes of text", name, FIELD_MAX - 1);
    memcpy(out, p->data, p->len);
    out[p->len] = 0;
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * The model */

static int name_is(const char *model_name, const char *asked) {
    const size_t n = strlen(asked);
    return !strcmp(model_name, asked) || (!strncmp(model_name, asked, n) && !strcmp(model_name + n, ".gguf"));
}

/* The speech models' names, for messages. */
static void speech_names(const serve_models *ms, char *out, size_t cap) {
    out[0] = 0;
    for (int k = 0; k < ms->n; k++)
        if (ms->list[k].speech)
            snprintf(out + strlen(out), cap - strlen(out), "%s%s", out[0] ? ", " : "", ms->list[k].name);
}

/* "model": a speech model's name (with or without .gguf); "" or OpenAI's "whisper-1": the
 * first speech model. Its index, or -status with e. */
static int pick_model(const serve_models *ms, const char *name, serve_oai_error *e) {
    char names[1024];
    speech_names(ms, names, sizeof names);
    if (!names[0])
        return -serve_oai_fail(e, 400, "model", "model_not_found", "this server has no speech model (start it "
                                                                    "with -m WHISPER.gguf)");
    for (int k = 0; k < ms->n; k++) {
        if (!*name || !strcmp(name, "whisper-1")) {
            if (ms->list[k].speech) return k;
        } else if (name_is(ms->list[k].name, name)) {
            if (ms->list[k].speech) return k;
            return -serve_oai_fail(e, 400, "model", "model_not_supported",
                                   "%s is a text model: it translates text (POST /translate, /v1/translate); the "
                                   "speech models here: %s", ms->list[k].name, names);
        }
    }
    return -serve_oai_fail(e, 404, "model", "model_not_found", "The model `%.60s` does not exist: the speech models "
                                                               "here: %s", name, names);
}

/* "language": a code or Whisper's name of a language the model has ("", "auto": detected),
 * and the task the model must support. The code into job->language. 0 or 400. */
static int check_language(const serve_model *sm, const char *asked, serve_audio_job *job, serve_oai_error *e) {
    const attend_config *c = attend_get_config(sm->m);
    const char *code = transcript_language_code(asked);
    if (sm->english_only || !c->n_languages) {
        if (job->task == ATTEND_TASK_TRANSLATE)
            return serve_oai_fail(e, 400, "model", "model_not_supported",
                                  "%s is an English-only model: it transcribes English, it cannot translate", sm->name);
        if (*asked && strcmp(asked, "auto") && !(code && !strcmp(code, "en")))
            return serve_oai_fail(e, 400, "language", "unsupported_language",
                                  "%s is an English-only model: language %.40s cannot be set", sm->name, asked);
        return 0;
    }
    if (!*asked || !strcmp(asked, "auto")) return 0;
    if (!code) code = asked;
    for (int i = 0; i < c->n_languages; i++)
        if (!strcmp(c->languages[i], code)) {
            snprintf(job->language, sizeof job->language, "%s", c->languages[i]);
            return 0;
        }
    return serve_oai_fail(e, 400, "language", "unsupported_language",
                          "language %.40s is not one of the %d of %s (ISO-639-1 codes: en, de, fr, ...)", asked,
                          c->n_languages, sm->name);
}

/* ---------------------------------------------------------------------------------------
 * The options */

static int read_format(const char *v, serve_audio_job *job, serve_oai_error *e) {
    const char *f = *v ? v : "json";
    for (int i = 0; TRANSCRIPT_FORMATS[i]; i++)
        if (!strcmp(f, TRANSCRIPT_FORMATS[i])) return snprintf(job->format, sizeof job->format, "%s", TRANSCRIPT_FORMATS[i]), 0;
    return serve_oai_fail(e, 400, "response_format", NULL,
                          "response_format %.40s: json, text, srt, verbose_json or vtt", v);
}

/* "temperature": 0 to 1. As OpenAI's API: above 0, sampling at it; 0 (or none), the
 * server's search (greedy or --beam) with OpenAI's fallback to higher temperatures while a
 * window's output looks wrong (serve_speech.c). */
static int read_temperature(const char *v, serve_audio_job *job, serve_oai_error *e) {
    if (!*v) return 0;
    char *end = NULL;
    const double t = strtod(v, &end);
    if (end == v || *end || !(t >= 0 && t <= 1))
        return serve_oai_fail(e, 400, "temperature", NULL, "temperature %.40s: a number from 0 to 1", v);
    job->temperature = (float)t;
    return 0;
}

/* Every "timestamp_granularities[]" part (or without the brackets): segment or word. */
static int read_granularities(const serve_part *parts, int n, serve_audio_job *job, serve_oai_error *e) {
    for (int i = 0; i < n; i++) {
        if (!named(&parts[i], "timestamp_granularities[]") && !named(&parts[i], "timestamp_granularities")) continue;
        const serve_part *p = &parts[i];
        if (p->len == 4 && !memcmp(p->data, "word", 4)) job->words = 1;
        else if (!(p->len == 7 && !memcmp(p->data, "segment", 7)))
            return serve_oai_fail(e, 400, "timestamp_granularities", NULL,
                                  "timestamp_granularities[]: segment or word, not %.*s", p->len > 40 ? 40 : (int)p->len,
                                  p->data);
    }
    if (job->words && strcmp(job->format, "verbose_json"))
        return serve_oai_fail(e, 400, "timestamp_granularities", NULL,
                              "timestamp_granularities[] word needs response_format verbose_json");
    return 0;
}

/* The options after the model: language, response_format, temperature, granularities, stream. */
static int read_options(const serve_part *parts, int n, const serve_model *sm, serve_audio_job *job,
                        serve_oai_error *e) {
    char v[FIELD_MAX];
    int rc = field(parts, n, "language", v, e);
    if (!rc) rc = check_language(sm, v, job, e);
    if (!rc) rc = field(parts, n, "response_format", v, e);
    if (!rc) rc = read_format(v, job, e);
    if (!rc) rc = field(parts, n, "temperature", v, e);
    if (!rc) rc = read_temperature(v, job, e);
    if (!rc) rc = read_granularities(parts, n, job, e);
    if (!rc) rc = field(parts, n, "stream", v, e);
    if (!rc && *v && strcmp(v, "false"))
        rc = serve_oai_fail(e, 400, "stream", NULL, "stream: streamed answers are not supported (send false or nothing)");
    return rc;
}

int serve_audio_parse(const serve_models *ms, const char *content_type, char *body, size_t len, int task,
                      serve_audio_job *job, int *model) {
    serve_oai_error *e = &job->error;
    serve_part parts[SERVE_FORM_PARTS];
    char err[256], v[FIELD_MAX];
    job->body = body, job->task = task;
    const int n = serve_multipart_parse(content_type, body ? body : "", len, parts, SERVE_FORM_PARTS, err, sizeof err);
    if (n < 0) return serve_oai_fail(e, 400, NULL, NULL, "%s (OpenAI's form: file, model, ...)", err);
    serve_oai_error ignored; /* a key too long to be one is no key: the gate refuses it */
    if (!field(parts, n, "api_key", v, &ignored)) snprintf(job->api_key, sizeof job->api_key, "%s", v);
    const serve_part *file = find(parts, n, "file");
    if (!file) return serve_oai_fail(e, 400, "file", NULL, "missing file: the audio, as the form's file field");
    if (!file->len) return serve_oai_fail(e, 400, "file", NULL, "the file is empty");
    job->file = file->data, job->file_len = file->len;
    int rc = field(parts, n, "model", v, e);
    const int k = rc ? -rc : pick_model(ms, v, e);
    if (k < 0) return -k;
    rc = read_options(parts, n, &ms->list[k], job, e);
    if (!rc) *model = k;
    return rc;
}
