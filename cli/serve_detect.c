/* Language identification for the server: POST /detect and /translate's "source": "auto"
 * (cli/langid.h), restricted to the languages the model translates from. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "langid.h"
#include "serve.h"

int serve_detect_candidates(const attend_model *m, const serve_options *o, const char **among, int max) {
    const attend_config *c = attend_get_config(m);
    int n = 0;
    for (int i = 0; i < c->n_languages && n < max; i++) among[n++] = c->languages[i];
    if (!c->n_languages && o->pair[0][0] && max > 0) among[n++] = o->pair[0];
    return n;
}

int serve_detect(const char *text, size_t len, const attend_model *m, const serve_options *o,
                 langid_guess out[LANGID_MAX_GUESSES]) {
    const attend_config *c = attend_get_config(m);
    const int max = c->n_languages > 1 ? c->n_languages : 1;
    const char **among = malloc(sizeof(char *) * (size_t)max);
    if (!among) return -1;
    const int n_among = serve_detect_candidates(m, o, among, max);
    int n = langid_detect(text, len, n_among ? among : NULL, n_among, out);
    free(among);
    if (n == 0) { /* no candidates and no letters: say so rather than answer nothing */
        snprintf(out[0].code, sizeof out[0].code, "und");
        out[0].confidence = 0;
        n = 1;
    }
    return n;
}

int serve_detect_request(serve_request *r, const attend_model *m, const serve_options *o) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return -1;
    for (int i = 0; i < r->n && len < LANGID_MAX_BYTES; i++) /* the whole request, as one text */
        fwrite(r->lines[i], 1, r->lens[i], f), fputc('\n', f), fflush(f);
    if (fclose(f)) return free(text), -1;
    langid_guess g[LANGID_MAX_GUESSES];
    const int n = serve_detect(text, len, m, o, g);
    free(text);
    if (n < 0) return -1;
    snprintf(r->detected, sizeof r->detected, "%s", g[0].code);
    r->detected_confidence = g[0].confidence;
    return 0;
}
