/* Language identification in attend serve (serve.h): POST /detect and "source": "auto" on
 * /translate, both answered among the languages the server translates from (CLD2 through
 * langid.h). "auto" is resolved before routing: the detected code replaces it in the body's
 * tree, so that routing and parsing see a named source as if the client had sent it. A list
 * q is detected entry by entry, as LibreTranslate does; entries in several languages leave
 * auto in place for serve_split.c. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "langid.h"
#include "serve.h"

#define MAX_SOURCES 512

/* The source languages of the models that translate into tgt ("": any target), each once:
 * a pair model's source, a multilingual model's every code. */
static int sources(const serve_models *ms, const char *tgt, const char **out, int cap) {
    int n = 0;
    for (int k = 0; k < ms->n; k++) {
        const serve_model *sm = &ms->list[k];
        if (sm->speech) continue; /* it translates no text */
        const attend_config *c = attend_get_config(sm->m);
        const char *const *codes = (const char *const *)c->languages;
        const char *pair_src[1] = {sm->o.pair[0]};
        int nc = c->n_languages;
        if (!nc && sm->o.pair[0][0] && (!*tgt || !strcmp(tgt, sm->o.pair[1]))) codes = pair_src, nc = 1;
        for (int i = 0; i < nc && n < cap; i++) {
            int seen = 0;
            for (int j = 0; j < n && !seen; j++) seen = !strcmp(out[j], codes[i]);
            if (!seen) out[n++] = codes[i];
        }
    }
    return n;
}

static int no_sources(char *err, size_t errlen) {
    snprintf(err, errlen, "the server does not know its models' source languages: name the pair of a model "
                          "without language tokens (--languages SRC-TGT, or -m FILE:SRC-TGT)");
    return 400;
}

/* q's text (a string, or a list of strings joined by newlines), malloc'd; NULL when q is
 * neither. */
static char *q_text(const cJSON *q) {
    if (cJSON_IsString(q)) return strdup(q->valuestring);
    if (!cJSON_IsArray(q)) return NULL;
    size_t len = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, q) len += cJSON_IsString(e) ? strlen(e->valuestring) + 1 : 0;
    char *s = malloc(len + 1), *p = s;
    if (!s) return NULL;
    cJSON_ArrayForEach(e, q) if (cJSON_IsString(e)) p += sprintf(p, "%s\n", e->valuestring);
    *p = 0;
    return s;
}

int serve_detect(const serve_models *ms, const serve_body *b, char **out, size_t *outlen, char *err, size_t errlen) {
    if (b->has_nul) return snprintf(err, errlen, "q contains a NUL character"), 400;
    const cJSON *q = cJSON_IsObject(b->root) ? cJSON_GetObjectItemCaseSensitive(b->root, "q") : NULL;
    char *text = cJSON_IsString(q) && *q->valuestring ? strdup(q->valuestring) : NULL;
    if (!text) return snprintf(err, errlen, "Invalid request: missing q parameter (a non-empty string)"), 400;
    const char *cands[MAX_SOURCES];
    const int nc = sources(ms, "", cands, MAX_SOURCES);
    langid_guess g[3];
    const int ng = nc ? langid_detect(text, strlen(text), cands, nc, g, 3) : 0;
    free(text);
    if (!nc) return no_sources(err, errlen);
    char *s = NULL;
    FILE *f = open_memstream(&s, outlen);
    if (!f) return snprintf(err, errlen, "out of memory"), 500;
    fputc('[', f);
    for (int i = 0; i < ng; i++) {
        fprintf(f, "%s{\"confidence\":%.1f,\"language\":", i ? "," : "", g[i].confidence);
        json_str(f, g[i].code);
        fputc('}', f);
    }
    fputs("]\n", f);
    if (fclose(f)) return free(s), snprintf(err, errlen, "out of memory"), 500;
    *out = s;
    return 200;
}

/* Length in characters (code points, as LibreTranslate's len() counts them), not bytes. */
static size_t utf8_chars(const char *s) {
    size_t n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

/* The best guess for text among cands (the first candidate at 0 when there is none). */
static langid_guess best_guess(const char *text, const char *const *cands, int nc) {
    langid_guess g = {.confidence = 0};
    if (langid_detect(text, strlen(text), cands, nc, &g, 1) < 1) snprintf(g.code, sizeof g.code, "%s", cands[0]);
    return g;
}

/* A list q (strings only: anything else is left for parsing to refuse), each entry detected
 * as LibreTranslate detects a batch: an entry longer than AUTO_ALONE characters on its own,
 * a shorter one takes the detection of all the entries together. Among every source
 * language of the server (as /detect), so that an entry in a language no model translates
 * into target is refused by routing, never translated from the wrong language. 0 (a->n
 * set), or 500 with err. */
#define AUTO_ALONE 40
static int detect_entries(const serve_models *ms, const cJSON *q, serve_auto *a, char *err, size_t errlen) {
    const int n = cJSON_GetArraySize(q);
    const cJSON *e;
    cJSON_ArrayForEach(e, q) if (!cJSON_IsString(e)) return 0;
    const char *cands[MAX_SOURCES];
    const int nc = sources(ms, "", cands, MAX_SOURCES);
    char *all = q_text(q);
    a->langs = calloc((size_t)n, sizeof *a->langs);
    a->confs = calloc((size_t)n, sizeof *a->confs);
    if (!all || !a->langs || !a->confs) return free(all), snprintf(err, errlen, "out of memory"), 500;
    const langid_guess overall = best_guess(all, cands, nc);
    free(all);
    int i = 0;
    cJSON_ArrayForEach(e, q) {
        const langid_guess g = utf8_chars(e->valuestring) > AUTO_ALONE ? best_guess(e->valuestring, cands, nc) : overall;
        snprintf(a->langs[i], sizeof a->langs[i], "%s", g.code);
        a->confs[i++] = g.confidence;
    }
    a->n = n;
    return 0;
}

/* Replace "auto" in root by code. 0, or 500 with err. */
static int set_source(cJSON *root, const char *code, char *err, size_t errlen) {
    cJSON *v = cJSON_CreateString(code);
    if (!v || !cJSON_ReplaceItemInObjectCaseSensitive(root, "source", v)) {
        cJSON_Delete(v);
        return snprintf(err, errlen, "out of memory"), 500;
    }
    return 0;
}

/* A list q: each entry detected; one language for all replaces "auto" as a string's does. */
static int resolve_list(const serve_models *ms, cJSON *root, const cJSON *q, serve_auto *a, char *err,
                        size_t errlen) {
    int rc = detect_entries(ms, q, a, err, errlen);
    if (rc || !a->n) return rc;
    for (int i = 1; i < a->n; i++)
        if (strcmp(a->langs[i], a->langs[0])) return 0; /* several: serve_split.c */
    snprintf(a->lang, sizeof a->lang, "%s", a->langs[0]);
    a->confidence = a->confs[0];
    return set_source(root, a->lang, err, errlen);
}

int serve_resolve_auto(const serve_models *ms, cJSON *root, int max_entries, serve_auto *a, char *err, size_t errlen) {
    memset(a, 0, sizeof *a);
    const cJSON *src = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "source") : NULL;
    if (!cJSON_IsString(src) || strcmp(src->valuestring, "auto")) return 0;
    const cJSON *tgt = cJSON_GetObjectItemCaseSensitive(root, "target");
    const char *cands[MAX_SOURCES], *target = cJSON_IsString(tgt) ? tgt->valuestring : "";
    const int nc = sources(ms, target, cands, MAX_SOURCES);
    if (!nc && *target && sources(ms, "", cands, MAX_SOURCES)) {
        snprintf(err, errlen, "\"source\": auto: no model translates into %.20s (GET /languages)", target);
        return 400;
    }
    if (!nc) return no_sources(err, errlen);
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(root, "q");
    if (cJSON_IsArray(q) && cJSON_GetArraySize(q) > max_entries)
        return snprintf(err, errlen, "more than %d sentences in one request", max_entries), 400;
    if (cJSON_IsArray(q) && cJSON_GetArraySize(q) > 0) return resolve_list(ms, root, q, a, err, errlen);
    char *text = q_text(q); /* NULL: q is of the wrong type, parsing says so */
    const int all = sources(ms, "", cands, MAX_SOURCES); /* as a list's entries */
    langid_guess g;
    const int found = text && langid_detect(text, strlen(text), cands, all, &g, 1) > 0;
    free(text);
    if (!found) return 0;
    snprintf(a->lang, sizeof a->lang, "%s", g.code);
    a->confidence = g.confidence;
    return set_source(root, g.code, err, errlen);
}

void serve_auto_free(serve_auto *a) {
    free(a->langs);
    free(a->confs);
    a->langs = NULL, a->confs = NULL, a->n = 0;
}
