/* The models of one attend serve (serve.h): which model a request goes to, and the answers
 * that speak for all of them (GET /languages, GET /v1/model). A pair model (one source, one
 * target: its pair from -m FILE:SRC-TGT, --languages or the file's name) covers its pair; a
 * multilingual model (NLLB, M2M-100, mBART-50) any two of its languages. A request goes to
 * the first pair model that covers it, else the first multilingual one; /v1 may name its
 * model. With one model every request goes to it, as before several were possible. A speech
 * model (Whisper) is never routed text: naming it, or asking a server that has no other,
 * is refused saying where audio goes. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "serve.h"

/* ---------------------------------------------------------------------------------------
 * Routing */

static int has_language(const attend_model *m, const char *code) {
    const attend_config *c = attend_get_config(m);
    for (int i = 0; i < c->n_languages; i++)
        if (!strcmp(c->languages[i], code)) return 1;
    return 0;
}

/* Whether model k translates src into tgt ("" or "auto": any source; "": the model's
 * default target). */
static int covers(const serve_model *sm, const char *src, const char *tgt) {
    const int any_src = !*src || !strcmp(src, "auto");
    if (!attend_get_config(sm->m)->n_languages)
        return (any_src || !strcmp(src, sm->o.pair[0])) && (!*tgt || !strcmp(tgt, sm->o.pair[1]));
    if (!*tgt && !sm->o.common.tgt_lang) return 0;
    return (any_src || has_language(sm->m, src)) && has_language(sm->m, *tgt ? tgt : sm->o.common.tgt_lang);
}

/* A string field of the request ("" when absent or not a string). */
static void field(const cJSON *root, const char *name, char *out, size_t cap) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    snprintf(out, cap, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

/* The pairs the server covers, for an error message: "de-en (de-en), any two of its
 * languages (m2m)". */
static void list_pairs(const serve_models *ms, char *out, size_t cap) {
    size_t used = 0;
    out[0] = 0;
    for (int k = 0; k < ms->n && used < cap; k++) {
        const serve_model *sm = &ms->list[k];
        if (sm->speech) continue;
        char what[48];
        if (attend_get_config(sm->m)->n_languages) snprintf(what, sizeof what, "any two of its languages");
        else if (sm->o.pair[0][0]) snprintf(what, sizeof what, "%s-%s", sm->o.pair[0], sm->o.pair[1]);
        else snprintf(what, sizeof what, "its pair unknown");
        used += (size_t)snprintf(out + used, cap - used, "%s%s (%s)", used ? ", " : "", what, sm->name);
    }
}

/* A speech model asked to translate text: -400 with err saying where audio goes. */
static int speech_refused(const serve_model *sm, char *err, size_t errlen) {
    snprintf(err, errlen, "%s is a speech model: it transcribes audio (POST /v1/audio/transcriptions, "
                          "/v1/audio/translations), it does not translate text", sm->name);
    return -400;
}

/* The text models: how many, and the first (-1: none). */
static int text_models(const serve_models *ms, int *first) {
    int n = 0;
    *first = -1;
    for (int k = ms->n - 1; k >= 0; k--)
        if (!ms->list[k].speech) n++, *first = k;
    return n;
}

int serve_no_text_model(const serve_models *ms, char *err, size_t errlen) {
    int first;
    return text_models(ms, &first) ? 0 : -speech_refused(&ms->list[0], err, errlen);
}

int serve_route(const serve_models *ms, const cJSON *root, int api, char *err, size_t errlen) {
    int first;
    const int n_text = text_models(ms, &first);
    if (!n_text) return speech_refused(&ms->list[0], err, errlen);
    if (n_text == 1 && api != SERVE_V1) return first; /* its own checks (serve_request_parse) say what is wrong */
    if (!cJSON_IsObject(root)) return first; /* the first text model answers the malformed body as one model would */
    char src[64], tgt[64], name[160];
    field(root, api == SERVE_V1 ? "src_lang" : "source", src, sizeof src);
    field(root, api == SERVE_V1 ? "tgt_lang" : "target", tgt, sizeof tgt);
    field(root, "model", name, sizeof name);
    if (api == SERVE_V1 && *name) {
        for (int k = 0; k < ms->n; k++) { /* the file's name, with or without .gguf */
            const char *n = ms->list[k].name;
            const size_t len = strlen(name);
            if (!strcmp(n, name) || (!strncmp(n, name, len) && !strcmp(n + len, ".gguf")))
                return ms->list[k].speech ? speech_refused(&ms->list[k], err, errlen) : k;
        }
        char names[1024] = "";
        for (int k = 0; k < ms->n; k++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", k ? ", " : "", ms->list[k].name);
        snprintf(err, errlen, "no model named \"%.60s\": this server has %s", name, names);
        return -400;
    }
    if (n_text == 1) return first;
    for (int pass = 0; pass < 2; pass++) /* pair models first, then multilingual ones */
        for (int k = 0; k < ms->n; k++)
            if (!ms->list[k].speech && (attend_get_config(ms->list[k].m)->n_languages > 0) == pass &&
                covers(&ms->list[k], src, tgt))
                return k;
    char pairs[1024];
    list_pairs(ms, pairs, sizeof pairs);
    snprintf(err, errlen, "no model translates %.20s to %.20s: this server has %s (GET /languages)",
             *src ? src : "this source", *tgt ? tgt : "the default target", pairs);
    return -400;
}

/* ---------------------------------------------------------------------------------------
 * GET /languages for all the models */

/* Every code once, in the order the models name them, with the codes it translates into: a
 * multilingual model translates each of its codes into every other; a pair model its
 * source into its target (its target is listed, with no targets, so that a client checking
 * "target" against the codes finds it). */
typedef struct {
    const char *code;
    const char *targets[512];
    int n_targets;
} lang_entry;

static lang_entry *entry(lang_entry *list, int *n, int cap, const char *code) {
    for (int i = 0; i < *n; i++)
        if (!strcmp(list[i].code, code)) return &list[i];
    if (*n == cap) return NULL;
    list[*n].code = code;
    list[*n].n_targets = 0;
    return &list[(*n)++];
}

static void add_target(lang_entry *e, const char *code) {
    if (!e || !strcmp(e->code, code)) return;
    for (int i = 0; i < e->n_targets; i++)
        if (!strcmp(e->targets[i], code)) return;
    if (e->n_targets < (int)(sizeof e->targets / sizeof e->targets[0])) e->targets[e->n_targets++] = code;
}

static int collect_languages(const serve_models *ms, lang_entry *list, int cap) {
    int n = 0;
    for (int k = 0; k < ms->n; k++) {
        const serve_model *sm = &ms->list[k];
        const attend_config *c = attend_get_config(sm->m);
        if (sm->speech) continue; /* the languages it hears are not languages it translates */
        if (!c->n_languages && sm->o.pair[0][0]) {
            add_target(entry(list, &n, cap, sm->o.pair[0]), sm->o.pair[1]);
            entry(list, &n, cap, sm->o.pair[1]); /* listed, so that a client finds the target */
        }
        for (int i = 0; i < c->n_languages; i++) {
            lang_entry *e = entry(list, &n, cap, c->languages[i]);
            for (int j = 0; j < c->n_languages; j++) add_target(e, c->languages[j]);
        }
    }
    return n;
}

char *serve_models_languages(const serve_models *ms, size_t *len) {
    enum { CAP = 512 };
    lang_entry *list = calloc(CAP, sizeof *list);
    char *out = NULL;
    FILE *f = list ? open_memstream(&out, len) : NULL;
    if (!f) return free(list), NULL;
    const int n = collect_languages(ms, list, CAP);
    fputc('[', f);
    for (int i = 0; i < n; i++) {
        fputs(i ? ",{\"code\":" : "{\"code\":", f);
        json_str(f, list[i].code);
        fputs(",\"name\":", f);
        json_str(f, serve_lang_name(list[i].code));
        fputs(",\"targets\":", f);
        json_strs(f, list[i].targets, list[i].n_targets);
        fputc('}', f);
    }
    fputs("]\n", f);
    free(list);
    if (fclose(f)) return free(out), NULL;
    return out;
}

/* ---------------------------------------------------------------------------------------
 * GET /v1/model: the first model's facts (as with one model), and every model in "models" */

char *serve_models_json(const serve_models *ms, size_t *len) {
    char *out = NULL;
    FILE *f = open_memstream(&out, len);
    if (!f) return NULL;
    for (int k = 0; k < ms->n; k++) {
        size_t one_len;
        char *one = serve_response_model(ms->list[k].m, ms->list[k].name, &one_len);
        if (!one) return fclose(f), free(out), NULL;
        while (one_len && one[one_len - 1] == '\n') one_len--;
        if (one_len && one[one_len - 1] == '}') one_len--; /* the object reopened */
        if (k == 0) fprintf(f, "%.*s,\"models\":[", (int)one_len, one);
        fprintf(f, "%s%.*s,\"speech\":%s,\"pair\":", k ? "," : "", (int)one_len, one,
                ms->list[k].speech ? "true" : "false");
        if (ms->list[k].o.pair[0][0]) {
            const char *pair[2] = {ms->list[k].o.pair[0], ms->list[k].o.pair[1]};
            json_strs(f, pair, 2);
        } else {
            fputs("null", f);
        }
        fputc('}', f);
        free(one);
    }
    fputs("]}\n", f);
    if (fclose(f)) return free(out), NULL;
    return out;
}

int serve_models_pending(const serve_models *ms) {
    int n = 0;
    for (int k = 0; k < ms->n; k++)
        n += ms->list[k].speech ? serve_speech_pending(ms->list[k].sp) : serve_sched_pending(ms->list[k].s);
    return n;
}
