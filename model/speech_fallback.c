/* One window of speech decoded with temperature fallback, as HF's generate_with_fallback
 * and _need_fallback do it (transformers 79f1fc71; tools/reference_whisper_generate.py):
 * each temperature in turn (0: p's search; above 0: sampling with that temperature and
 * top-k 50, HF's default) until a decode's compression ratio is at most
 * compression_ratio_threshold and its average log-probability at least logprob_threshold;
 * the last temperature's decode is kept whatever it gives. A decode whose average is below
 * logprob_threshold while the no-speech probability is above no_speech_threshold ends the
 * loop as "no speech": the window is skipped. */
#include "speech.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "attend_model.h"
#include "translate.h"

#define HF_TOP_K 50 /* GenerationConfig's default top_k: HF's sampling keeps it */

float speech_compression_ratio(const int *ids, int n, int vocab_size) {
    if (n <= 0) return 0.0f;
    const int width = (int)(log2((double)vocab_size) / 8) + 1;
    const uLong raw_len = (uLong)n * (uLong)width;
    uLongf packed_len = compressBound(raw_len);
    unsigned char *raw = malloc(raw_len), *packed = malloc(packed_len);
    float ratio = NAN;
    if (raw && packed) {
        for (int i = 0; i < n; i++)
            for (int b = 0; b < width; b++) raw[(size_t)i * width + b] = (unsigned char)((unsigned)ids[i] >> (8 * b));
        if (compress(packed, &packed_len, raw, raw_len) == Z_OK) ratio = (float)((double)raw_len / packed_len);
    }
    free(raw);
    free(packed);
    return ratio;
}

/* softmax(row)[id] in double (0 for an id outside the row). */
static float softmax_at(const float *row, int V, int id) {
    if (id < 0 || id >= V) return 0.0f;
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j < V; j++) mx = row[j] > mx ? row[j] : mx;
    for (int j = 0; j < V; j++) sum += exp((double)row[j] - mx);
    return (float)(exp((double)row[id] - mx) / sum);
}

/* The window's measures of w->r: the generated ids (after the prompt, <|endoftext|> kept). */
static void measure(const attend_model *am, speech_window *w) {
    const attend_result *r = &w->r;
    const int n = r->n_tgt - w->n_prompt;
    double sum = 0;
    for (int i = 0; r->logprob && i < n; i++) sum += r->logprob[w->n_prompt + i];
    w->avg_logprob = n > 0 ? (float)(sum / n) : 0.0f;
    w->compression_ratio = speech_compression_ratio(r->tgt_ids + w->n_prompt, n, am->m->c.vocab_size);
}

/* HF's _need_fallback: sets w->fallback and w->skip. */
static void judge(const attend_speech_params *sp, speech_window *w) {
    w->fallback = (sp->use_compression_ratio && w->compression_ratio > sp->compression_ratio_threshold) ||
                  (sp->use_logprob && w->avg_logprob < sp->logprob_threshold);
    w->skip = 0;
    if (sp->use_no_speech && sp->use_logprob && w->avg_logprob < sp->logprob_threshold &&
        w->no_speech_prob > sp->no_speech_threshold)
        w->fallback = 0, w->skip = 1;
}

/* <|nospeech|>: the file's whisper.no_speech_id. A vocabulary without one reads the id
 * before <|notimestamps|>, the one HF's WhisperNoSpeechDetection always reads (in every
 * published checkpoint the same token). */
static int no_speech_token(const s2s_config *c) {
    const s2s_speech *s = &c->speech;
    return s->no_speech_id < c->decoder_vocab_size ? s->no_speech_id : s->no_timestamps_id - 1;
}

/* p's search at temperature t: as given at 0, else sampling (one sample, HF's top-k). */
static attend_params search_at(const attend_params *p, float t) {
    attend_params q = *p;
    q.want_scores = 1;
    if (t > 0) {
        q.sample = 1, q.num_beams = 1, q.n_best = 1, q.temperature = t;
        if (q.top_k == 0) q.top_k = HF_TOP_K;
    }
    return q;
}

int speech_decode_window(attend_model *am, const float *mel, const attend_speech_params *sp, const attend_params *p,
                         speech_window *w, char *err, size_t errlen) {
    const s2s_config *c = &am->m->c;
    const int V = c->decoder_vocab_size, nospeech = no_speech_token(c);
    const attend_params dp = attend_default_params();
    if (!p) p = &dp;
    memset(w, 0, sizeof *w);
    const float one = p->sample ? (p->temperature > 0 ? p->temperature : 1.0f) : 0.0f;
    const float *temps = sp->n_temperatures > 0 && sp->temperatures ? sp->temperatures : &one;
    const int n_temps = sp->n_temperatures > 0 && sp->temperatures ? sp->n_temperatures : 1;
    /* the window's encoder output, kept for the decodes at later temperatures */
    s2s_encoded kept = {n_temps > 1 ? malloc(sizeof(float) * (size_t)c->speech.n_frames * c->d_model) : NULL, 0};
    float *first = malloc(sizeof(float) * (size_t)V);
    if (!first || (n_temps > 1 && !kept.x)) {
        free(first);
        free(kept.x);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    speech_extras x = {first, 1, kept.x ? &kept : NULL};
    w->n_prompt = speech_prompt_length(am, sp);
    int rc = 0;
    for (int k = 0; k < n_temps; k++) {
        if (k) attend_result_free(&w->r);
        const attend_params q = search_at(p, temps[k]);
        if ((rc = speech_decode(am, &mel, 1, sp, &q, &x, &w->r, &w->language, err, errlen))) break;
        w->temperature = temps[k];
        if (k == 0) w->no_speech_prob = softmax_at(first, V, nospeech); /* the same at every temperature */
        measure(am, w);
        judge(sp, w);
        if (!w->fallback) break;
    }
    free(first);
    free(kept.x);
    return rc;
}
