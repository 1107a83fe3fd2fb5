/* LibreTranslate's endpoints besides /translate (serve.h): GET /frontend/settings (GET
 * /languages is serve_models.c's, POST /detect serve_detect.c's); the language pair of a model
 * without language tokens (--languages, or the model file's name); the NUL check every
 * JSON body passes. The JSON
 * shapes are LibreTranslate's (its API spec), so that its clients and its web frontend work
 * unchanged. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "serve.h"

/* ---------------------------------------------------------------------------------------
 * Language codes and names */

/* English names of the codes a translation model is most likely to carry (ISO 639-1); any
 * other code is shown as itself, which LibreTranslate's clients accept. */
static const char *const NAMES[][2] = {
    {"ar", "Arabic"},     {"bg", "Bulgarian"},  {"ca", "Catalan"},    {"cs", "Czech"},      {"da", "Danish"},
    {"de", "German"},     {"el", "Greek"},      {"en", "English"},    {"eo", "Esperanto"},  {"es", "Spanish"},
    {"et", "Estonian"},   {"eu", "Basque"},     {"fa", "Persian"},    {"fi", "Finnish"},    {"fr", "French"},
    {"ga", "Irish"},      {"gl", "Galician"},   {"he", "Hebrew"},     {"hi", "Hindi"},      {"hr", "Croatian"},
    {"hu", "Hungarian"},  {"id", "Indonesian"}, {"is", "Icelandic"},  {"it", "Italian"},    {"ja", "Japanese"},
    {"ko", "Korean"},     {"lt", "Lithuanian"}, {"lv", "Latvian"},    {"mt", "Maltese"},    {"nb", "Norwegian"},
    {"nl", "Dutch"},      {"pl", "Polish"},     {"pt", "Portuguese"}, {"ro", "Romanian"},   {"ru", "Russian"},
    {"sk", "Slovak"},     {"sl", "Slovenian"},  {"sq", "Albanian"},   {"sr", "Serbian"},    {"sv", "Swedish"},
    {"th", "Thai"},       {"tr", "Turkish"},    {"uk", "Ukrainian"},  {"ur", "Urdu"},       {"vi", "Vietnamese"},
    {"zh", "Chinese"},
};

const char *serve_lang_name(const char *code) {
    for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0]; i++)
        if (!strcmp(NAMES[i][0], code)) return NAMES[i][1];
    return code;
}

static int is_lower(char c) { return c >= 'a' && c <= 'z'; }

int serve_pair_parse(const char *arg, char pair[2][16]) {
    const char *dash = strchr(arg, '-');
    if (!dash || dash == arg || !dash[1] || strchr(dash + 1, '-') || dash - arg >= 16 || strlen(dash + 1) >= 16)
        return -1;
    snprintf(pair[0], 16, "%.*s", (int)(dash - arg), arg);
    snprintf(pair[1], 16, "%s", dash + 1);
    return 0;
}

/* The rule (docs/serve.md): the last "xx-yy" in the name, two lowercase letters on each side
 * of a dash, neither side touching another letter: "de-en.gguf", "opus-mt-de-en",
 * "marian.de-en.q8.gguf". Two letters only, so that "opus-mt-de-en-big" still reads de-en. */
int serve_pair_from_name(const char *name, char pair[2][16]) {
    const size_t n = strlen(name);
    for (size_t i = n >= 5 ? n - 5 + 1 : 0; i-- > 0;) {
        const char *s = name + i;
        if (!is_lower(s[0]) || !is_lower(s[1]) || s[2] != '-' || !is_lower(s[3]) || !is_lower(s[4])) continue;
        if ((i > 0 && is_lower(s[-1])) || is_lower(s[5])) continue;
        snprintf(pair[0], 16, "%.2s", s);
        snprintf(pair[1], 16, "%.2s", s + 3);
        return 0;
    }
    return -1;
}

/* ---------------------------------------------------------------------------------------
 * GET /languages, GET /frontend/settings */

/* The codes the server translates from: a multilingual model's own, else the pair's. */
static int codes(const attend_model *m, const serve_options *o, const char *const **out, const char *pair[2]) {
    const attend_config *c = attend_get_config(m);
    if (c->n_languages) return *out = (const char *const *)c->languages, c->n_languages;
    pair[0] = o->pair[0], pair[1] = o->pair[1];
    *out = pair;
    return o->pair[0][0] ? 2 : 0;
}

static void write_lang(FILE *f, const char *code) {
    fputs("{\"code\":", f);
    json_str(f, code);
    fputs(",\"name\":", f);
    json_str(f, serve_lang_name(code));
}

/* The fields LibreTranslate's web frontend reads: keys (--api-keys), the character limit
 * (--char-limit; -1: none), the file formats of /translate_file; no suggestions.
 * frontendTimeout is LibreTranslate's default (ms the frontend waits after typing). */
char *serve_libre_settings(const attend_model *m, const serve_options *o, size_t *len) {
    const char *pair[2], *const *list;
    const int n = codes(m, o, &list, pair);
    char *out = NULL;
    FILE *f = open_memstream(&out, len);
    if (!f) return NULL;
    const char *keys = o->api_keys ? "true" : "false";
    fprintf(f, "{\"charLimit\":%d,\"frontendTimeout\":500,\"apiKeys\":%s,\"keyRequired\":%s,\"suggestions\":false,"
            "\"filesTranslation\":true,\"supportedFilesFormat\":", o->char_limit > 0 ? o->char_limit : -1, keys, keys);
    json_strs(f, SERVE_FILE_FORMATS, 3);
    fputs(",\"language\":{\"source\":", f);
    write_lang(f, n > 0 ? list[0] : "");
    fputs("},\"target\":", f);
    write_lang(f, n > 1 ? list[1] : "");
    fputs("}}}\n", f);
    if (fclose(f)) return free(out), NULL;
    return out;
}

/* ---------------------------------------------------------------------------------------
 * NUL characters */

int serve_json_has_nul(const char *body, size_t len) {
    if (memchr(body, 0, len)) return 1;
    for (size_t i = 0, in_string = 0; i < len; i++) {
        if (body[i] == '"') in_string = !in_string;
        if (!in_string || body[i] != '\\' || i + 1 >= len) continue;
        if (body[i + 1] == 'u' && i + 5 < len && !memcmp(body + i + 2, "0000", 4)) return 1;
        i++; /* the escaped character: \" does not end the string, \\ escapes nothing after it */
    }
    return 0;
}
