/* The server's JSON answers (serve.h), written with the CLI's JSON writer (json.c) into
 * memory: a translation request's results, errors, the model's facts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "explore_json.h"
#include "json.h"
#include "serve.h"

/* A memory stream and its buffer. */
typedef struct {
    FILE *f;
    char *buf;
    size_t len;
} membuf;

static int mem_open(membuf *b) {
    b->buf = NULL;
    b->len = 0;
    b->f = open_memstream(&b->buf, &b->len);
    return b->f ? 0 : -1;
}

/* Close the stream; the buffer (NULL when out of memory) and its length. */
static char *mem_close(membuf *b, size_t *len) {
    if (fclose(b->f) != 0) {
        free(b->buf);
        b->buf = NULL;
        b->len = 0;
    }
    *len = b->len;
    return b->buf;
}

char *serve_response_error(const char *msg, size_t *len) {
    membuf b;
    if (mem_open(&b)) return *len = 0, NULL;
    fputs("{\"error\":", b.f);
    json_str(b.f, msg);
    fputs("}\n", b.f);
    return mem_close(&b, len);
}

/* One line out, as attend translate writes it: newlines in a translation become spaces. */
static void one_line(char *t) {
    for (; t && *t; t++)
        if (*t == '\n' || *t == '\r') *t = ' ';
}

/* The text of entry q's lines from..to-1, joined with newlines: each line's k-th hypothesis
 * (k 0: its translation; a line with fewer hypotheses gives its best). A line that failed
 * gives "", as attend translate. malloc'd; NULL when out of memory. */
static char *entry_text(const serve_job *job, int from, int to, int k) {
    char *s = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&s, &n);
    if (!f) return NULL;
    for (int i = from; i < to; i++) {
        attend_result *res = &job->res[i];
        char *t = res->status ? NULL : k > 0 && k < res->n_best ? res->nbest[k].text : res->text;
        if (t && !job->req.html) one_line(t); /* HTML keeps its newlines (escaped by json_str) */
        if (i > from) fputc('\n', f);
        if (t) fputs(t, f);
    }
    if (fclose(f)) return free(s), NULL;
    return s;
}

/* The alternatives of one entry: its other n-best joins, each once and none equal to the
 * translation (as LibreTranslate's), at most r->alternatives. */
static void write_alternatives(FILE *f, const serve_job *job, int from, int to, const char *best) {
    char *seen[65] = {0};
    int n = 0, most = 0;
    for (int i = from; i < to; i++)
        if (job->res[i].n_best > most) most = job->res[i].n_best;
    fputc('[', f);
    for (int k = 1; k < most && n < job->req.alternatives && n < 64; k++) {
        char *t = entry_text(job, from, to, k);
        int dup = !t || !strcmp(t, best);
        for (int j = 0; j < n && !dup; j++) dup = !strcmp(seen[j], t);
        if (dup) {
            free(t);
            continue;
        }
        fputs(n ? "," : "", f);
        json_str(f, t);
        seen[n++] = t;
    }
    fputc(']', f);
    for (int j = 0; j < n; j++) free(seen[j]);
}

/* The line range of each entry of q: entry q's lines are first[q]..first[q+1]-1. */
static void entry_ranges(const serve_request *r, int *first) {
    for (int q = 0, i = 0; q <= r->n_q; q++) {
        while (i < r->n && r->q_of[i] < q) i++;
        first[q] = i;
    }
}

/* POST /translate: {"translatedText": "..."} or a list, one entry per q entry (its lines
 * joined with newlines again); with "alternatives", a list of strings per entry; with
 * "source": "auto", detectedLanguage (one per entry for a list, each with its own confidence),
 * as LibreTranslate answers. */
static int write_libre(FILE *f, serve_job *job) {
    const serve_request *r = &job->req;
    int *first = malloc(sizeof(int) * (size_t)(r->n_q + 1));
    char **texts = calloc((size_t)r->n_q, sizeof(char *));
    int rc = first && texts ? 0 : -1;
    if (!rc) entry_ranges(r, first);
    for (int q = 0; q < r->n_q && !rc; q++) rc = (texts[q] = entry_text(job, first[q], first[q + 1], 0)) ? 0 : -1;
    if (!rc) {
        fputs(r->q_is_list ? "{\"translatedText\":[" : "{\"translatedText\":", f);
        for (int q = 0; q < r->n_q; q++) fputs(q ? "," : "", f), json_str(f, texts[q]);
        fputs(r->q_is_list ? "]" : "", f);
        if (r->alternatives > 0) {
            fputs(r->q_is_list ? ",\"alternatives\":[" : ",\"alternatives\":", f);
            for (int q = 0; q < r->n_q; q++)
                fputs(q ? "," : "", f), write_alternatives(f, job, first[q], first[q + 1], texts[q]);
            fputs(r->q_is_list ? "]" : "", f);
        }
        if (r->detected[0]) {
            fputs(r->q_is_list ? ",\"detectedLanguage\":[" : ",\"detectedLanguage\":", f);
            for (int q = 0; q < r->n_q; q++)
                fprintf(f, "%s{\"confidence\":%.1f,\"language\":", q ? "," : "",
                        r->detected_confs ? r->detected_confs[q] : r->detected_confidence),
                    json_str(f, r->detected),
                    fputc('}', f);
            fputs(r->q_is_list ? "]" : "", f);
        }
        fputs("}\n", f);
    }
    for (int q = 0; texts && q < r->n_q; q++) free(texts[q]);
    free(texts);
    free(first);
    return rc;
}

/* The n-best list of a /v1 result. */
static void write_nbest(FILE *f, const attend_result *res) {
    fputs(",\"nbest\":[", f);
    for (int k = 0; k < res->n_best; k++) {
        fputs(k ? ",{\"text\":" : "{\"text\":", f);
        one_line(res->nbest[k].text);
        json_str(f, res->nbest[k].text);
        fprintf(f, ",\"score\":%.9g,\"normalized_score\":%.9g}", (double)res->nbest[k].score,
                (double)res->nbest[k].normalized_score);
    }
    fputc(']', f);
}

/* One sentence of a /v1 answer. 0, or -1 with err. */
static int write_v1_one(FILE *f, const serve_job *job, int i, char *err, size_t errlen) {
    const serve_request *r = &job->req;
    const attend_config *c = attend_get_config(job->m);
    attend_result *res = &job->res[i];
    fputs("{\"source\":", f);
    json_str(f, r->lines[i]);
    if (!res->text || res->status) { /* blank, or not translated */
        fputs(",\"text\":\"\"", f);
        if (res->status) fputs(",\"error\":", f), json_str(f, res->message ? res->message : "not translated");
        if (r->attention) fputs(",\"explore\":", f), explore_json_blank(f, r->lines[i]);
        return fputc('}', f), 0;
    }
    one_line(res->text);
    fputs(",\"text\":", f);
    json_str(f, res->text);
    fprintf(f, ",\"score\":%.9g,\"normalized_score\":%.9g,\"truncated\":%s,\"tokens\":", (double)res->score,
            (double)res->normalized_score, res->truncated ? "true" : "false");
    json_strs(f, (const char *const *)res->tgt_pieces, res->n_tgt);
    fputs(",\"logprobs\":", f);
    json_floats(f, res->logprob, res->logprob ? res->n_tgt : 0);
    if (r->nbest > 1 || r->p.sample) write_nbest(f, res);
    if (r->alignment) {
        char *al = attend_alignment(res, c, &r->view, err, errlen);
        if (!al) return -1;
        fputs(",\"alignment\":", f);
        json_str(f, al);
        free(al);
    }
    if (r->attention) {
        char *presets[EXPLORE_PRESETS];
        const int np = explore_presets(r->alignment ? r->view_name : NULL, c->alignment_view, c->decoder_layers, presets);
        fputs(",\"explore\":", f);
        if (explore_json_sentence(f, r->lines[i], res, c, r->targets != NULL, presets, np, err, errlen)) return -1;
    }
    fputc('}', f);
    return 0;
}

/* POST /v1/translate: {"translations": [...]}, one object per entry of q. */
static int write_v1(FILE *f, serve_job *job, char *err, size_t errlen) {
    fputs("{\"translations\":[", f);
    for (int i = 0; i < job->req.n; i++) {
        if (i) fputs(",\n", f);
        if (write_v1_one(f, job, i, err, errlen)) return -1;
    }
    fputs("]}\n", f);
    return 0;
}

void serve_response_job(serve_job *job) {
    membuf b;
    char err[512] = "out of memory";
    int rc = mem_open(&b);
    if (!rc && job->req.api == SERVE_LIBRE) rc = write_libre(b.f, job);
    else if (!rc) rc = write_v1(b.f, job, err, sizeof err);
    char *body = NULL;
    size_t len = 0;
    if (b.f) body = mem_close(&b, &len);
    for (int i = 0; i < job->req.n; i++) attend_result_free(&job->res[i]);
    free(job->res);
    job->res = NULL;
    if (rc || !body) {
        free(body);
        job->http_status = 500;
        job->body = serve_response_error(err, &job->body_len);
        return;
    }
    job->http_status = 200;
    job->body = body;
    job->body_len = len;
}

/* GET /v1/model: what attend info prints. */
static void write_model(FILE *f, const attend_config *c, const char *name) {
    static const char *const early[] = {"false", "true", "never"};
    fputs("{\"name\":", f);
    json_str(f, name);
    fprintf(f, ",\"attend_version\":\"%s\",\"architecture\":", attend_version());
    json_str(f, c->architecture);
    fprintf(f, ",\"dtype\":\"%s\",\"file_bytes\":%lld,\"tensors\":%lld,\"d_model\":%d,", c->dtype, c->file_bytes,
            c->tensor_count, c->d_model);
    fprintf(f, "\"encoder_layers\":%d,\"encoder_heads\":%d,\"encoder_ffn_dim\":%d,", c->encoder_layers,
            c->encoder_heads, c->encoder_ffn_dim);
    fprintf(f, "\"decoder_layers\":%d,\"decoder_heads\":%d,\"decoder_ffn_dim\":%d,\"activation\":\"%s\",",
            c->decoder_layers, c->decoder_heads, c->decoder_ffn_dim, c->activation);
    fprintf(f, "\"vocab_size\":%d,\"decoder_vocab_size\":%d,\"max_positions\":%d,\"max_length\":%d,", c->vocab_size,
            c->decoder_vocab_size, c->max_position_embeddings, c->max_length);
    fprintf(f, "\"model_max_length\":%d,\"num_beams\":%d,\"length_penalty\":%g,\"early_stopping\":\"%s\",",
            c->model_max_length, c->generation_recorded ? c->num_beams : 1, (double)c->length_penalty,
            early[c->early_stopping >= 0 && c->early_stopping < 3 ? c->early_stopping : 0]);
    fprintf(f, "\"kernels\":\"%s\",\"languages\":", attend_isa());
    json_strs(f, (const char *const *)c->languages, c->n_languages);
    fputs(",\"tasks\":", f);
    json_strs(f, (const char *const *)c->tasks, c->n_tasks);
    fputs(",\"alignment_view\":", f);
    json_str(f, c->alignment_view);
    fputs("}\n", f);
}

char *serve_response_model(const attend_model *m, const char *name, size_t *len) {
    membuf b;
    if (mem_open(&b)) return *len = 0, NULL;
    write_model(b.f, attend_get_config(m), name);
    return mem_close(&b, len);
}
