/* LibreTranslate clients that post an HTML form (application/x-www-form-urlencoded, as
 * libretranslatepy does) instead of JSON: the fields, decoded here (`+` a space, `%XX` a
 * byte), become the JSON object the same parser reads. Each field keeps its last value (a
 * repeated q is one text, as LibreTranslate reads a form). A NUL in a value (%00) is
 * reported, not kept: the JSON object's strings would end there. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

static int hex(int c) { return isdigit(c) ? c - '0' : tolower(c) - 'a' + 10; }

/* s[0..n) URL-decoded into a malloc'd string; *nul when it held %00. NULL when a % is not
 * followed by two hex digits (a malformed form) or out of memory. */
static char *decode(const char *s, size_t n, int *nul) {
    char *out = malloc(n + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '+') {
            *o++ = ' ';
        } else if (s[i] == '%') {
            if (i + 2 >= n || !isxdigit((unsigned char)s[i + 1]) || !isxdigit((unsigned char)s[i + 2]))
                return free(out), NULL;
            const char b = (char)(hex((unsigned char)s[i + 1]) * 16 + hex((unsigned char)s[i + 2]));
            *nul |= b == 0;
            *o++ = b;
            i += 2;
        } else {
            *o++ = s[i];
        }
    }
    *o = 0;
    return out;
}

char *serve_form_to_json(const char *body, size_t len, int *nul) {
    cJSON *obj = cJSON_CreateObject();
    int ok = obj != NULL;
    *nul = 0;
    for (size_t i = 0; ok && i < len;) {
        const char *amp = memchr(body + i, '&', len - i);
        const size_t end = amp ? (size_t)(amp - body) : len;
        const char *eq = memchr(body + i, '=', end - i);
        const size_t key_end = eq ? (size_t)(eq - body) : end;
        char *key = decode(body + i, key_end - i, nul);
        char *val = eq ? decode(eq + 1, end - key_end - 1, nul) : strdup("");
        ok = key && val;
        if (ok && *key) {
            cJSON_DeleteItemFromObjectCaseSensitive(obj, key);
            ok = cJSON_AddStringToObject(obj, key, val) != NULL;
        }
        free(key);
        free(val);
        i = end + 1;
    }
    char *json = ok && !*nul ? cJSON_PrintUnformatted(obj) : NULL;
    cJSON_Delete(obj);
    return json;
}
