/* Which of a server's models answers a request (serve.h), and the endpoints that speak for
 * every model at once: GET /languages (merged) and GET /v1/model (with a "models" list).
 * The rule (docs/serve.md): /v1/translate's "model" names one; otherwise a pair model whose
 * pair is the request's source and target, else a multilingual model that has both codes,
 * each in the order given at start. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "serve.h"

static int has_code(const attend_model *m, const char *code) {
    const attend_config *c = attend_get_config(m);
    for (int i = 0; i < c->n_languages; i++)
        if (!strcmp(c->languages[i], code)) return 1;
    return 0;
}

/* Does model v take src to tgt? NULL: any ("auto" as source: any, for a pair model). */
static int covers(const serve_model *v, const char *src, const char *tgt, int multi) {
    if (multi != (attend_get_config(v->m)->n_languages > 0)) return 0;
    if (!multi)
        return (!src || !strcmp(src, "auto") || !strcmp(src, v->o.pair[0])) && (!tgt || !strcmp(tgt, v->o.pair[1]));
    return (!src || has_code(v->m, src)) && (!tgt || has_code(v->m, tgt));
}

static const char *string_field(const cJSON *root, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    return cJSON_IsString(v) && *v->valuestring ? v->valuestring : NULL;
}

/* "de-en, en-de, tiny-m2m (any two of its 4 languages)" */
static void list_pairs(const serve_models *t, int names, char *out, size_t n) {
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i < t->n && used < n; i++) {
        const serve_model *v = &t->v[i];
        const int langs = attend_get_config(v->m)->n_languages;
        const char *sep = i ? ", " : "";
        int k;
        if (names) k = snprintf(out + used, n - used, "%s%s", sep, v->name);
        else if (langs) k = snprintf(out + used, n - used, "%s%s (any two of its %d languages)", sep, v->name, langs);
        else k = snprintf(out + used, n - used, "%s%s-%s", sep, v->o.pair[0], v->o.pair[1]);
        used += k > 0 ? (size_t)k : 0;
    }
}

/* /v1/translate's "model": its index, or -400. */
static int by_model_name(const serve_models *t, const cJSON *model, char *err, size_t errlen) {
    char names[2048];
    for (int i = 0; cJSON_IsString(model) && i < t->n; i++)
        if (!strcmp(model->valuestring, t->v[i].name)) return i;
    list_pairs(t, 1, names, sizeof names);
    snprintf(err, errlen, "\"model\": unknown field value %s%.64s%s: the server's models are %s",
             cJSON_IsString(model) ? "\"" : "", cJSON_IsString(model) ? model->valuestring : "(not a string)",
             cJSON_IsString(model) ? "\"" : "", names);
    return -400;
}

int serve_models_route(const serve_models *t, const char *body, size_t len, int api, char *err, size_t errlen) {
    if (t->n == 1 && api != SERVE_V1) return 0; /* nothing to choose, and no "model" to check */
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!cJSON_IsObject(root)) return cJSON_Delete(root), 0;
    const cJSON *model = api == SERVE_V1 ? cJSON_GetObjectItemCaseSensitive(root, "model") : NULL;
    int idx = model ? by_model_name(t, model, err, errlen) : t->n == 1 ? 0 : -1;
    if (idx != -1) return cJSON_Delete(root), idx;
    const char *src = string_field(root, api == SERVE_V1 ? "src_lang" : "source");
    const char *tgt = string_field(root, api == SERVE_V1 ? "tgt_lang" : "target");
    for (int multi = 0; multi < 2 && idx < 0; multi++)
        for (int i = 0; i < t->n && idx < 0; i++) {
            const cli_model_options *c = &t->v[i].o.common;
            const char *s = src ? src : multi ? c->src_lang : NULL, *g = tgt ? tgt : multi ? c->tgt_lang : NULL;
            if (covers(&t->v[i], s && !strcmp(s, "auto") && multi ? NULL : s, g, multi)) idx = i;
        }
    if (idx < 0) {
        char pairs[2048];
        list_pairs(t, 0, pairs, sizeof pairs);
        snprintf(err, errlen, "no model here translates %s to %s; the pairs are: %s", src ? src : "(any)",
                 tgt ? tgt : "(any)", pairs);
        idx = -400;
    }
    cJSON_Delete(root);
    return idx;
}

/* ---------------------------------------------------------------------------------------
 * GET /languages, GET /v1/model */

/* A code and the codes it translates into, gathered over every model. */
typedef struct {
    const char *code;
    const char **targets;
    int n_targets;
} lang_entry;

static lang_entry *entry(lang_entry **list, int *n, const char *code) {
    for (int i = 0; i < *n; i++)
        if (!strcmp((*list)[i].code, code)) return &(*list)[i];
    lang_entry *grown = realloc(*list, sizeof **list * (size_t)(*n + 1));
    if (!grown) return NULL;
    *list = grown;
    grown[*n] = (lang_entry){code, NULL, 0};
    return &grown[(*n)++];
}

/* code -> target (target NULL: only listed). -1 when out of memory. */
static int add_edge(lang_entry **list, int *n, const char *code, const char *target) {
    lang_entry *e = entry(list, n, code);
    if (!e) return -1;
    if (!target) return 0;
    for (int i = 0; i < e->n_targets; i++)
        if (!strcmp(e->targets[i], target)) return 0;
    const char **grown = realloc(e->targets, sizeof *grown * (size_t)(e->n_targets + 1));
    if (!grown) return -1;
    e->targets = grown;
    grown[e->n_targets++] = target;
    return 0;
}

static int gather(const serve_models *t, lang_entry **list, int *n) {
    int rc = 0;
    for (int i = 0; i < t->n && !rc; i++) {
        const attend_config *c = attend_get_config(t->v[i].m);
        const char(*pair)[16] = t->v[i].o.pair;
        if (!c->n_languages && pair[0][0]) rc = add_edge(list, n, pair[0], pair[1]) || add_edge(list, n, pair[1], NULL);
        for (int a = 0; a < c->n_languages && !rc; a++)
            for (int b = 0; b < c->n_languages && !rc; b++)
                rc = a == b ? add_edge(list, n, c->languages[a], NULL) : add_edge(list, n, c->languages[a], c->languages[b]);
    }
    return rc;
}

char *serve_models_languages(const serve_models *t, size_t *len) {
    if (t->n == 1) return serve_libre_languages(t->v[0].m, &t->v[0].o, len);
    lang_entry *list = NULL;
    int n = 0;
    char *out = NULL;
    FILE *f = gather(t, &list, &n) ? NULL : open_memstream(&out, len);
    for (int i = 0; f && i < n; i++) {
        fprintf(f, "%s{\"code\":", i ? "," : "[");
        json_str(f, list[i].code);
        fputs(",\"name\":", f);
        json_str(f, serve_lang_name(list[i].code));
        fputs(",\"targets\":[", f);
        for (int k = 0; k < list[i].n_targets; k++) fputs(k ? "," : "", f), json_str(f, list[i].targets[k]);
        fputs("]}", f);
    }
    if (f) fputs(n ? "]\n" : "[]\n", f);
    if (f && fclose(f)) free(out), out = NULL;
    for (int i = 0; i < n; i++) free(list[i].targets);
    free(list);
    return out;
}

/* The first model's object (as with one model) plus "models": every model's object, each
 * with its "name" and, for a pair model, its "pair". */
char *serve_models_json(const serve_models *t, size_t *len) {
    if (t->n == 1) return serve_response_model(t->v[0].m, t->v[0].file, len);
    cJSON *first = NULL, *list = cJSON_CreateArray();
    for (int i = 0; i < t->n && list; i++) {
        size_t one_len;
        char *one = serve_response_model(t->v[i].m, t->v[i].file, &one_len);
        cJSON *obj = one ? cJSON_ParseWithLength(one, one_len) : NULL;
        free(one);
        if (!obj) return cJSON_Delete(first), cJSON_Delete(list), NULL;
        if (t->v[i].o.pair[0][0]) {
            char pair[40];
            snprintf(pair, sizeof pair, "%s-%s", t->v[i].o.pair[0], t->v[i].o.pair[1]);
            cJSON_AddStringToObject(obj, "pair", pair);
        }
        if (!first) first = cJSON_Duplicate(obj, 1);
        cJSON_AddItemToArray(list, obj);
    }
    if (!first) return cJSON_Delete(list), NULL;
    cJSON_AddItemToObject(first, "models", list);
    char *text = cJSON_PrintUnformatted(first);
    cJSON_Delete(first);
    if (!text) return NULL;
    *len = strlen(text) + 1;
    char *out = realloc(text, *len + 1);
    if (!out) return free(text), NULL;
    out[*len - 1] = '\n', out[*len] = 0;
    return out;
}
