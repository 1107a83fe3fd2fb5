/* attend explore on speech (explore_audio.h): audio in, the page out. */
#include "explore_audio.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../audio/read.h"
#include "cli.h"
#include "explore_audio_json.h"
#include "page_file.h"

extern const char explore_audio_html[]; /* build/cli/explore_audio_html.c, from python/attend/ */

typedef struct {
    const explore_audio_options *o;
    attend_model *m;
    const attend_config *c;
    explore_audio_page pg;
} audio_run;

/* The first window of the file ("-": standard input) as attend transcribe hears it: the
 * features of the whole audio (HF's WhisperFeatureExtractor with truncation=False: one
 * normalisation; up to 30 s, one window padded with zeros), the model's filter bank, its first
 * audio_frames frames as [n_mels][audio_frames]. *samples: all the audio's 16 kHz samples.
 * 0 or EXIT_FAIL after a message. */
static int read_window(audio_run *x, float **mel, long long *samples) {
    const attend_config *c = x->c;
    const char *file = x->o->audio;
    const size_t W = (size_t)c->audio_frames;
    char err[512] = "";
    float *bank = malloc(sizeof(float) * (size_t)c->n_mels * MEL_BINS), *fm = NULL;
    size_t frames = 0, n = 0;
    *mel = NULL;
    if (bank && !attend_mel_filters(x->m, bank, err, sizeof err)) {
        mel_config mc = mel_default_config(bank, c->n_mels);
        mc.truncate = 0;
        if (!strcmp(file, "-")) {
            size_t size;
            unsigned char *data = cli_read_stdin("explore", &size);
            if (data) fm = audio_features_memory(data, size, x->o->max_seconds, &mc, &frames, NULL, &n, err, sizeof err);
            else snprintf(err, sizeof err, "not read");
            free(data);
        } else {
            fm = audio_features_file(file, x->o->max_seconds, &mc, &frames, NULL, &n, err, sizeof err);
        }
    }
    free(bank);
    if (fm && frames < W) snprintf(err, sizeof err, "%zu frames, less than one window", frames);
    else if (fm && !(*mel = malloc(sizeof(float) * W * (size_t)c->n_mels))) snprintf(err, sizeof err, "out of memory");
    for (size_t f = 0; *mel && f < W; f++) /* frame-major -> HF's [n_mels, frames] */
        for (int r = 0; r < c->n_mels; r++) (*mel)[(size_t)r * W + f] = fm[f * (size_t)c->n_mels + r];
    free(fm);
    if (!*mel) {
        fprintf(stderr, "attend explore: %s: %s\n", file, err[0] ? err : "out of memory");
        return EXIT_FAIL;
    }
    *samples = (long long)n;
    return 0;
}

/* Each token's text as attend_detokenize gives it ("" for special tokens), attend_mem_free'd
 * one by one; NULL when out of memory. */
static char **token_texts(attend_model *m, const attend_result *r) {
    char **texts = calloc((size_t)r->n_tgt + 1, sizeof *texts);
    for (int t = 0; texts && t < r->n_tgt; t++) {
        texts[t] = attend_detokenize(m, &r->tgt_ids[t], 1);
        if (!texts[t]) {
            for (int k = 0; k < t; k++) attend_mem_free(texts[k]);
            free(texts);
            return NULL;
        }
    }
    return texts;
}

/* The search in words, as the text page says it. */
static void search_words(const attend_config *c, const attend_params *p, char *out, size_t n) {
    const int beams = p->num_beams ? p->num_beams : c->num_beams;
    if (beams > 1) snprintf(out, n, "beam search, %d beams", beams);
    else snprintf(out, n, "greedy search");
}

static int write_audio_page(FILE *f, const void *ctx) {
    const audio_run *x = ctx;
    const char *mark = strstr(explore_audio_html, "@@DATA@@");
    char err[256];
    fwrite(explore_audio_html, 1, (size_t)(mark - explore_audio_html), f);
    if (explore_audio_json(f, x->c, &x->pg, err, sizeof err)) {
        fprintf(stderr, "attend explore: %s\n", err);
        return EXIT_FAIL;
    }
    fputs(mark + strlen("@@DATA@@"), f);
    return EXIT_OK;
}

/* Every decoder (layer, head) pair in order (attend_params.cross_heads' layout), [2 * L * H]:
 * the cross-attention the page shows, without the encoder's and the decoder's
 * self-attention that want_attention would keep too (the encoder's alone is
 * layers x heads x 1500 x 1500 floats). NULL when out of memory. */
static int *every_head(const attend_config *c) {
    int *heads = malloc(sizeof(int) * 2 * (size_t)c->decoder_layers * c->decoder_heads), k = 0;
    for (int l = 0; heads && l < c->decoder_layers; l++)
        for (int h = 0; h < c->decoder_heads; h++) heads[k++] = l, heads[k++] = h;
    return heads;
}

/* The window decoded (scores and every head's cross-attention kept) into x->pg's result, and
 * its words: the transcript of the same features (attend_transcribe_features) with word
 * timestamps when the model has alignment heads, its words placed on the page where they
 * were heard. samples: the audio's (its frames of sound, HF's num_frames). 0 or EXIT_FAIL
 * after a message. */
static int decode_window(audio_run *x, const float *mel, long long samples, attend_result *r, attend_transcript *t) {
    const explore_audio_options *o = x->o;
    char err[512] = "out of memory";
    attend_speech_params wsp = o->sp;
    wsp.word_timestamps = x->c->n_alignment_heads > 0;
    wsp.audio_frames = samples / 160 < x->c->audio_frames ? (int)(samples / 160) : x->c->audio_frames;
    attend_params p = o->p, plain = o->p;
    int *heads = every_head(x->c);
    p.want_attention = 0, p.want_scores = 1;
    p.cross_heads = heads, p.n_cross_heads = x->c->decoder_layers * x->c->decoder_heads;
    plain.want_attention = plain.want_logits = 0;
    const char *lang = NULL;
    const int bad = !heads || attend_decode_features(x->m, &mel, 1, &o->sp, &p, r, &lang, err, sizeof err);
    free(heads);
    if (bad) {
        fprintf(stderr, "attend explore: %s: %s\n", o->audio, err);
        return EXIT_FAIL;
    }
    if (attend_transcribe_features(x->m, mel, x->c->audio_frames, &wsp, &plain, t, err, sizeof err)) {
        fprintf(stderr, "attend explore: %s: %s\n", o->audio, err);
        attend_result_free(r);
        return EXIT_FAIL;
    }
    x->pg.language = lang;
    return 0;
}

int explore_audio(attend_model *m, const explore_audio_options *o) {
    audio_run x = {o, m, attend_get_config(m), {0}};
    float *mel = NULL;
    char settings[64];
    attend_result r;
    attend_transcript t;
    long long samples = 0;
    int status = read_window(&x, &mel, &samples);
    if (!status) status = decode_window(&x, mel, samples, &r, &t);
    if (status) {
        free(mel);
        return status;
    }
    search_words(x.c, &o->p, settings, sizeof settings);
    const char *slash = strrchr(o->audio, '/');
    char **texts = token_texts(m, &r);
    x.pg = (explore_audio_page){o->model_name, settings, slash ? slash + 1 : o->audio, x.pg.language,
                                o->sp.language && strcmp(o->sp.language, "auto"), &o->sp, mel, samples,
                                &r, texts, &t};
    if (!texts) {
        fprintf(stderr, "attend explore: out of memory\n");
        status = EXIT_FAIL;
    }
    const char *path = o->output ? o->output : "explore.html";
    if (!status) status = page_write_file("explore", path, write_audio_page, &x);
    if (!status && strcmp(path, "-"))
        fprintf(stderr, "attend explore: wrote %s (the first %.2f s of %.2f s of audio, %d tokens)\n", path,
                (samples < MEL_WINDOW_SAMPLES ? samples : MEL_WINDOW_SAMPLES) / 16000.0, samples / 16000.0, r.n_tgt);
    for (int k = 0; texts && k < r.n_tgt; k++) attend_mem_free(texts[k]);
    free(texts);
    attend_transcript_free(&t);
    attend_result_free(&r);
    free(mel);
    return status;
}
