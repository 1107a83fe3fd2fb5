/* A /translate list with "source": "auto" whose entries were detected in several languages
 * (serve.h): LibreTranslate translates each entry from its own language, so the request is
 * cut into one part per language, each a request of its own (routed to its model, batched by
 * its scheduler like any other), and the parts' answers are merged back in the entries'
 * order. A list in one language never comes here: it stays one job. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "serve.h"

int serve_split_parts(const serve_auto *a, int *part_of) {
    int first[SERVE_PARTS_MAX + 1], n = 0; /* each part's first entry: a part per language seen */
    for (int i = 0; i < a->n; i++) {
        int p = 0;
        while (p < n && strcmp(a->langs[first[p]], a->langs[i])) p++;
        if (p == n && n > SERVE_PARTS_MAX) return n; /* too many: the caller refuses */
        if (p == n) first[n++] = i;
        part_of[i] = p;
    }
    return n;
}

int serve_split_body(const serve_body *b, const serve_auto *a, const int *part_of, int p, serve_body *out,
                     serve_auto *sub) {
    memset(sub, 0, sizeof *sub);
    /* the body without its q, copied (not every part's copy of every entry), q put back */
    cJSON *all = cJSON_DetachItemFromObjectCaseSensitive(b->root, "q");
    *out = (serve_body){cJSON_Duplicate(b->root, 1), b->has_nul};
    cJSON_AddItemToObject(b->root, "q", all);
    cJSON *q = cJSON_CreateArray();
    sub->confs = calloc((size_t)a->n, sizeof *sub->confs);
    int ok = out->root && q && sub->confs;
    const cJSON *e = ok ? all->child : NULL;
    for (int i = 0; ok && i < a->n; i++, e = e->next) {
        if (part_of[i] != p) continue;
        if (!sub->n) snprintf(sub->lang, sizeof sub->lang, "%s", a->langs[i]), sub->confidence = a->confs[i];
        sub->confs[sub->n++] = a->confs[i];
        ok = cJSON_AddItemToArray(q, cJSON_CreateString(e->valuestring));
    }
    if (!ok || !cJSON_AddItemToObject(out->root, "q", q)) {
        cJSON_Delete(q);
        return serve_body_free(out), serve_auto_free(sub), -1;
    }
    cJSON *src = cJSON_CreateString(sub->lang);
    if (!src || !cJSON_ReplaceItemInObjectCaseSensitive(out->root, "source", src)) {
        cJSON_Delete(src);
        return serve_body_free(out), serve_auto_free(sub), -1;
    }
    return 0;
}

/* One entry's items of a part's answer ({"translatedText": [...], "alternatives": [...],
 * "detectedLanguage": [...]}), written as write_libre writes them. */
static void write_item(FILE *f, const char *field, const cJSON *v) {
    if (!strcmp(field, "detectedLanguage")) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "confidence");
        const cJSON *l = cJSON_GetObjectItemCaseSensitive(v, "language");
        fprintf(f, "{\"confidence\":%.1f,\"language\":", cJSON_IsNumber(c) ? c->valuedouble : 0.0);
        json_str(f, cJSON_IsString(l) ? l->valuestring : "");
        fputc('}', f);
    } else if (cJSON_IsArray(v)) { /* an entry's alternatives */
        const cJSON *s;
        fputc('[', f);
        cJSON_ArrayForEach(s, v) fputs(s == v->child ? "" : ",", f), json_str(f, cJSON_IsString(s) ? s->valuestring : "");
        fputc(']', f);
    } else {
        json_str(f, cJSON_IsString(v) ? v->valuestring : "");
    }
}

/* The list field of every part, entry by entry in the entries' order, after `lead` ("{" for
 * the answer's first field, else ","). */
static void write_field(FILE *f, const char *lead, const char *field, cJSON *const *roots, const int *part_of,
                        int n_q) {
    fprintf(f, "%s\"%s\":[", lead, field);
    const cJSON *next[SERVE_PARTS_MAX] = {0}; /* each part's next item */
    for (int i = 0; i < n_q; i++) {
        const int p = part_of[i];
        next[p] = next[p] ? next[p]->next : cJSON_GetObjectItemCaseSensitive(roots[p], field)->child;
        fputs(i ? "," : "", f);
        if (next[p]) write_item(f, field, next[p]);
    }
    fputc(']', f);
}

/* Whether every part's answer has field as a list of as many items as its entries (entries[p]). */
static int has_field(cJSON *const *roots, int n_parts, const int *entries, const char *field) {
    for (int p = 0; p < n_parts; p++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(roots[p], field);
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != entries[p]) return 0;
    }
    return 1;
}

char *serve_split_merge(serve_job *const *parts, int n_parts, const int *part_of, int n_q, int *status,
                        size_t *len) {
    for (int p = 0; p < n_parts; p++)
        if (parts[p]->http_status != 200) { /* a 503, a 500: it answers for the whole request */
            char *body = parts[p]->body;
            *status = parts[p]->http_status, *len = parts[p]->body_len;
            parts[p]->body = NULL;
            return body;
        }
    cJSON *roots[SERVE_PARTS_MAX] = {0};
    int entries[SERVE_PARTS_MAX] = {0}; /* each part's */
    for (int i = 0; i < n_q && n_parts <= SERVE_PARTS_MAX; i++) entries[part_of[i]]++;
    char *out = NULL;
    FILE *f = n_parts <= SERVE_PARTS_MAX ? open_memstream(&out, len) : NULL;
    int ok = f != NULL;
    for (int p = 0; ok && p < n_parts; p++) ok = (roots[p] = cJSON_ParseWithLength(parts[p]->body, parts[p]->body_len)) != NULL;
    ok = ok && has_field(roots, n_parts, entries, "translatedText");
    if (ok) {
        write_field(f, "{", "translatedText", roots, part_of, n_q);
        if (has_field(roots, n_parts, entries, "alternatives")) write_field(f, ",", "alternatives", roots, part_of, n_q);
        if (has_field(roots, n_parts, entries, "detectedLanguage"))
            write_field(f, ",", "detectedLanguage", roots, part_of, n_q);
        fputs("}\n", f);
    }
    for (int p = 0; p < n_parts; p++) cJSON_Delete(roots[p]);
    if (f && fclose(f)) ok = 0;
    if (!ok) return free(out), *status = 500, serve_response_error("the parts' answers could not be merged", len);
    *status = 200;
    return out;
}
