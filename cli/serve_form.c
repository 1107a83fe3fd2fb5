/* LibreTranslate clients that post an HTML form (application/x-www-form-urlencoded, as
 * libretranslatepy does) instead of JSON: the fields, decoded by libmicrohttpd's post
 * processor, become the JSON object the same parser reads. Each field keeps its last value
 * (a repeated q is one text, as LibreTranslate reads a form). A NUL in a value (%00) is
 * reported, not kept: the JSON object's strings would end there. */
#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

typedef struct {
    cJSON *obj;
    char *key, *val; /* the field being read (its value arrives in pieces) */
    size_t len;
    int failed, nul;
} form;

/* The field read so far into the object. */
static void form_flush(form *f) {
    if (!f->key) return;
    cJSON_DeleteItemFromObjectCaseSensitive(f->obj, f->key);
    if (!cJSON_AddStringToObject(f->obj, f->key, f->val ? f->val : "")) f->failed = 1;
    free(f->key);
    free(f->val);
    f->key = f->val = NULL;
    f->len = 0;
}

static enum MHD_Result form_field(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
                                  const char *content_type, const char *encoding, const char *data, uint64_t off,
                                  size_t size) {
    form *f = cls;
    (void)kind, (void)filename, (void)content_type, (void)encoding;
    if (off == 0 || !f->key || strcmp(f->key, key)) {
        form_flush(f);
        if (!(f->key = strdup(key))) return f->failed = 1, MHD_NO;
    }
    if (size && memchr(data, 0, size)) f->nul = 1;
    char *grown = realloc(f->val, f->len + size + 1);
    if (!grown) return f->failed = 1, MHD_NO;
    memcpy(grown + f->len, data, size);
    f->val = grown;
    f->len += size;
    f->val[f->len] = 0;
    return MHD_YES;
}

char *serve_form_to_json(struct MHD_Connection *conn, const char *body, size_t len, int *nul) {
    form f = {cJSON_CreateObject(), NULL, NULL, 0, 0, 0};
    struct MHD_PostProcessor *pp = f.obj ? MHD_create_post_processor(conn, 16384, form_field, &f) : NULL;
    char *json = NULL;
    int ok = pp && MHD_post_process(pp, body, len) == MHD_YES;
    if (pp && MHD_destroy_post_processor(pp) != MHD_YES) ok = 0; /* freed either way */
    form_flush(&f);
    *nul = f.nul;
    if (ok && !f.failed && !f.nul) json = cJSON_PrintUnformatted(f.obj);
    free(f.key);
    free(f.val);
    cJSON_Delete(f.obj);
    return json;
}
