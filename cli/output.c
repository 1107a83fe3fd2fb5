/* Writers of attend translate's output lines and of --dump-attention archives (output.h). */
#include "output.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* ---------------------------------------------------------------------------------------
 * Output lines */

void cli_write_empty(long long idx, int nbest, int with_alignment) {
    if (nbest)
        for (int k = 0; k < nbest; k++) printf("%lld |||  ||| 0.000000%s\n", idx, with_alignment ? " ||| " : "");
    else
        fputs(with_alignment ? " ||| \n" : "\n", stdout);
}

/* The warning for one cut sequence: the line's (what "line N" or "line N, sentence K of M"
 * names), of n_src tokens. */
static void warn_cut(const attend_config *c, const char *what, int n_src) {
    const size_t max_bytes = (size_t)c->max_line_bytes;
    if (n_src >= c->model_max_length && c->model_max_length < c->max_position_embeddings)
        fprintf(stderr, "attend: %s: longer than the tokenizer's %d tokens (model_max_length); "
                "translated its first %d\n", what, c->model_max_length, n_src);
    else if (n_src >= c->max_position_embeddings)
        fprintf(stderr, "attend: %s: longer than the model's %d positions; translated its first %d tokens\n", what,
                c->max_position_embeddings, n_src);
    else /* many bytes, few tokens (runs of spaces, say) */
        fprintf(stderr, "attend: %s: longer than %zu bytes; translated its first %zu (%d tokens)\n", what, max_bytes,
                max_bytes, n_src);
}

void cli_warn_truncated(const attend_config *c, long long idx, const attend_result *r) {
    char what[96];
    if (r->truncated && r->n_sentences < 2) {
        snprintf(what, sizeof what, "line %lld", idx);
        warn_cut(c, what, r->n_src);
    }
    for (int k = 0; r->truncated && k < r->n_sentences && r->n_sentences >= 2; k++)
        if (r->sentences[k].truncated) { /* a sentence without a clause boundary to cut it at */
            snprintf(what, sizeof what, "line %lld, sentence %d of %d", idx, k + 1, r->n_sentences);
            warn_cut(c, what, r->sentences[k].n_src);
        }
}

int cli_is_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\f' && s[i] != '\v' && s[i] != 0)
            return 0; /* NUL reads as a space (tokenizer/encode.c) */
    return 1;
}

/* One line out, whatever the vocabulary holds: newlines become spaces. */
void cli_one_line(char *t) {
    for (; *t; t++)
        if (*t == '\n' || *t == '\r') *t = ' ';
}

attend_result cli_hypothesis_result(const attend_result *r, int k) {
    const attend_hypothesis *h = &r->nbest[k];
    attend_result x = *r;
    x.text = h->text;
    x.n_tgt = h->n;
    x.tgt_ids = h->ids;
    x.tgt_pieces = h->pieces;
    x.score = h->score;
    x.normalized_score = h->normalized_score;
    x.logprob = h->logprob;
    x.dec_self = h->dec_self;
    x.cross = h->cross;
    x.align_head = h->align_head;
    x.logits = k == 0 ? r->logits : NULL;
    x.n_best = 1;
    x.nbest = r->nbest + k;
    return x;
}

/* " ||| ALIGNMENT" of r under view, on stdout; EXIT_USAGE, the message on stderr, when
 * attend_alignment refuses (a view that does not fit the model, no attention). */
static int print_alignment(const attend_result *r, const attend_config *c, const attend_view *view) {
    char err[512];
    char *al = attend_alignment(r, c, view, err, sizeof err);
    if (!al) {
        fprintf(stderr, "attend: --alignment: %s\n", err);
        return EXIT_USAGE;
    }
    printf(" ||| %s", al);
    free(al);
    return 0;
}

int cli_write_nbest(long long idx, attend_result *r, const attend_config *c, const attend_view *view) {
    for (int k = 0; k < r->n_best; k++) { /* fewer hypotheses than asked cannot happen */
        cli_one_line(r->nbest[k].text);
        printf("%lld ||| %s ||| %.6f", idx, r->nbest[k].text, r->nbest[k].normalized_score);
        if (view) { /* each hypothesis's own attention */
            const attend_result h = cli_hypothesis_result(r, k);
            if (print_alignment(&h, c, view)) return EXIT_USAGE;
        }
        fputc('\n', stdout);
    }
    return 0;
}

void cli_write_aligned(attend_result *r, const char *pharaoh) {
    cli_one_line(r->text);
    printf("%s ||| %s\n", r->text, pharaoh);
}

int cli_write_translation(attend_result *r, const attend_config *c, const attend_view *view) {
    cli_one_line(r->text);
    fputs(r->text, stdout);
    if (view && print_alignment(r, c, view)) return EXIT_USAGE;
    fputc('\n', stdout);
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * --dump-attention */

/* One layer's attention a [heads, rows, cols] as the array s{idx}/{kind}/l{layer}. */
static void dump_layer(npz_writer *z, long long idx, const char *kind, int layer, const float *a, int heads,
                       int rows, int cols) {
    char name[96];
    const int shape[3] = {heads, rows, cols};
    snprintf(name, sizeof name, "s%lld/%s/l%d", idx, kind, layer);
    npz_add_f32(z, name, a, 3, shape);
}

/* One sentence's ids, pieces, text, scores and attention as s{idx}/... arrays (README). */
/* A line translated sentence by sentence: s{idx}/sentences, int32 [K, 8], one row per
 * sentence: its source bytes [begin, end) in the line, its translation's bytes in text,
 * its first source token and count, its first target token and count. */
static void dump_sentences(npz_writer *z, long long idx, const attend_result *r) {
    if (r->n_sentences < 2) return;
    int32_t *rows = malloc(sizeof(int32_t) * 8 * (size_t)r->n_sentences);
    if (!rows) return; /* out of memory: the key is left out, as any other the writer cannot add */
    for (int k = 0; k < r->n_sentences; k++) {
        const attend_sentence *s = &r->sentences[k];
        const int32_t row[8] = {(int32_t)s->src_begin, (int32_t)s->src_end, (int32_t)s->text_begin,
                                (int32_t)s->text_end, s->src_token, s->n_src, s->tgt_token, s->n_tgt};
        memcpy(rows + 8 * k, row, sizeof row);
    }
    char name[96];
    const int shape[2] = {r->n_sentences, 8};
    snprintf(name, sizeof name, "s%lld/sentences", idx);
    npz_add_i32(z, name, rows, 2, shape);
    free(rows);
}

void cli_dump_result(npz_writer *z, const attend_config *c, long long idx, const attend_result *r,
                     int with_logits) {
    char name[96];
    int S = r->n_src, T = r->n_tgt;
    snprintf(name, sizeof name, "s%lld/src_ids", idx);
    if (r->src_ids) npz_add_i32(z, name, r->src_ids, 1, &S); /* speech: audio frames, no ids */
    snprintf(name, sizeof name, "s%lld/tgt_ids", idx);
    npz_add_i32(z, name, r->tgt_ids, 1, &T);
    snprintf(name, sizeof name, "s%lld/src_pieces", idx);
    if (r->src_pieces) npz_add_str(z, name, (const char *const *)r->src_pieces, S);
    snprintf(name, sizeof name, "s%lld/tgt_pieces", idx);
    npz_add_str(z, name, (const char *const *)r->tgt_pieces, T);
    const char *text = r->text;
    snprintf(name, sizeof name, "s%lld/text", idx);
    npz_add_str(z, name, &text, 1);
    snprintf(name, sizeof name, "s%lld/logprob", idx);
    npz_add_f32(z, name, r->logprob, 1, &T);
    const int one = 1;
    snprintf(name, sizeof name, "s%lld/score", idx);
    npz_add_f32(z, name, &r->score, 1, &one);
    snprintf(name, sizeof name, "s%lld/normalized_score", idx);
    npz_add_f32(z, name, &r->normalized_score, 1, &one);
    if (with_logits) {
        const int shape[2] = {T, c->decoder_vocab_size};
        snprintf(name, sizeof name, "s%lld/logits", idx);
        npz_add_f32(z, name, r->logits, 2, shape);
    }
    dump_sentences(z, idx, r);
    const int He = c->encoder_heads, Hd = c->decoder_heads;
    for (int l = 0; l < c->encoder_layers; l++)
        dump_layer(z, idx, "enc_self", l, r->enc_self + (size_t)l * He * S * S, He, S, S);
    for (int l = 0; l < c->decoder_layers; l++) {
        dump_layer(z, idx, "dec_self", l, r->dec_self + (size_t)l * Hd * T * T, Hd, T, T);
        dump_layer(z, idx, "cross", l, r->cross + (size_t)l * Hd * T * S, Hd, T, S);
    }
    if (r->align_head) { /* a file with a trained alignment head: its rows [T, S] */
        const int shape[2] = {T, S};
        snprintf(name, sizeof name, "s%lld/align_head", idx);
        npz_add_f32(z, name, r->align_head, 2, shape);
    }
}

void cli_dump_nbest(npz_writer *z, const attend_config *c, long long idx, const attend_result *r) {
    char name[112];
    const int Hd = c->decoder_heads, S = r->n_src, one = 1;
    for (int k = 1; k < r->n_best; k++) {
        const attend_hypothesis *h = &r->nbest[k];
        int T = h->n;
        snprintf(name, sizeof name, "s%lld/nbest%d/tgt_ids", idx, k);
        npz_add_i32(z, name, h->ids, 1, &T);
        snprintf(name, sizeof name, "s%lld/nbest%d/tgt_pieces", idx, k);
        npz_add_str(z, name, (const char *const *)h->pieces, T);
        const char *text = h->text;
        snprintf(name, sizeof name, "s%lld/nbest%d/text", idx, k);
        npz_add_str(z, name, &text, 1);
        snprintf(name, sizeof name, "s%lld/nbest%d/score", idx, k);
        npz_add_f32(z, name, &h->score, 1, &one);
        snprintf(name, sizeof name, "s%lld/nbest%d/normalized_score", idx, k);
        npz_add_f32(z, name, &h->normalized_score, 1, &one);
        if (h->logprob) {
            snprintf(name, sizeof name, "s%lld/nbest%d/logprob", idx, k);
            npz_add_f32(z, name, h->logprob, 1, &T);
        }
        for (int l = 0; h->cross && l < c->decoder_layers; l++) {
            char kind[40];
            snprintf(kind, sizeof kind, "nbest%d/dec_self", k);
            dump_layer(z, idx, kind, l, h->dec_self + (size_t)l * Hd * T * T, Hd, T, T);
            snprintf(kind, sizeof kind, "nbest%d/cross", k);
            dump_layer(z, idx, kind, l, h->cross + (size_t)l * Hd * T * S, Hd, T, S);
        }
    }
}

int cli_dump_one(const char *path, const attend_config *c, const attend_result *r, char *err, size_t errlen) {
    npz_writer *z = npz_open(path, err, errlen);
    if (!z) return -1;
    cli_dump_result(z, c, 0, r, 0);
    return npz_close(z, err, errlen);
}
