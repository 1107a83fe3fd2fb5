/* One sentence as the explore page reads it (explore_json.h). */
#include "explore_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/align.h"
#include "json.h"

/* Attention weights as integers in thousandths: 3 decimals, the page's precision. */
static void json_weights(FILE *f, const float *x, size_t n) {
    fputc('[', f);
    for (size_t i = 0; i < n; i++) fprintf(f, "%s%ld", i ? "," : "", lrintf(x[i] * 1000.0f));
    fputc(']', f);
}

/* ---------------------------------------------------------------------------------------
 * One sentence */

/* The alignment of r under each preset view, as {"view": [[src word, tgt word], ...]}. */
static int json_alignments(FILE *f, const attend_result *r, const attend_config *c, char *const *presets, int np,
                           char *err, size_t errlen) {
    fputc('{', f);
    for (int k = 0; k < np; k++) {
        attend_view v;
        if (attend_view_parse(presets[k], &v, err, errlen)) return -1;
        char *ph = attend_alignment(r, c, &v, err, errlen);
        if (!ph) return -1;
        fprintf(f, "%s", k ? "," : "");
        json_str(f, presets[k]);
        fputs(":[", f);
        int i, j, off = 0, used, first = 1;
        while (sscanf(ph + off, "%d-%d%n", &i, &j, &used) == 2) {
            fprintf(f, "%s[%d,%d]", first ? "" : ",", i, j);
            first = 0;
            off += used;
        }
        fputc(']', f);
        free(ph);
    }
    fputc('}', f);
    return 0;
}

int explore_json_sentence(FILE *f, const char *source, const attend_result *r, const attend_config *c, int forced,
                          char *const *presets, int np, char *err, size_t errlen) {
    const size_t S = (size_t)r->n_src, T = (size_t)r->n_tgt;
    attend_words sw = {0}, tw = {0};
    if (attend_words_from_pieces((const char *const *)r->src_pieces, r->n_src, &sw) ||
        attend_words_from_pieces((const char *const *)r->tgt_pieces, r->n_tgt, &tw)) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    fputs("{\"source\":", f);
    json_str(f, source);
    fputs(",\"translation\":", f);
    json_str(f, r->text);
    fprintf(f, ",\"forced\":%s,\"score\":%.6g,\"normalized_score\":%.6g,\"src\":", forced ? "true" : "false",
            (double)r->score, (double)r->normalized_score);
    json_strs(f, (const char *const *)r->src_pieces, r->n_src);
    fputs(",\"tgt\":", f);
    json_strs(f, (const char *const *)r->tgt_pieces, r->n_tgt);
    fputs(",\"src_words\":", f);
    json_strs(f, (const char *const *)sw.words, sw.n_words);
    fputs(",\"tgt_words\":", f);
    json_strs(f, (const char *const *)tw.words, tw.n_words);
    fputs(",\"logprob\":[", f);
    for (size_t t = 0; t < T; t++) fprintf(f, "%s%.4f", t ? "," : "", (double)r->logprob[t]);
    fputs("],\"align\":", f);
    int rc = json_alignments(f, r, c, presets, np, err, errlen);
    if (rc == 0) {
        fputs(",\"enc\":", f);
        json_weights(f, r->enc_self, (size_t)c->encoder_layers * c->encoder_heads * S * S);
        fputs(",\"dec\":", f);
        json_weights(f, r->dec_self, (size_t)c->decoder_layers * c->decoder_heads * T * T);
        fputs(",\"cross\":", f);
        json_weights(f, r->cross, (size_t)c->decoder_layers * c->decoder_heads * T * S);
        fputc('}', f);
    }
    attend_words_free(&sw);
    attend_words_free(&tw);
    return rc;
}


/* The presets offered on the page: the chosen one first (else the model's own), then the
 * model's own and the usual ones. */
int explore_presets(const char *first, const char *own, int L, char **out) {
    const char *all[EXPLORE_PRESETS] = {first ? first : own, own, "last:0", "penultimate:avg", "all:avg"};
    int n = 0;
    for (int i = 0; i < EXPLORE_PRESETS; i++) {
        if (i == 3 && L < 2) continue;
        int dup = 0;
        for (int k = 0; k < n; k++) dup |= !strcmp(out[k], all[i]);
        if (!dup) out[n++] = (char *)all[i];
    }
    return n;
}

void explore_json_blank(FILE *f, const char *source) {
    fputs("{\"source\":", f);
    json_str(f, source);
    fputs(",\"translation\":\"\",\"empty\":true,\"forced\":false,\"score\":0,\"normalized_score\":0,\"src\":[],\"tgt\":[],"
          "\"src_words\":[],\"tgt_words\":[],\"logprob\":[],\"align\":{},\"enc\":[],\"dec\":[],\"cross\":[]}",
          f);
}
