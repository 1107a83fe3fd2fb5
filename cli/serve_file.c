/* POST /translate_file and GET /download_file/NAME (serve.h), as LibreTranslate has them: a
 * multipart form with `file`, `source`, `target` and `api_key`; a .txt file is translated as
 * /translate translates a text (line by line, each line's sentences split), an .html/.htm
 * file as "format": "html" does. The form becomes the JSON text /translate reads, so the file
 * takes the same path (checks, limits, the scheduler); the answer's text is then kept here,
 * in memory, for GET /download_file/NAME: at most SERVE_FILES_KEPT files and
 * SERVE_FILES_BYTES bytes (the oldest dropped first), each for SERVE_FILES_SECONDS. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "http_server.h"
#include "json.h"
#include "serve.h"

const char *const SERVE_FILE_FORMATS[] = {".txt", ".html", ".htm", NULL};

/* ---------------------------------------------------------------------------------------
 * The form into /translate's JSON */

/* The last part named name, or NULL. */
static const serve_part *part_named(const serve_part *parts, int n, const char *name) {
    const serve_part *found = NULL;
    for (int i = 0; i < n; i++)
        if (parts[i].name_len == strlen(name) && !memcmp(parts[i].name, name, parts[i].name_len)) found = &parts[i];
    return found;
}

/* Letters, digits, '.', '_' and '-' of s[0..n) kept, the rest '_', appended to out at *o. */
static void put_safe(const char *s, size_t n, char *out, size_t *o) {
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        out[(*o)++] = isalnum(c) || c == '.' || c == '_' || c == '-' ? (char)c : '_';
    }
}

/* A safe file name from an upload's: its last path component, cleaned (put_safe), at most
 * SERVE_FILE_NAME-1 bytes with its extension kept, no leading dot. */
static void safe_name(const char *name, size_t n, char *out) {
    for (size_t i = n; i-- > 0;)
        if (name[i] == '/' || name[i] == '\\') {
            name += i + 1, n -= i + 1;
            break;
        }
    while (n && name[0] == '.') name++, n--; /* no hidden file, no "..": a plain name */
    size_t stem = n;
    for (size_t i = n; i-- > 0;)
        if (name[i] == '.') {
            stem = i;
            break;
        }
    size_t ext = n - stem, o = 0;
    if (ext > 16) ext = 0, stem = n; /* not an extension */
    const size_t room = SERVE_FILE_NAME - 1 - ext;
    put_safe(name, stem < room ? stem : room, out, &o);
    put_safe(name + stem, ext, out, &o);
    out[o] = 0;
    if (o == ext) { /* nothing before the extension */
        memmove(out + 4, out, o + 1);
        memcpy(out, "file", 4);
    }
}

/* The extension of name among SERVE_FILE_FORMATS: its index, or -1. */
static int file_format(const char *name) {
    const char *dot = strrchr(name, '.');
    for (int i = 0; dot && SERVE_FILE_FORMATS[i]; i++)
        if (!strcasecmp(dot, SERVE_FILE_FORMATS[i])) return i;
    return -1;
}

/* A string field of the form (absent: none) into obj. 0, or a status (400: a NUL, which
 * would cut the JSON string; 500) with err. */
static int copy_field(cJSON *obj, const serve_part *parts, int n, const char *name, char *err, size_t errlen) {
    const serve_part *p = part_named(parts, n, name);
    if (!p) return 0;
    if (memchr(p->data, 0, p->len)) return snprintf(err, errlen, "the form field %s holds a NUL byte", name), 400;
    char *s = strndup(p->data, p->len);
    const int ok = s && cJSON_AddStringToObject(obj, name, s);
    free(s);
    return ok ? 0 : (snprintf(err, errlen, "out of memory"), 500);
}

int serve_file_to_json(const char *content_type, const char *body, size_t len, char **json, size_t *json_len,
                       char name[SERVE_FILE_NAME], char *err, size_t errlen) {
    serve_part parts[SERVE_FORM_PARTS];
    const int n = serve_multipart_parse(content_type, body, len, parts, SERVE_FORM_PARTS, err, errlen);
    if (n < 0) return 400;
    const serve_part *file = part_named(parts, n, "file");
    if (!file || !file->filename)
        return snprintf(err, errlen, "Invalid request: missing file parameter (a form field with a filename)"), 400;
    safe_name(file->filename, file->filename_len, name);
    const int format = file_format(name);
    if (format < 0)
        return snprintf(err, errlen, "Invalid request: file format not supported (%s: .txt, .html and .htm are)",
                        name), 400;
    if (!file->len) return snprintf(err, errlen, "Invalid request: empty file"), 400;
    if (memchr(file->data, 0, file->len)) return snprintf(err, errlen, "the file holds a NUL byte: not text"), 400;
    cJSON *obj = cJSON_CreateObject();
    char *text = strndup(file->data, file->len);
    const int ok = obj && text && cJSON_AddStringToObject(obj, "q", text) &&
                   cJSON_AddStringToObject(obj, "format", format == 0 ? "text" : "html");
    free(text);
    static const char *const fields[] = {"source", "target", "api_key"};
    int rc = ok ? 0 : (snprintf(err, errlen, "out of memory"), 500);
    for (int k = 0; !rc && k < 3; k++) rc = copy_field(obj, parts, n, fields[k], err, errlen);
    *json = rc ? NULL : cJSON_PrintUnformatted(obj);
    cJSON_Delete(obj);
    if (rc) return rc;
    if (!*json) return snprintf(err, errlen, "out of memory"), 500;
    *json_len = strlen(*json);
    return 0;
}

/* A multipart form's plain fields (files skipped; a repeated field keeps its last value, as a
 * urlencoded form does) as a JSON object's text. */
char *serve_multipart_to_json(const char *content_type, const char *body, size_t len, char *err, size_t errlen) {
    serve_part parts[SERVE_FORM_PARTS];
    const int n = serve_multipart_parse(content_type, body, len, parts, SERVE_FORM_PARTS, err, errlen);
    if (n < 0) return NULL;
    cJSON *obj = cJSON_CreateObject();
    int rc = obj ? 0 : (snprintf(err, errlen, "out of memory"), 500);
    for (int i = 0; i < n && !rc; i++) {
        char name[64];
        if (parts[i].filename || parts[i].name_len >= sizeof name) continue;
        snprintf(name, sizeof name, "%.*s", (int)parts[i].name_len, parts[i].name);
        if (part_named(parts, n, name) == &parts[i]) rc = copy_field(obj, parts, n, name, err, errlen); /* the last */
    }
    char *json = rc ? NULL : cJSON_PrintUnformatted(obj);
    if (!rc && !json) snprintf(err, errlen, "out of memory");
    cJSON_Delete(obj);
    return json;
}

/* ---------------------------------------------------------------------------------------
 * The translated files, kept for download */

typedef struct {
    char id[SERVE_FILE_ID];       /* "HEX.NAME": the path after /download_file/ */
    char *data;                   /* the translated file */
    size_t len;
    double at;                    /* when it was made (seconds, monotonic) */
} kept_file;

struct serve_files {
    pthread_mutex_t mu;
    kept_file kept[SERVE_FILES_KEPT];
    size_t bytes;
};

serve_files *serve_files_new(void) {
    serve_files *fs = calloc(1, sizeof *fs);
    if (fs) pthread_mutex_init(&fs->mu, NULL);
    return fs;
}

static void drop(serve_files *fs, kept_file *k) {
    fs->bytes -= k->len;
    free(k->data);
    memset(k, 0, sizeof *k);
}

void serve_files_free(serve_files *fs) {
    if (!fs) return;
    for (int i = 0; i < SERVE_FILES_KEPT; i++) drop(fs, &fs->kept[i]);
    pthread_mutex_destroy(&fs->mu);
    free(fs);
}

/* Drop what expired, then the oldest until a file of len bytes fits; the free slot. */
static kept_file *make_room(serve_files *fs, size_t len, double now) {
    for (int i = 0; i < SERVE_FILES_KEPT; i++)
        if (fs->kept[i].data && now - fs->kept[i].at > SERVE_FILES_SECONDS) drop(fs, &fs->kept[i]);
    for (;;) {
        kept_file *free_slot = NULL, *oldest = NULL;
        for (int i = 0; i < SERVE_FILES_KEPT; i++) {
            kept_file *k = &fs->kept[i];
            if (!k->data && !free_slot) free_slot = k;
            if (k->data && (!oldest || k->at < oldest->at)) oldest = k;
        }
        if (free_slot && fs->bytes + len <= SERVE_FILES_BYTES) return free_slot;
        if (!oldest) return NULL; /* larger than the whole store */
        drop(fs, oldest);
    }
}

/* Keep data (taken) under a fresh id "HEX.name" into id. 0, or -1 (data freed). */
static int keep(serve_files *fs, char *data, size_t len, const char *name, char id[SERVE_FILE_ID]) {
    unsigned char r[8];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) return free(data), -1;
    snprintf(id, SERVE_FILE_ID, "%02x%02x%02x%02x%02x%02x%02x%02x.%s", r[0], r[1], r[2], r[3], r[4], r[5], r[6],
             r[7], name);
    pthread_mutex_lock(&fs->mu);
    kept_file *k = make_room(fs, len, serve_now());
    if (k) {
        snprintf(k->id, sizeof k->id, "%s", id);
        k->data = data, k->len = len, k->at = serve_now();
        fs->bytes += len;
    }
    pthread_mutex_unlock(&fs->mu);
    if (!k) free(data);
    return k ? 0 : -1;
}

/* "http://HOST" from the request's Host header when it is a plain host[:port], else the
 * address and port the server is bound to. */
static void base_url(struct http_conn *conn, const char *bound, int port, char *out, size_t outlen) {
    const char *host = http_header(conn, "Host");
    int ok = host && *host && strlen(host) < 256;
    for (const char *c = host; ok && *c; c++) ok = isalnum((unsigned char)*c) || strchr(".-:[]", *c);
    if (ok) snprintf(out, outlen, "http://%s", host);
    else if (strchr(bound, ':')) snprintf(out, outlen, "http://[%s]:%d", bound, port); /* IPv6 */
    else snprintf(out, outlen, "http://%s:%d", bound, port);
}

char *serve_files_put(serve_files *fs, struct http_conn *conn, const char *host, int port, const char *name,
                      const char *answer, size_t answer_len, size_t *outlen) {
    cJSON *root = cJSON_ParseWithLength(answer, answer_len);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "translatedText");
    char *text = cJSON_IsString(t) ? strdup(t->valuestring) : NULL;
    cJSON_Delete(root);
    char id[SERVE_FILE_ID], url[512], *out = NULL;
    if (!text || keep(fs, text, strlen(text), name, id)) return NULL;
    base_url(conn, host, port, url, sizeof url);
    FILE *f = open_memstream(&out, outlen);
    if (!f) return NULL;
    fputs("{\"translatedFileUrl\":", f);
    char full[SERVE_FILE_ID + 600];
    snprintf(full, sizeof full, "%s/download_file/%s", url, id);
    json_str(f, full);
    fputs("}\n", f);
    if (fclose(f)) return free(out), NULL;
    return out;
}

/* A copy of the file kept under id (*type its Content-Type), or NULL. */
static char *find_copy(serve_files *fs, const char *id, size_t *len, const char **type) {
    char *copy = NULL;
    pthread_mutex_lock(&fs->mu);
    const double now = serve_now();
    for (int i = 0; i < SERVE_FILES_KEPT && !copy; i++) {
        kept_file *k = &fs->kept[i];
        if (!k->data || strcmp(k->id, id) || now - k->at > SERVE_FILES_SECONDS) continue;
        if ((copy = malloc(k->len ? k->len : 1))) memcpy(copy, k->data, k->len), *len = k->len;
    }
    pthread_mutex_unlock(&fs->mu);
    const int html = file_format(id) > 0;
    *type = html ? "text/html; charset=utf-8" : "text/plain; charset=utf-8";
    return copy;
}

void serve_files_download(serve_files *fs, struct http_conn *conn, const char *id, const char *allow_origin) {
    size_t len = 0;
    const char *type;
    char *data = find_copy(fs, id, &len, &type);
    const int status = data ? 200 : 404;
    if (!data) {
        data = serve_response_error("no such file (translated files are kept for a while only)", &len);
        type = "application/json; charset=utf-8";
    }
    char disposition[SERVE_FILE_ID + 64];
    const char *dot = strchr(id, '.');
    snprintf(disposition, sizeof disposition, "attachment; filename=\"%s\"", dot ? dot + 1 : id);
    const char *headers[5] = {NULL}, **h = headers;
    if (allow_origin) *h++ = "Access-Control-Allow-Origin", *h++ = allow_origin;
    if (status == 200) *h++ = "Content-Disposition", *h++ = disposition;
    http_respond(conn, status, type, headers, data ? data : (char *)"", data ? len : 0, data == NULL);
}
