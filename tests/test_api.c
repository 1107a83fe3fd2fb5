/* The library's id-level calls against its text-level ones: attend_tokenize gives the ids
 * attend_translate uses, attend_translate_ids on them gives the same result (text, ids,
 * score, attention), forced decoding from ids equals forced decoding from text,
 * attend_detokenize gives the result's text, and bad ids are refused with a message; target
 * prefixes and the n-best hypotheses' own arrays; score and normalized_score mean the same
 * with every search (the sum of the log-probabilities, and that over length ^ penalty);
 * cross_heads keeps the listed heads' slices of the cross-attention.
 * Usage: test_api [MODEL.gguf] (default tests/data/tiny-v1.gguf) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/attend.h"
#include "check.h"

static int same_result(const attend_result *a, const attend_result *b, const attend_config *c) {
    if (strcmp(a->text, b->text) || a->n_src != b->n_src || a->n_tgt != b->n_tgt) return 0;
    /* bit for bit (NaN, greedy without want_scores, equals itself) */
    if (memcmp(&a->score, &b->score, sizeof a->score) ||
        memcmp(&a->normalized_score, &b->normalized_score, sizeof a->score))
        return 0;
    if (memcmp(a->src_ids, b->src_ids, sizeof(int) * (size_t)a->n_src) ||
        memcmp(a->tgt_ids, b->tgt_ids, sizeof(int) * (size_t)a->n_tgt))
        return 0;
    for (int i = 0; i < a->n_src; i++)
        if (strcmp(a->src_pieces[i], b->src_pieces[i])) return 0;
    const size_t nc = (size_t)c->decoder_layers * c->decoder_heads * a->n_tgt * a->n_src;
    return !memcmp(a->cross, b->cross, sizeof(float) * nc) && !memcmp(a->logprob, b->logprob, sizeof(float) * a->n_tgt);
}

typedef struct {
    int calls, seen[8], stop_after;
    attend_result *out;
} batch_log;

static int on_batch(void *user, const int *index, int n) {
    batch_log *b = user;
    b->calls++;
    for (int j = 0; j < n; j++) {
        b->seen[index[j]]++;
        if (!b->out[index[j]].text) b->seen[index[j]] += 100; /* handed over unfinished */
    }
    return b->stop_after && b->calls == b->stop_after;
}

/* Library batching: batches of at most 2 sentences, sorted by length, each handed over
 * once; results equal one batch of all; a non-zero return stops the call. */
static void batching(attend_model *m, attend_params p) {
    const char *lines[6] = {"Ein sehr langer Satz mit vielen Worten und noch mehr Worten.", "Ja.",
                            "Wo ist der Bahnhof?", "Zwei Hunde spielen im Schnee.", "Gut.", "Ich habe Hunger."};
    attend_result all[6], part[6];
    char err[256];
    CHECK(attend_translate(m, lines, NULL, 6, NULL, &p, all, err, sizeof err) == 0);
    batch_log b = {0};
    b.out = part;
    p.batch_size = 2;
    p.on_batch = on_batch;
    p.user = &b;
    CHECK(attend_translate(m, lines, NULL, 6, NULL, &p, part, err, sizeof err) == 0);
    CHECK(b.calls == 3);
    for (int i = 0; i < 6; i++) {
        CHECKF(b.seen[i] == 1, "line %d handed over %d times", i, b.seen[i]);
        CHECK(same_result(&all[i], &part[i], attend_get_config(m)));
        attend_result_free(&part[i]);
    }
    batch_log stop = {0};
    stop.out = part;
    stop.stop_after = 1;
    p.user = &stop;
    CHECK(attend_translate(m, lines, NULL, 6, NULL, &p, part, err, sizeof err) == -1);
    CHECK(strstr(err, "stopped by the caller") != NULL && stop.calls == 1);
    /* the first batch (the two shortest: "Ja." and "Gut.") stays the caller's */
    CHECK(part[1].text && part[4].text && !part[0].text && !part[2].text);
    for (int i = 0; i < 6; i++) {
        attend_result_free(&part[i]);
        attend_result_free(&all[i]);
    }
}

/* A sentence with bad ids fails on its own (status, message) and does not fail the call:
 * the others are translated exactly as alone; with on_batch it is handed over first. */
static void bad_lines(attend_model *m, attend_params p) {
    const attend_config *c = attend_get_config(m);
    char err[256];
    int *good_ids, ng;
    CHECK(attend_tokenize(m, "Wo ist der Bahnhof?", 19, &good_ids, &ng, err, sizeof err) == 0);
    int bad[] = {5, c->vocab_size, 0}, nb = 3, zero = 0;
    const int *ids[4] = {good_ids, bad, good_ids, bad};
    int lens[4] = {ng, nb, ng, zero};
    attend_result r[4], alone;
    CHECK(attend_translate_ids(m, ids, lens, 1, NULL, NULL, &p, &alone, err, sizeof err) == 0);
    for (int with_batches = 0; with_batches < 2; with_batches++) {
        batch_log b = {0};
        b.out = r;
        attend_params q = p;
        if (with_batches) q.batch_size = 1, q.on_batch = on_batch, q.user = &b;
        CHECK(attend_translate_ids(m, ids, lens, 4, NULL, NULL, &q, r, err, sizeof err) == 0);
        CHECK(r[0].status == 0 && r[2].status == 0 && !r[0].message);
        CHECK(same_result(&alone, &r[0], c) && same_result(&alone, &r[2], c));
        CHECK(r[1].status == ATTEND_E_INPUT && r[1].message && strstr(r[1].message, "outside the vocabulary"));
        CHECK(r[1].text && !strcmp(r[1].text, "") && r[1].n_src == 0 && !r[1].src_ids);
        CHECK(r[3].status == ATTEND_E_INPUT && r[3].message && strstr(r[3].message, "0 ids"));
        if (with_batches) /* the two failed lines first, in one call, then one call per line */
            CHECK(b.calls == 3 && b.seen[0] == 1 && b.seen[1] == 1 && b.seen[2] == 1 && b.seen[3] == 1);
        for (int i = 0; i < 4; i++) attend_result_free(&r[i]);
    }
    attend_result_free(&alone);
    free(good_ids);
}

/* Target prefixes: ids (attend_translate_ids) equal the text a free translation starts with
 * and the output starts with them; an empty prefix is bit-identical to none; one too long
 * fails its line only; with targets the call is refused. Each n-best hypothesis carries its
 * own log-probabilities, attention and pieces (nbest[0] shares the result's). */
static void prefixes(attend_model *m, attend_params p) {
    const attend_config *c = attend_get_config(m);
    const char *line = "Zwei Hunde spielen im Schnee.";
    char err[256];
    int *ids, n;
    CHECK(attend_tokenize(m, line, strlen(line), &ids, &n, err, sizeof err) == 0);
    attend_result free_run, r[3];
    p.n_best = 3;
    CHECK(attend_translate(m, &line, NULL, 1, NULL, &p, &free_run, err, sizeof err) == 0);
    for (int k = 0; k < free_run.n_best; k++) {
        const attend_hypothesis *h = &free_run.nbest[k];
        CHECK(h->logprob && h->cross && h->dec_self && h->pieces && h->pieces[h->n - 1]);
        CHECK((k == 0) == (h->cross == free_run.cross && h->logprob == free_run.logprob));
    }
    const char *empty[] = {""};
    attend_params q = p;
    q.target_prefix = empty;
    CHECK(attend_translate(m, &line, NULL, 1, NULL, &q, &r[0], err, sizeof err) == 0);
    CHECK(same_result(&free_run, &r[0], c));
    attend_result_free(&r[0]);
    /* the first two ids of the third hypothesis, forced: the search continues from them */
    const int seven[7] = {5, 5, 5, 5, 5, 5, 5}; 
    const int *pre[3] = {free_run.nbest[2].ids, NULL, seven};
    int two[3] = {2, 0, 7};
    const int *src[3] = {ids, ids, ids}, lens[3] = {n, n, n};
    q = p;
    q.target_prefix_ids = pre;
    q.target_prefix_lens = two;
    CHECK(attend_translate_ids(m, src, lens, 3, NULL, NULL, &q, r, err, sizeof err) == 0);
    CHECK(r[0].status == 0 && r[0].n_tgt >= 2 && !memcmp(r[0].tgt_ids, free_run.nbest[2].ids, 2 * sizeof(int)));
    CHECK(same_result(&free_run, &r[1], c));
    CHECK(r[2].status == 0 && r[2].n_tgt > 7 && !memcmp(r[2].tgt_ids, seven, sizeof seven));
    for (int i = 0; i < 3; i++) attend_result_free(&r[i]);
    q.max_length = 8; /* 7 prefix tokens leave no room within 8 (the start token counted) */
    CHECK(attend_translate_ids(m, src, lens, 3, NULL, NULL, &q, r, err, sizeof err) == 0);
    CHECK(r[0].status == 0 && r[2].status == ATTEND_E_INPUT && r[2].message && strstr(r[2].message, "max_length"));
    for (int i = 0; i < 3; i++) attend_result_free(&r[i]);
    const char *tgt[] = {"Two dogs."};
    q = p;
    q.target_prefix = empty;
    CHECK(attend_translate(m, &line, NULL, 1, tgt, &q, &r[0], err, sizeof err) == -1 && strstr(err, "prefix"));
    attend_result_free(&free_run);
    free(ids);
}

/* One hypothesis's scores: score the sum of its log-probabilities, normalized_score that
 * over n ^ lp. Beams sum them after the processors: within float32 rounding (Marian's beam
 * log-softmax leaves <pad> out), and a </s> forced at the length limit counts 0. */
static int scores_agree(const attend_hypothesis *h, float lp, int beams, int max_length) {
    double sum = 0;
    const int forced_end = beams && h->n == max_length - 1;
    for (int t = 0; t < h->n - forced_end; t++) sum += h->logprob[t];
    const double norm = h->score / pow(h->n, lp);
    return fabs(h->score - sum) < 1e-4 && fabs(h->normalized_score - norm) <= 1e-6 * fabs(norm) + 1e-7;
}

/* score and normalized_score with greedy search, sampling, forced targets and beams, with
 * and without want_scores: greedy, sampling and forced have them only with it (NaN
 * without), beams always (the same bits either way). */
static void score_scales(attend_model *m, attend_params p) {
    const char *line = "Zwei Hunde spielen im Schnee.", *tgt[] = {"Two dogs play in the snow."};
    char err[256];
    p.set_length_penalty = 1, p.length_penalty = 0.7f;
    const int beams[4] = {1, 1, 1, 3}, sample[4] = {0, 1, 0, 0}, forced[4] = {0, 0, 1, 0};
    for (int s = 0; s < 4; s++) {
        attend_result with, without;
        attend_params q = p;
        q.num_beams = beams[s], q.sample = sample[s], q.n_best = beams[s] > 1 ? 3 : 0;
        q.want_scores = 1;
        CHECK(attend_translate(m, &line, NULL, 1, forced[s] ? tgt : NULL, &q, &with, err, sizeof err) == 0);
        for (int k = 0; k < with.n_best; k++)
            CHECKF(scores_agree(&with.nbest[k], 0.7f, beams[s] > 1, attend_get_config(m)->max_length),
                   "search %d, hypothesis %d", s, k);
        CHECK(with.score == with.nbest[0].score && with.normalized_score == with.nbest[0].normalized_score);
        q.want_scores = 0, q.n_best = 0; /* n_best asks for the log-probabilities too */
        CHECK(attend_translate(m, &line, NULL, 1, forced[s] ? tgt : NULL, &q, &without, err, sizeof err) == 0);
        if (beams[s] > 1)
            CHECK(without.score == with.score && without.normalized_score == with.normalized_score);
        else
            CHECK(isnan(without.score) && isnan(without.normalized_score));
        attend_result_free(&with);
        attend_result_free(&without);
    }
}

/* attend_params.cross_heads: the listed heads' cross-attention along the output's path,
 * equal to those slices of want_attention's every matrix, with beams and greedy, with and
 * without want_attention; a head the decoder lacks refused. */
static void cross_heads(attend_model *m, attend_params p, const attend_config *c) {
    const char *line[] = {"Zwei Hunde spielen im Schnee."};
    const int heads[] = {c->decoder_layers - 1, 0, 0, c->decoder_heads - 1};
    char err[256];
    for (int beams = 1; beams <= 3; beams += 2)
        for (int both = 0; both < 2; both++) {
            attend_result full, part;
            p.num_beams = beams, p.want_attention = 1, p.cross_heads = NULL, p.n_cross_heads = 0;
            CHECK(attend_translate(m, line, NULL, 1, NULL, &p, &full, err, sizeof err) == 0 && !full.head_cross);
            p.want_attention = both, p.cross_heads = heads, p.n_cross_heads = 2;
            CHECK(attend_translate(m, line, NULL, 1, NULL, &p, &part, err, sizeof err) == 0);
            CHECK(part.head_cross && part.n_tgt == full.n_tgt && !memcmp(part.tgt_ids, full.tgt_ids,
                                                                          sizeof(int) * (size_t)full.n_tgt));
            const size_t TS = (size_t)full.n_tgt * full.n_src;
            for (int k = 0; part.head_cross && k < 2; k++) {
                const float *want = full.cross + ((size_t)heads[2 * k] * c->decoder_heads + heads[2 * k + 1]) * TS;
                CHECKF(!memcmp(part.head_cross + k * TS, want, sizeof(float) * TS), "beams %d head %d", beams, k);
            }
            CHECK(both ? part.cross != NULL : part.cross == NULL);
            attend_result_free(&full);
            attend_result_free(&part);
        }
    const int bad[] = {c->decoder_layers, 0};
    attend_result r;
    p.cross_heads = bad, p.n_cross_heads = 1;
    CHECK(attend_translate(m, line, NULL, 1, NULL, &p, &r, err, sizeof err) != 0 && strstr(err, "head"));
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : repo_path("tests/data/tiny-v1.gguf");
    char err[256];
    attend_model *m = attend_load(path, err, sizeof err);
    if (!m) {
        fprintf(stderr, "%s: %s\n", path, err);
        return 1;
    }
    const attend_config *c = attend_get_config(m);
    const char *lines[] = {"Wo ist der Bahnhof?", "Zwei Hunde spielen im Schnee."};
    attend_params p = attend_default_params();
    p.want_attention = p.want_scores = 1;
    p.num_beams = 3;
    for (int i = 0; i < 2; i++) {
        int *ids, n;
        CHECK(attend_tokenize(m, lines[i], strlen(lines[i]), &ids, &n, err, sizeof err) == 0);
        attend_result a, b;
        CHECK(attend_translate(m, &lines[i], NULL, 1, NULL, &p, &a, err, sizeof err) == 0);
        const int *idp = ids;
        CHECK(attend_translate_ids(m, &idp, &n, 1, NULL, NULL, &p, &b, err, sizeof err) == 0);
        CHECK(n == a.n_src && !memcmp(ids, a.src_ids, sizeof(int) * (size_t)n));
        CHECK(same_result(&a, &b, c));
        char *text = attend_detokenize(m, a.tgt_ids, a.n_tgt);
        CHECK(text && !strcmp(text, a.text));
        free(text);
        /* forced decoding: the translation's own ids give what its text gives */
        attend_result fa, fb;
        const char *tgt[] = {"Where is the station?"};
        CHECK(attend_translate(m, &lines[i], NULL, 1, tgt, &p, &fa, err, sizeof err) == 0);
        const int *fidp = fa.tgt_ids;
        CHECK(attend_translate_ids(m, &idp, &n, 1, &fidp, &fa.n_tgt, &p, &fb, err, sizeof err) == 0);
        CHECK(same_result(&fa, &fb, c));
        attend_result_free(&fa);
        attend_result_free(&fb);
        attend_result_free(&a);
        attend_result_free(&b);
        free(ids);
    }
    batching(m, p);
    bad_lines(m, p);
    prefixes(m, p);
    score_scales(m, p);
    cross_heads(m, p, c);
    /* attend_params.stats: this call's phases, reset by each call (not summed across calls) */
    attend_stats st = {1.0, 1.0, 999, 999};
    attend_params q = p;
    q.stats = &st;
    attend_result sr;
    for (int call = 0; call < 2; call++) {
        CHECK(attend_translate(m, &lines[0], NULL, 1, NULL, &q, &sr, err, sizeof err) == 0);
        CHECKF(st.steps >= 1 && st.steps <= sr.n_tgt + 1, "steps %lld for %d tokens", st.steps, sr.n_tgt);
        CHECK(st.encode_seconds > 0 && st.encode_seconds < 1.0 && st.decode_seconds > 0 && st.decode_seconds < 10.0);
        CHECKF(st.encoder_passes == 1, "encoder passes %lld for one line", st.encoder_passes);
        attend_result_free(&sr);
    }
    int neg[] = {-1};
    CHECK(attend_detokenize(m, neg, 1) == NULL);
    CHECK(!strcmp(attend_version(), ATTEND_VERSION));
    attend_free(m);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
