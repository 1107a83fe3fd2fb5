/* A request body into a serve_request (serve.h): JSON parsed by cJSON, every field checked,
 * the text required to be UTF-8. POST /translate takes LibreTranslate's fields and ignores
 * those it does not use (clients send api_key, alternatives, ...); POST /v1/translate refuses
 * unknown fields, so that a misspelt option is an error rather than silently the default. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

/* Fail with 400 and a message. */
static int bad(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return 400;
}

static int utf8_valid(const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n;) {
        const unsigned c = p[i];
        size_t len = c < 0x80                ? 1
                     : c >= 0xc2 && c < 0xe0 ? 2
                     : c >= 0xe0 && c < 0xf0 ? 3
                     : c >= 0xf0 && c <= 0xf4 ? 4
                                              : 0;
        if (!len || i + len > n) return 0;
        unsigned cp = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xc0) != 0x80) return 0;
            cp = cp << 6 | (p[i + k] & 0x3f);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp < 0xe000))) ||
            (len == 4 && (cp < 0x10000 || cp > 0x10ffff))) /* overlong, surrogate, past U+10FFFF */
            return 0;
        i += len;
    }
    return 1;
}

/* Append one sentence (copied) to r. 0 or -1 (out of memory). */
static int add_sentence(serve_request *r, const char *s, size_t len, int q) {
    char **lines = realloc(r->lines, sizeof(char *) * (size_t)(r->n + 1));
    if (lines) r->lines = lines;
    size_t *lens = realloc(r->lens, sizeof(size_t) * (size_t)(r->n + 1));
    if (lens) r->lens = lens;
    int *q_of = realloc(r->q_of, sizeof(int) * (size_t)(r->n + 1));
    if (q_of) r->q_of = q_of;
    char *copy = malloc(len + 1);
    if (!lines || !lens || !q_of || !copy) {
        free(copy);
        return -1;
    }
    memcpy(copy, s, len);
    copy[len] = 0;
    r->lines[r->n] = copy;
    r->lens[r->n] = len;
    r->q_of[r->n++] = q;
    return 0;
}

/* One entry of q: checked, then split at newlines (/translate: as many lines as attend
 * translate would read, a trailing \r dropped) or kept whole (/v1). */
static int add_entry(serve_request *r, const cJSON *e, int q, const serve_options *o, char *err, size_t errlen) {
    if (!cJSON_IsString(e)) return bad(err, errlen, "q must be a string or a list of strings");
    const char *s = e->valuestring;
    const size_t n = strlen(s);
    if (!utf8_valid((const unsigned char *)s, n)) return bad(err, errlen, "q[%d] is not valid UTF-8", q);
    for (size_t from = 0;;) {
        const char *nl = r->api == SERVE_LIBRE && !r->html ? memchr(s + from, '\n', n - from) : NULL;
        size_t end = nl ? (size_t)(nl - s) : n, len = end - from;
        if (r->api == SERVE_LIBRE && len && s[from + len - 1] == '\r') len--; /* as attend translate reads */
        if (r->n >= o->max_queue) return bad(err, errlen, "more than %d sentences in one request", o->max_queue);
        if (add_sentence(r, s + from, len, q)) return bad(err, errlen, "out of memory");
        if (!nl) return 0;
        from = end + 1;
    }
}

/* "q": a non-empty string or a non-empty list of them. */
static int read_q(serve_request *r, const cJSON *root, const serve_options *o, char *err, size_t errlen) {
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(root, "q");
    if (!q) return bad(err, errlen, "missing \"q\": the text to translate");
    r->q_is_list = cJSON_IsArray(q);
    r->n_q = r->q_is_list ? cJSON_GetArraySize(q) : 1;
    if (r->n_q == 0) return bad(err, errlen, "\"q\" is an empty list");
    if (!r->q_is_list && cJSON_IsString(q) && !*q->valuestring) return bad(err, errlen, "\"q\" is empty");
    int i = 0, rc = 0;
    const cJSON *e;
    if (!r->q_is_list) return add_entry(r, q, 0, o, err, errlen);
    cJSON_ArrayForEach(e, q) {
        if ((rc = add_entry(r, e, i++, o, err, errlen))) return rc;
    }
    return 0;
}

/* A language code field (may be absent) into r->langs[which]. */
static int read_lang(serve_request *r, const cJSON *root, const char *name, int which, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsString(v) || !*v->valuestring || strlen(v->valuestring) >= sizeof r->langs[0])
        return bad(err, errlen, "\"%s\" must be a language code", name);
    if (!strcmp(v->valuestring, "auto"))
        return bad(err, errlen, "\"%s\": auto is not supported for a model of several languages (language "
                                "identification is not built yet): name the language", name);
    snprintf(r->langs[which], sizeof r->langs[which], "%s", v->valuestring);
    return 0;
}

/* /translate on a model without language tokens: source and target, when given, must be the
 * server's pair (--languages or the file's name; anything goes when it is unknown, as
 * LibreTranslate clients always send both); "source": "auto" answers the pair's source. */
static int read_libre_pair(serve_request *r, const cJSON *root, const serve_options *o, char *err, size_t errlen) {
    static const char *const fields[2] = {"source", "target"};
    for (int k = 0; k < 2; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, fields[k]);
        if (!v || cJSON_IsNull(v)) continue;
        if (!cJSON_IsString(v)) return bad(err, errlen, "\"%s\" must be a language code", fields[k]);
        if (k == 0 && !strcmp(v->valuestring, "auto")) {
            if (!o->pair[0][0])
                return bad(err, errlen, "\"source\": auto: the server does not know the model's source language "
                                        "(start it with --languages SRC-TGT)");
            snprintf(r->detected, sizeof r->detected, "%s", o->pair[0]);
            continue;
        }
        if (o->pair[k][0] && strcmp(v->valuestring, o->pair[k]))
            return bad(err, errlen, "%.60s is not supported: this server translates %s to %s (GET /languages)",
                       v->valuestring, o->pair[0], o->pair[1]);
    }
    return 0;
}

/* The languages: the request's, else the command line's; checked against a multilingual
 * model's codes. /translate ignores source and target for a model without languages (a
 * LibreTranslate client always sends them). */
static int read_languages(serve_request *r, const cJSON *root, const attend_model *m, const serve_options *o,
                          char *err, size_t errlen) {
    const attend_config *c = attend_get_config(m);
    const int libre = r->api == SERVE_LIBRE;
    if (libre && !c->n_languages) return read_libre_pair(r, root, o, err, errlen);
    int rc = read_lang(r, root, libre ? "source" : "src_lang", 0, err, errlen);
    if (!rc) rc = read_lang(r, root, libre ? "target" : "tgt_lang", 1, err, errlen);
    if (rc) return rc;
    const char *dflt[2] = {o->common.src_lang, o->common.tgt_lang};
    for (int k = 0; k < 2; k++) {
        if (!r->langs[k][0] && dflt[k]) snprintf(r->langs[k], sizeof r->langs[k], "%s", dflt[k]);
        if (!c->n_languages || !r->langs[k][0]) continue;
        int found = 0;
        for (int i = 0; i < c->n_languages && !found; i++) found = !strcmp(c->languages[i], r->langs[k]);
        if (!found) return bad(err, errlen, "the model has no language \"%s\" (GET /v1/model lists them)", r->langs[k]);
    }
    if (c->n_languages && (!r->langs[0][0] || !r->langs[1][0]))
        return bad(err, errlen, "this model is multilingual: give the source and target languages");
    if (!c->n_languages && r->langs[0][0]) return bad(err, errlen, "this model takes no source language");
    r->p.src_lang = r->langs[0][0] ? r->langs[0] : NULL;
    r->p.tgt_lang = r->langs[1][0] ? r->langs[1] : NULL;
    return 0;
}

/* /translate's "format": "text" (the default) or "html" (each entry of q an HTML fragment or
 * document: its text translated sentence by sentence, its tags placed by the alignments). */
static int read_format(serve_request *r, const cJSON *root, char *err, size_t errlen) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!f) return 0;
    if (!cJSON_IsString(f) || (strcmp(f->valuestring, "text") && strcmp(f->valuestring, "html")))
        return bad(err, errlen, "\"format\" must be \"text\" or \"html\"");
    r->html = !strcmp(f->valuestring, "html");
    return 0;
}

/* An integer field in lo..hi into *out (absent: unchanged). */
static int get_int(const cJSON *root, const char *name, long long lo, long long hi, long long *out, char *err,
                   size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!v) return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < (double)lo ||
        v->valuedouble > (double)hi)
        return bad(err, errlen, "\"%s\" must be an integer from %lld to %lld", name, lo, hi);
    *out = (long long)v->valuedouble;
    return 0;
}

/* A real field in lo..hi (lo excluded when open) into *out. */
static int get_real(const cJSON *root, const char *name, double lo, double hi, int open, float *out, char *err,
                    size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!v) return 0;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo) || (open && v->valuedouble == lo) || v->valuedouble > hi)
        return bad(err, errlen, "\"%s\" must be a number from %g%s to %g", name, lo, open ? " (excluded)" : "", hi);
    *out = (float)v->valuedouble;
    return 0;
}

/* A boolean field into *out. */
static int get_bool(const cJSON *root, const char *name, int *out, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!v) return 0;
    if (!cJSON_IsBool(v)) return bad(err, errlen, "\"%s\" must be true or false", name);
    *out = cJSON_IsTrue(v);
    return 0;
}

/* "alignment": true (the model's own view) or a view's name. */
static int read_alignment(serve_request *r, const cJSON *root, const attend_config *c, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "alignment");
    if (!v || cJSON_IsFalse(v)) return 0;
    const char *name = cJSON_IsTrue(v) ? c->alignment_view : cJSON_IsString(v) ? v->valuestring : NULL;
    if (!name || strlen(name) >= sizeof r->view_name)
        return bad(err, errlen, "\"alignment\" must be true, false or a view such as \"penultimate:avg\"");
    char why[256];
    if (attend_view_parse(name, &r->view, why, sizeof why) ||
        attend_view_check(&r->view, c->decoder_layers, c->decoder_heads, why, sizeof why))
        return bad(err, errlen, "\"alignment\": %s", why);
    snprintf(r->view_name, sizeof r->view_name, "%s", name);
    r->alignment = 1;
    return 0;
}

/* A text per entry of q (a string when q is one) into *out: "target_text" (forced
 * translations) and "prefix" (the start of each translation, --prefix). */
static int read_texts(serve_request *r, const cJSON *root, const char *name, char ***out, char *err,
                      size_t errlen) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, name);
    if (!t) return 0;
    if (cJSON_IsArray(t) != r->q_is_list || (r->q_is_list && cJSON_GetArraySize(t) != r->n_q))
        return bad(err, errlen, "\"%s\" must match \"q\": a string, or a list as long", name);
    if (!(*out = calloc((size_t)r->n, sizeof(char *)))) return bad(err, errlen, "out of memory");
    for (int i = 0; i < r->n; i++) {
        const cJSON *e = r->q_is_list ? cJSON_GetArrayItem(t, i) : t;
        if (!cJSON_IsString(e) || !utf8_valid((const unsigned char *)e->valuestring, strlen(e->valuestring)))
            return bad(err, errlen, "\"%s\" entries must be UTF-8 strings", name);
        if (!((*out)[i] = strdup(e->valuestring))) return bad(err, errlen, "out of memory");
    }
    return 0;
}

static const char *const V1_FIELDS[] = {"q", "target_text", "prefix", "task", "src_lang", "tgt_lang", "beam", "n_best", "sample",
                                        "top_k", "top_p", "temperature", "seed", "max_length", "min_length",
                                        "length_penalty", "no_repeat_ngram_size", "repetition_penalty",
                                        "alignment", "attention", "split", "api_key", "model", NULL};

static int unknown_fields(const cJSON *root, char *err, size_t errlen) {
    const cJSON *e;
    cJSON_ArrayForEach(e, root) {
        int known = 0;
        for (int k = 0; V1_FIELDS[k] && !known; k++) known = !strcmp(e->string, V1_FIELDS[k]);
        if (!known) return bad(err, errlen, "unknown field \"%s\" (see docs/serve.md)", e->string);
    }
    return 0;
}

/* The search options of /v1/translate. */
static int read_search(serve_request *r, const cJSON *root, const attend_config *c, char *err, size_t errlen) {
    attend_params *p = &r->p;
    long long beam = p->num_beams, nbest = 1, topk = 0, maxlen = 0, minlen = -1, ngram = -1;
    long long seed = (long long)p->seed;
    float lp = NAN;
    int rc = get_int(root, "beam", 1, 64, &beam, err, errlen);
    if (!rc) rc = get_int(root, "n_best", 1, 64, &nbest, err, errlen);
    if (!rc) rc = get_bool(root, "sample", &p->sample, err, errlen);
    if (!rc) rc = get_int(root, "top_k", 0, 1000000, &topk, err, errlen);
    if (!rc) rc = get_real(root, "top_p", 0, 1, 1, &p->top_p, err, errlen);
    if (!rc) rc = get_real(root, "temperature", 0, 100, 1, &p->temperature, err, errlen);
    if (!rc) rc = get_int(root, "seed", 0, 1LL << 53, &seed, err, errlen);
    if (!rc) rc = get_int(root, "max_length", 2, c->max_position_embeddings, &maxlen, err, errlen);
    if (!rc) rc = get_int(root, "min_length", 0, c->max_position_embeddings, &minlen, err, errlen);
    if (!rc) rc = get_int(root, "no_repeat_ngram_size", 0, 64, &ngram, err, errlen);
    if (!rc) rc = get_real(root, "length_penalty", -10, 10, 0, &lp, err, errlen);
    if (!rc) rc = get_real(root, "repetition_penalty", 0, 100, 1, &p->repetition_penalty, err, errlen);
    if (rc) return rc;
    const int beams = beam ? (int)beam : c->generation_recorded ? c->num_beams : 1;
    if (p->sample && beam > 1) return bad(err, errlen, "\"sample\" draws without beams: leave out \"beam\" or give 1");
    if (!p->sample && nbest > beams) return bad(err, errlen, "\"n_best\" %lld is more than the %d beams", nbest, beams);
    p->num_beams = p->sample ? 1 : (int)beam;
    p->n_best = r->nbest = (int)nbest;
    p->top_k = (int)topk;
    p->seed = (unsigned long long)seed;
    p->max_length = (int)maxlen;
    p->set_min_length = minlen >= 0, p->min_length = minlen >= 0 ? (int)minlen : 0;
    p->set_no_repeat_ngram_size = ngram >= 0, p->no_repeat_ngram_size = ngram >= 0 ? (int)ngram : 0;
    p->set_length_penalty = !isnan(lp), p->length_penalty = isnan(lp) ? 0 : lp;
    return 0;
}

/* "task": a task of the model (attend info lists them; T5's task_specific_params), whose
 * prefix is written before each sentence; the server's --task when absent. */
static int read_task(serve_request *r, const cJSON *root, const attend_config *c, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "task");
    if (!v) return 0;
    if (!cJSON_IsString(v) || strlen(v->valuestring) >= sizeof r->task)
        return bad(err, errlen, "\"task\" must be the name of a task of the model (GET /v1/model lists them)");
    for (int i = 0; i < c->n_tasks; i++)
        if (!strcmp(c->tasks[i], v->valuestring)) {
            snprintf(r->task, sizeof r->task, "%s", v->valuestring);
            r->p.task = r->task;
            return 0;
        }
    return bad(err, errlen, "the model has no task \"%.60s\" (GET /v1/model lists them)", v->valuestring);
}

/* "split": false translates each line of q as one sequence; true (or absent, with the
 * server's default --split) sentence by sentence. */
static int read_split(serve_request *r, const cJSON *root, char *err, size_t errlen) {
    int on = r->p.split == ATTEND_SPLIT_SENTENCES;
    const int rc = get_bool(root, "split", &on, err, errlen);
    r->p.split = on ? ATTEND_SPLIT_SENTENCES : ATTEND_SPLIT_NONE;
    return rc;
}

/* /translate's "alternatives": N more translations from the n-best list (a number, or a
 * numeric string from a form), N at most the beams the search keeps. */
static int read_alternatives(serve_request *r, const cJSON *root, const attend_model *m, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "alternatives");
    if (!v || cJSON_IsNull(v)) return 0;
    const attend_config *c = attend_get_config(m);
    const int beams = r->p.num_beams ? r->p.num_beams : c->generation_recorded ? c->num_beams : 1;
    char *end = NULL;
    const double n = cJSON_IsNumber(v) ? v->valuedouble : cJSON_IsString(v) ? strtod(v->valuestring, &end) : -1;
    if ((end && (end == v->valuestring || *end)) || n != floor(n) || n < 0 || n > 64)
        return bad(err, errlen, "\"alternatives\" must be an integer from 0 to %d", beams);
    if (n > beams)
        return bad(err, errlen, "\"alternatives\" %d is more than the %d beams of the search (start the server "
                                "with a larger --beam)", (int)n, beams);
    r->alternatives = (int)n;
    if (n > 0 && !r->html) r->p.n_best = (int)n + 1 < beams ? (int)n + 1 : beams; /* HTML: none, as LibreTranslate */
    return 0;
}

/* The fields of /v1/translate after q. */
static int read_v1(serve_request *r, const cJSON *root, const attend_config *c, char *err, size_t errlen) {
    int rc = unknown_fields(root, err, errlen);
    if (!rc) rc = read_search(r, root, c, err, errlen);
    if (!rc) rc = read_alignment(r, root, c, err, errlen);
    if (!rc) rc = read_task(r, root, c, err, errlen);
    if (!rc) rc = get_bool(root, "attention", &r->attention, err, errlen);
    if (!rc) rc = read_texts(r, root, "target_text", &r->targets, err, errlen);
    if (!rc) rc = read_texts(r, root, "prefix", &r->prefixes, err, errlen);
    if (rc) return rc;
    if (r->targets && r->prefixes) return bad(err, errlen, "\"prefix\" starts a free translation: not with \"target_text\"");
    if (r->targets && (r->p.n_best > 1 || r->p.sample))
        return bad(err, errlen, "\"target_text\" force-decodes: no \"n_best\" or \"sample\" with it");
    r->p.want_scores = 1;
    r->p.want_attention = r->alignment || r->attention;
    return 0;
}

/* Requests with the same key are translated in one batch: every setting that can change a
 * translation (what is only reported, scores and attention, is asked for the whole batch). */
static void make_key(serve_request *r) {
    const attend_params *p = &r->p;
    const int one_best = p->n_best > 1 ? p->n_best : 1; /* 0 and 1 both mean the best only */
    snprintf(r->key, sizeof r->key, "%d %d %d %d %d %d %a %d %d %d %d %a %d %d %a %a %llu %d %s %s %s%s", r->html, p->split, p->num_beams, one_best,
             p->early_stopping, p->set_length_penalty, (double)p->length_penalty, p->set_min_length, p->min_length,
             p->set_no_repeat_ngram_size, p->no_repeat_ngram_size, (double)p->repetition_penalty, p->sample,
             p->top_k, (double)p->top_p, (double)p->temperature, p->seed, p->max_length, r->langs[0], r->langs[1],
             p->task ? p->task : "", r->prefixes ? " prefix" : ""); /* prefixed requests never share a batch with forced ones */
}

serve_body serve_body_parse(const char *body, size_t len) {
    return (serve_body){cJSON_ParseWithLength(body, len), serve_json_has_nul(body, len)};
}

void serve_body_free(serve_body *b) {
    cJSON_Delete(b->root);
    b->root = NULL;
}

int serve_request_parse(const serve_body *b, int api, const attend_model *m, const serve_options *o,
                        serve_request *r, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    r->api = api;
    r->p = cli_model_params(&o->common);
    r->p.src_lang = r->p.tgt_lang = NULL;
    /* refused, not cut: cJSON's strings end at a NUL, and the text after it would be lost */
    if (b->has_nul) return bad(err, errlen, "q contains a NUL character");
    const cJSON *root = b->root;
    if (!root) return bad(err, errlen, "the body is not valid JSON");
    int rc = cJSON_IsObject(root) ? 0 : bad(err, errlen, "the body must be a JSON object");
    if (!rc && api == SERVE_LIBRE) rc = read_format(r, root, err, errlen);
    if (!rc && api == SERVE_LIBRE) rc = read_alternatives(r, root, m, err, errlen);
    if (!rc) rc = read_q(r, root, o, err, errlen);
    if (!rc && api == SERVE_V1) rc = read_v1(r, root, attend_get_config(m), err, errlen);
    if (!rc) rc = read_languages(r, root, m, o, err, errlen);
    if (!rc) rc = read_split(r, root, err, errlen);
    if (!rc) make_key(r);
    return rc;
}

void serve_request_free(serve_request *r) {
    for (int i = 0; i < r->n; i++) {
        free(r->lines[i]);
        if (r->targets) free(r->targets[i]);
        if (r->prefixes) free(r->prefixes[i]);
    }
    free(r->lines);
    free(r->lens);
    free(r->q_of);
    free(r->targets);
    free(r->prefixes);
    free(r->detected_confs);
    memset(r, 0, sizeof *r);
}
