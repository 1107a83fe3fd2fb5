/* One window of speech as the speech explore page reads it (explore_audio_json.h). */
#include "explore_audio_json.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

/* ---------------------------------------------------------------------------------------
 * Packed arrays */

/* n bytes as a JSON string of their base64 (RFC 4648, padded). */
static void json_base64(FILE *f, const unsigned char *p, size_t n) {
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    fputc('"', f);
    for (size_t i = 0; i < n; i += 3) {
        const uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        const char out[4] = {b64[v >> 18 & 63], b64[v >> 12 & 63], i + 1 < n ? b64[v >> 6 & 63] : '=',
                             i + 2 < n ? b64[v & 63] : '='};
        fwrite(out, 1, 4, f);
    }
    fputc('"', f);
}

/* n floats as base64 of little-endian float32 (the page's Float32Array on any host). */
static int json_f32(FILE *f, const float *x, size_t n) {
    unsigned char *b = malloc(4 * (n ? n : 1));
    if (!b) return -1;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        for (int k = 0; k < 4; k++) b[4 * i + k] = (unsigned char)(u >> 8 * k);
    }
    json_base64(f, b, 4 * n);
    free(b);
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Cross-attention */

int explore_audio_pool(int layers, int heads, int rows, int frames) {
    const char *env = getenv("ATTEND_EXPLORE_MAX_CELLS");
    const double budget = env && atof(env) >= 1 ? atof(env) : EXPLORE_AUDIO_MAX_CELLS;
    const double heads_rows = (double)layers * heads * rows;
    for (int pool = 1; pool <= frames; pool++)
        if (frames % pool == 0 && heads_rows * (frames / pool) <= budget) return pool;
    return frames;
}

/* Rows x[rows][frames] pooled (the mean of pool frames a column) and quantized: q[rows][cols]
 * bytes of each row scaled to its maximum, scale[rows] the maxima. */
static void quantize_rows(const float *x, size_t rows, int frames, int pool, unsigned char *q, float *scale,
                          float *row) {
    const int cols = frames / pool;
    for (size_t k = 0; k < rows; k++, x += frames) {
        float max = 0;
        for (int c = 0; c < cols; c++) {
            float s = 0;
            for (int j = 0; j < pool; j++) s += x[c * pool + j];
            row[c] = pool > 1 ? s / (float)pool : s;
            if (row[c] > max) max = row[c];
        }
        scale[k] = max;
        for (int c = 0; c < cols; c++) q[k * cols + c] = max > 0 ? (unsigned char)lrintf(row[c] / max * 255.0f) : 0;
    }
}

/* "cross": every decoder layer and head's [tokens][frames] weights, packed. 0 or -1 (OOM). */
static int json_cross(FILE *f, const attend_config *c, const attend_result *r) {
    const int L = c->decoder_layers, H = c->decoder_heads, T = r->n_tgt, S = r->n_src;
    const int pool = explore_audio_pool(L, H, T, S), cols = S / pool;
    const size_t rows = (size_t)L * H * T;
    unsigned char *q = malloc(rows * cols + 1);
    float *scale = malloc(sizeof(float) * (rows + 1)), *row = malloc(sizeof(float) * (size_t)cols);
    int rc = -1;
    if (q && scale && row) {
        quantize_rows(r->head_cross, rows, S, pool, q, scale, row);
        fprintf(f, "{\"layers\":%d,\"heads\":%d,\"rows\":%d,\"frames\":%d,\"pool\":%d,\"columns\":%d,\"scale\":", L, H,
                T, S, pool, cols);
        rc = json_f32(f, scale, rows);
        fputs(",\"data\":", f);
        json_base64(f, q, rows * cols);
        fputc('}', f);
    }
    free(q);
    free(scale);
    free(row);
    return rc;
}

/* "token_frame": for each token, the encoder frame where the alignment heads' summed weights
 * peak (the first of equals); the page's stand-in for word times. 0 or -1 (OOM). */
static int json_token_frames(FILE *f, const attend_config *c, const attend_result *r) {
    const int H = c->decoder_heads, T = r->n_tgt, S = r->n_src;
    float *sum = malloc(sizeof(float) * (size_t)S);
    if (!sum) return -1;
    fputc('[', f);
    for (int t = 0; t < T; t++) {
        memset(sum, 0, sizeof(float) * (size_t)S);
        for (int k = 0; k < c->n_alignment_heads; k++) {
            const int l = c->alignment_heads[2 * k], h = c->alignment_heads[2 * k + 1];
            const float *x = r->head_cross + (((size_t)l * H + h) * T + t) * S;
            for (int s = 0; s < S; s++) sum[s] += x[s];
        }
        int best = 0;
        for (int s = 1; s < S; s++)
            if (sum[s] > sum[best]) best = s;
        fprintf(f, "%s%d", t ? "," : "", best);
    }
    fputc(']', f);
    free(sum);
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * The page's object */

/* "words": the transcript's words with their times (word timestamps: empty for a model
 * without alignment heads). */
static void json_words(FILE *f, const attend_transcript *t) {
    fputc('[', f);
    for (int i = 0; t && i < t->n_words; i++) {
        const attend_word *w = &t->words[i];
        fprintf(f, "%s{\"word\":", i ? "," : "");
        json_str(f, w->word ? w->word : "");
        fprintf(f, ",\"start\":%.3f,\"end\":%.3f,\"probability\":%.4f}", w->start, w->end, (double)w->probability);
    }
    fputc(']', f);
}

/* Header, settings and shape. */
static void json_head(FILE *f, const attend_config *c, const explore_audio_page *pg) {
    fputs("{\"kind\":\"speech\",\"model\":", f);
    json_str(f, pg->model);
    fputs(",\"settings\":", f);
    json_str(f, pg->settings);
    fputs(",\"file\":", f);
    json_str(f, pg->file);
    fputs(",\"language\":", f);
    json_str(f, pg->language);
    fprintf(f, ",\"language_given\":%s,\"task\":\"%s\",\"timestamps\":%s", pg->language_given ? "true" : "false",
            pg->sp->task == ATTEND_TASK_TRANSLATE ? "translate" : "transcribe", pg->sp->timestamps ? "true" : "false");
    fprintf(f, ",\"config\":{\"encoder_layers\":%d,\"encoder_heads\":%d,\"decoder_layers\":%d,\"decoder_heads\":%d,"
               "\"n_mels\":%d,\"audio_frames\":%d,\"n_languages\":%d}", c->encoder_layers, c->encoder_heads,
            c->decoder_layers, c->decoder_heads, c->n_mels, c->audio_frames, c->n_languages);
    fprintf(f, ",\"rate\":16000,\"samples\":%lld", pg->samples);
    fputs(",\"alignment_heads\":[", f);
    for (int k = 0; k < c->n_alignment_heads; k++)
        fprintf(f, "%s[%d,%d]", k ? "," : "", c->alignment_heads[2 * k], c->alignment_heads[2 * k + 1]);
    fputc(']', f);
}

/* The tokens: pieces, texts, ids, which are special, log-probabilities. */
static void json_tokens(FILE *f, const attend_config *c, const explore_audio_page *pg) {
    const attend_result *r = pg->r;
    fputs(",\"text\":", f);
    json_str(f, r->text);
    fputs(",\"tokens\":", f);
    json_strs(f, (const char *const *)r->tgt_pieces, r->n_tgt);
    fputs(",\"texts\":", f);
    json_strs(f, (const char *const *)pg->texts, r->n_tgt);
    fputs(",\"ids\":[", f);
    for (int t = 0; t < r->n_tgt; t++) fprintf(f, "%s%d", t ? "," : "", r->tgt_ids[t]);
    fputs("],\"special\":[", f);
    for (int t = 0; t < r->n_tgt; t++) fprintf(f, "%s%s", t ? "," : "", r->tgt_ids[t] >= c->eos_id ? "true" : "false");
    fputs("],\"logprob\":[", f);
    for (int t = 0; t < r->n_tgt; t++) fprintf(f, "%s%.4f", t ? "," : "", (double)r->logprob[t]);
    fputc(']', f);
}

int explore_audio_json(FILE *f, const attend_config *c, const explore_audio_page *pg, char *err, size_t errlen) {
    json_head(f, c, pg);
    json_tokens(f, c, pg);
    fputs(",\"words\":", f);
    json_words(f, pg->t);
    fputs(",\"token_frame\":", f);
    int rc = json_token_frames(f, c, pg->r);
    if (!rc) {
        fprintf(f, ",\n\"mel\":{\"rows\":%d,\"frames\":%d,\"data\":", c->n_mels, c->audio_frames);
        rc = json_f32(f, pg->mel, (size_t)c->n_mels * c->audio_frames);
    }
    if (!rc) {
        fputs("},\n\"cross\":", f);
        rc = json_cross(f, c, pg->r);
    }
    if (rc) snprintf(err, errlen, "out of memory");
    else fputc('}', f);
    return rc;
}
