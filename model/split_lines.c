/* attend_translate: every line split into sentences (text/sentences.h), every sentence of
 * every line translated as its own sequence in one batched call, and each line's sentences
 * joined back into one result, handed to the caller as soon as its last sentence is done.
 * A line of one sentence is passed on whole, so its result is bit for bit the unsplit one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../text/sentences.h"
#include "split_lines.h"

/* ---------------------------------------------------------------------------------------
 * The plan: which bytes of which line each sentence is */

typedef struct {
    int n;          /* sentences of all lines */
    int *line;      /* [n] the line of each sentence */
    size_t *begin;  /* [n] its bytes in the line: [begin, end) */
    size_t *end;
    int *first;     /* [lines + 1] a line's sentences are first[i] .. first[i + 1] - 1 */
    int cap;
} split_plan;

static void plan_free(split_plan *s) {
    free(s->line);
    free(s->begin);
    free(s->end);
    free(s->first);
}

/* Append sentence [b, e) of line i. 0 or -1 (out of memory). */
static int plan_add(split_plan *s, int i, size_t b, size_t e) {
    if (s->n == s->cap) {
        const int cap = s->cap ? s->cap * 2 : 64;
        int *l = realloc(s->line, sizeof(int) * (size_t)cap);
        if (l) s->line = l;
        size_t *bb = realloc(s->begin, sizeof(size_t) * (size_t)cap);
        if (bb) s->begin = bb;
        size_t *ee = realloc(s->end, sizeof(size_t) * (size_t)cap);
        if (ee) s->end = ee;
        if (!l || !bb || !ee) return -1;
        s->cap = cap;
    }
    s->line[s->n] = i, s->begin[s->n] = b, s->end[s->n] = e;
    s->n++;
    return 0;
}

typedef struct {
    const attend_model *am;
    int limit; /* the model's source tokens */
} fit_ctx;

/* attend_split_clauses' test: a piece fits when it cannot reach the limit by its bytes
 * (a piece takes at least one byte; </s>, a language token and a lone "▁" come on top),
 * or when its tokens do not. */
static int piece_fits(void *user, const char *s, size_t n) {
    const fit_ctx *f = user;
    return n + 3 <= (size_t)f->limit || api_sentence_fits(f->am, s, n);
}

/* Line i's sentences into the plan: its sentence spans, each too long for the model split
 * again at clause boundaries. A line of one piece (or none: blank) stays whole. 0, or -1
 * with err. */
static int plan_line(split_plan *s, const fit_ctx *fit, int i, const char *text, size_t len, const char *lang,
                     char *err, size_t errlen) {
    attend_span *sp = NULL;
    const int k = attend_split_sentences(text, len, lang, &sp, err, errlen);
    if (k < 0) return -1;
    const int from = s->n;
    int bad = 0;
    for (int j = 0; j < k && !bad; j++) {
        const char *sent = text + sp[j].begin;
        const size_t sl = sp[j].end - sp[j].begin;
        attend_span whole = {0, sl}, *cl = &whole;
        int c = 1;
        if (!piece_fits((void *)fit, sent, sl) &&
            (c = attend_split_clauses(sent, sl, lang, piece_fits, (void *)fit, &cl, err, errlen)) < 0) {
            free(sp);
            return -1;
        }
        for (int q = 0; q < c && !bad; q++) bad = plan_add(s, i, sp[j].begin + cl[q].begin, sp[j].begin + cl[q].end);
        if (cl != &whole) free(cl);
    }
    free(sp);
    if (!bad && s->n - from <= 1) { /* one sentence (or blank): the line as it is */
        s->n = from;
        bad = plan_add(s, i, 0, len);
    }
    if (bad) snprintf(err, errlen, "out of memory");
    return bad ? -1 : 0;
}

/* The plan of n lines. 0, or -1 with err. */
static int make_plan(split_plan *s, const attend_model *am, const char *const *lines, const size_t *lens, int n,
                     const char *lang, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    const fit_ctx fit = {am, attend_get_config(am)->model_max_length};
    if (!(s->first = malloc(sizeof(int) * ((size_t)n + 1)))) return snprintf(err, errlen, "out of memory"), -1;
    for (int i = 0; i < n; i++) {
        s->first[i] = s->n;
        if (plan_line(s, &fit, i, lines[i], lens ? lens[i] : strlen(lines[i]), lang, err, errlen)) return -1;
    }
    s->first[n] = s->n;
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Joining a line's k sentence results into one */

/* k matrices, [groups, rows[j], cols[j]] each, on the diagonal of one [groups, R, C]
 * (R, C the sums), zero elsewhere. NULL when a part has none (*oom 0) or out of memory
 * (*oom 1). */
static float *block_diag(float *const *mats, const int *rows, const int *cols, int k, int groups, int *oom) {
    size_t R = 0, C = 0;
    for (int j = 0; j < k; j++) {
        if (!mats[j]) return NULL;
        R += (size_t)rows[j], C += (size_t)cols[j];
    }
    float *out = calloc((size_t)groups * R * C + 1, sizeof(float));
    if (!out) return *oom = 1, NULL;
    for (int g = 0; g < groups; g++)
        for (size_t j = 0, r0 = 0, c0 = 0; j < (size_t)k; r0 += (size_t)rows[j], c0 += (size_t)cols[j], j++)
            for (int r = 0; r < rows[j]; r++)
                memcpy(out + ((size_t)g * R + r0 + (size_t)r) * C + c0,
                       mats[j] + ((size_t)g * (size_t)rows[j] + (size_t)r) * (size_t)cols[j],
                       sizeof(float) * (size_t)cols[j]);
    return out;
}

/* k arrays of rows[j] * width floats end to end; NULL as block_diag. */
static float *concat_floats(float *const *a, const int *rows, int k, int width, int *oom) {
    size_t total = 0;
    for (int j = 0; j < k; j++) {
        if (!a[j]) return NULL;
        total += (size_t)rows[j] * (size_t)width;
    }
    float *out = malloc(sizeof(float) * (total + 1));
    if (!out) return *oom = 1, NULL;
    for (size_t j = 0, at = 0; j < (size_t)k; at += (size_t)rows[j] * (size_t)width, j++)
        memcpy(out + at, a[j], sizeof(float) * (size_t)rows[j] * (size_t)width);
    return out;
}

/* k id arrays end to end (malloc'd; NULL out of memory). */
static int *concat_ids(int *const *a, const int *n, int k) {
    size_t total = 0;
    for (int j = 0; j < k; j++) total += (size_t)n[j];
    int *out = malloc(sizeof(int) * (total + 1));
    for (size_t j = 0, at = 0; out && j < (size_t)k; at += (size_t)n[j], j++)
        if (n[j]) memcpy(out + at, a[j], sizeof(int) * (size_t)n[j]);
    return out;
}

/* k piece arrays end to end: the strings move into the new array and each old array is
 * freed and cleared. NULL out of memory (nothing moved) or when a part has none. */
static char **move_pieces(char ***fields[], const int *n, int k) {
    size_t total = 0;
    for (int j = 0; j < k; j++) {
        if (!*fields[j]) return NULL;
        total += (size_t)n[j];
    }
    char **out = malloc(sizeof(char *) * (total + 1));
    if (!out) return NULL;
    for (size_t j = 0, at = 0; j < (size_t)k; at += (size_t)n[j], j++) {
        memcpy(out + at, *fields[j], sizeof(char *) * (size_t)n[j]);
        free(*fields[j]);
        *fields[j] = NULL;
    }
    return out;
}

/* Does UTF-8 text end in a full-width stop (。！？), after which no space is written? */
static int ends_fullwidth_stop(const char *t, size_t n) {
    static const char *const stops[] = {"\xe3\x80\x82", "\xef\xbc\x81", "\xef\xbc\x9f"};
    for (int i = 0; i < 3; i++)
        if (n >= 3 && !memcmp(t + n - 3, stops[i], 3)) return 1;
    return 0;
}

/* The k translations texts[] joined: between two, the source's separator (the bytes
 * between the sentences, control bytes written as spaces), none after a full-width stop,
 * a space where the source had none (sentences of a no-space script into a spaced one).
 * Each text's bytes into sent[j].text_begin/end when sent is not NULL. malloc'd or NULL. */
static char *join_texts(const char *line, const size_t *begin, const size_t *end, char *const *texts, int k,
                        attend_sentence *sent) {
    size_t total = 1;
    for (int j = 0; j < k; j++) total += strlen(texts[j]) + (j ? begin[j] - end[j - 1] + 1 : 0);
    char *out = malloc(total), *w = out;
    for (int j = 0; out && j < k; j++) {
        if (j > 0 && !ends_fullwidth_stop(out, (size_t)(w - out))) {
            if (begin[j] == end[j - 1] && w > out) *w++ = ' ';
            for (size_t b = end[j - 1]; b < begin[j]; b++)
                *w++ = (unsigned char)line[b] < 0x20 && line[b] != '\t' ? ' ' : line[b];
        }
        const size_t tl = strlen(texts[j]);
        if (sent) sent[j].text_begin = (size_t)(w - out), sent[j].text_end = (size_t)(w - out) + tl;
        memcpy(w, texts[j], tl);
        w += tl;
    }
    if (out) *w = 0;
    return out;
}

/* Per-sentence views of one line's parts, gathered for the concat and block helpers. */
typedef struct {
    char **texts;
    char ****pieces; /* the addresses of the parts' piece arrays (moved out, then cleared) */
    int **ids, *n, *ns;
    float **lp, **ds, **cr, **ah;
} gather;

static void gather_free(gather *g) {
    free(g->texts), free(g->pieces), free(g->ids), free(g->n), free(g->ns);
    free(g->lp), free(g->ds), free(g->cr), free(g->ah);
}

/* Room for np sentences. 0 or -1 (out of memory). */
static int gather_alloc(gather *g, int np) {
    const size_t k = (size_t)np + 1;
    g->texts = calloc(k, sizeof(char *)), g->pieces = calloc(k, sizeof(char ***));
    g->ids = calloc(k, sizeof(int *)), g->n = calloc(k, sizeof(int)), g->ns = calloc(k, sizeof(int));
    g->lp = calloc(k, sizeof(float *)), g->ds = calloc(k, sizeof(float *)), g->cr = calloc(k, sizeof(float *));
    g->ah = calloc(k, sizeof(float *));
    return g->texts && g->pieces && g->ids && g->n && g->ns && g->lp && g->ds && g->cr && g->ah ? 0 : -1;
}

/* The sentences' k-th hypotheses joined into h (k 0: the best, whose logprob and attention
 * arrays are the line's own, r's). 0 or -1 (out of memory). */
static int join_hypothesis(attend_hypothesis *h, attend_result *parts, int np, int k, const attend_result *r,
                           const attend_config *c, const char *line, const size_t *begin, const size_t *end,
                           gather *g) {
    int oom = 0;
    for (int j = 0; j < np; j++) {
        attend_hypothesis *q = &parts[j].nbest[k];
        g->texts[j] = q->text, g->ids[j] = q->ids, g->n[j] = q->n, g->ns[j] = parts[j].n_src;
        g->pieces[j] = &q->pieces;
        g->lp[j] = q->logprob, g->ds[j] = q->dec_self, g->cr[j] = q->cross, g->ah[j] = q->align_head;
        h->n += q->n;
        h->score += q->score;
        h->normalized_score += q->normalized_score;
    }
    h->text = join_texts(line, begin, end, g->texts, np, NULL);
    h->ids = concat_ids(g->ids, g->n, np);
    h->pieces = move_pieces(g->pieces, g->n, np);
    if (k == 0) {
        h->logprob = r->logprob, h->dec_self = r->dec_self, h->cross = r->cross, h->align_head = r->align_head;
    } else {
        const int groups = c->decoder_layers * c->decoder_heads;
        h->logprob = concat_floats(g->lp, g->n, np, 1, &oom);
        h->dec_self = block_diag(g->ds, g->n, g->n, np, groups, &oom);
        h->cross = block_diag(g->cr, g->n, g->ns, np, groups, &oom);
        h->align_head = block_diag(g->ah, g->n, g->ns, np, 1, &oom);
    }
    return !h->text || !h->ids || !h->pieces || oom ? -1 : 0;
}

/* A line whose sentence j failed (attend_result.status) fails as a whole, saying which. */
static int fail_joined(attend_result *r, const attend_result *part, int j, int np) {
    char msg[400];
    snprintf(msg, sizeof msg, "sentence %d of %d: %.300s", j + 1, np, part->message ? part->message : "failed");
    r->status = part->status;
    r->text = strdup("");
    r->message = strdup(msg);
    return r->text && r->message ? 0 : -1;
}

/* The source side of np sentences into r and r->sentences. 0 or -1 (out of memory). */
static int join_sources(attend_result *r, attend_result *parts, int np, const size_t *begin, const size_t *end,
                        gather *g) {
    for (int j = 0; j < np; j++) {
        attend_sentence *s = &r->sentences[j];
        s->src_begin = begin[j], s->src_end = end[j];
        s->src_token = r->n_src, s->n_src = parts[j].n_src;
        s->tgt_token = r->n_tgt, s->n_tgt = parts[j].n_tgt;
        s->truncated = parts[j].truncated, s->score = parts[j].score;
        s->normalized_score = parts[j].normalized_score;
        r->n_src += parts[j].n_src, r->n_tgt += parts[j].n_tgt;
        r->truncated |= parts[j].truncated;
        r->score += parts[j].score;
        r->normalized_score += parts[j].normalized_score;
        g->ids[j] = parts[j].src_ids, g->n[j] = parts[j].n_src, g->pieces[j] = &parts[j].src_pieces;
    }
    r->src_ids = concat_ids(g->ids, g->n, np);
    r->src_pieces = move_pieces(g->pieces, g->n, np);
    return r->src_ids && r->src_pieces ? 0 : -1;
}

/* The target side: text, ids, pieces, scores, logits and the attention matrices. 0 or -1. */
static int join_targets(attend_result *r, attend_result *parts, int np, const attend_config *c, const char *line,
                        const size_t *begin, const size_t *end, gather *g) {
    int oom = 0;
    for (int j = 0; j < np; j++) {
        g->texts[j] = parts[j].text, g->ids[j] = parts[j].tgt_ids, g->n[j] = parts[j].n_tgt;
        g->ns[j] = parts[j].n_src, g->pieces[j] = &parts[j].tgt_pieces;
        g->lp[j] = parts[j].logprob, g->ds[j] = parts[j].dec_self, g->cr[j] = parts[j].cross;
    }
    r->text = join_texts(line, begin, end, g->texts, np, r->sentences);
    r->tgt_ids = concat_ids(g->ids, g->n, np);
    r->tgt_pieces = move_pieces(g->pieces, g->n, np);
    const int dec = c->decoder_layers * c->decoder_heads, enc = c->encoder_layers * c->encoder_heads;
    r->logprob = concat_floats(g->lp, g->n, np, 1, &oom);
    r->dec_self = block_diag(g->ds, g->n, g->n, np, dec, &oom);
    r->cross = block_diag(g->cr, g->n, g->ns, np, dec, &oom);
    for (int j = 0; j < np; j++) g->ah[j] = parts[j].align_head;
    r->align_head = block_diag(g->ah, g->n, g->ns, np, 1, &oom);
    for (int j = 0; j < np; j++) g->lp[j] = parts[j].logits, g->ds[j] = parts[j].enc_self;
    r->logits = concat_floats(g->lp, g->n, np, c->decoder_vocab_size, &oom);
    r->enc_self = block_diag(g->ds, g->ns, g->ns, np, enc, &oom);
    return r->text && r->tgt_ids && r->tgt_pieces && !oom ? 0 : -1;
}

/* np sentence results parts[] joined into r (see attend_result.sentences); the parts keep
 * what was not moved and are the caller's to free. 0 or -1 (out of memory). */
static int join_line(attend_result *r, attend_result *parts, int np, const attend_config *c, const char *line,
                     const size_t *begin, const size_t *end) {
    for (int j = 0; j < np; j++)
        if (parts[j].status) return fail_joined(r, &parts[j], j, np);
    gather g = {0};
    int rc = gather_alloc(&g, np);
    if (!rc && !(r->sentences = calloc((size_t)np, sizeof *r->sentences))) rc = -1;
    if (!rc) r->n_sentences = np;
    if (!rc) rc = join_sources(r, parts, np, begin, end, &g);
    if (!rc) rc = join_targets(r, parts, np, c, line, begin, end, &g);
    int K = parts[0].n_best;
    for (int j = 1; j < np; j++) K = parts[j].n_best < K ? parts[j].n_best : K;
    if (!rc && K > 0 && !(r->nbest = calloc((size_t)K, sizeof *r->nbest))) rc = -1;
    if (!rc && K > 0) r->n_best = K;
    for (int k = 0; !rc && k < K; k++) rc = join_hypothesis(&r->nbest[k], parts, np, k, r, c, line, begin, end, &g);
    gather_free(&g);
    return rc;
}

/* ---------------------------------------------------------------------------------------
 * attend_translate */

typedef struct {
    const attend_model *am;
    const attend_params *p;      /* the caller's */
    const split_plan *plan;
    const char *const *lines;
    attend_result *parts, *out;  /* [plan->n] sentences, [lines] */
    int *left;                   /* [lines] sentences of each line not yet translated */
    int *ready;                  /* [lines] lines joined in one batch */
    int oom;
} split_ctx;

/* Line i's sentences are all translated: joined into out[i]. 0 or -1 (out of memory). */
static int finish_line(split_ctx *x, int i) {
    const int f = x->plan->first[i], np = x->plan->first[i + 1] - f;
    if (np == 1) { /* translated whole: the result as it is */
        x->out[i] = x->parts[f];
        memset(&x->parts[f], 0, sizeof x->parts[f]);
        return 0;
    }
    const int rc = join_line(&x->out[i], x->parts + f, np, attend_get_config(x->am), x->lines[i],
                             x->plan->begin + f, x->plan->end + f);
    for (int j = 0; j < np; j++) attend_result_free(&x->parts[f + j]);
    if (rc) attend_result_free(&x->out[i]);
    return rc;
}

/* on_batch of the sentences' call: the lines this batch completes are joined and handed to
 * the caller's on_batch. Non-zero stops the call (out of memory, or the caller's wish). */
static int sentences_done(void *user, const int *index, int n) {
    split_ctx *x = user;
    int nr = 0;
    for (int j = 0; j < n; j++) {
        const int line = x->plan->line[index[j]];
        if (--x->left[line] > 0) continue;
        if (finish_line(x, line)) return x->oom = 1;
        x->ready[nr++] = line;
    }
    return nr && x->p->on_batch ? x->p->on_batch(x->p->user, x->ready, nr) : 0;
}

/* Translate the plan's sentences and join them into out. 0, or -1 with err. */
static int translate_plan(attend_model *am, const char *const *lines, int n, const attend_params *p,
                          const split_plan *plan, attend_result *out, char *err, size_t errlen) {
    const char **sl = calloc((size_t)plan->n + 1, sizeof(char *));
    const char **pre = p->target_prefix ? calloc((size_t)plan->n + 1, sizeof(char *)) : NULL;
    size_t *sn = calloc((size_t)plan->n + 1, sizeof(size_t));
    attend_result *parts = calloc((size_t)plan->n + 1, sizeof *parts);
    int *left = calloc((size_t)n + 1, sizeof(int)), *ready = calloc((size_t)n + 1, sizeof(int)), rc = -1;
    split_ctx x = {am, p, plan, lines, parts, out, left, ready, 0};
    if (!sl || !sn || !parts || !left || !ready || (p->target_prefix && !pre)) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    for (int j = 0; j < plan->n; j++) {
        const int i = plan->line[j];
        sl[j] = lines[i] + plan->begin[j], sn[j] = plan->end[j] - plan->begin[j];
        if (pre && j == plan->first[i]) pre[j] = p->target_prefix[i]; /* the line's first sentence */
    }
    for (int i = 0; i < n; i++) left[i] = plan->first[i + 1] - plan->first[i];
    memset(out, 0, sizeof *out * (size_t)n);
    attend_params q = *p;
    q.on_batch = sentences_done, q.user = &x, q.target_prefix = pre;
    rc = api_translate_lines(am, sl, sn, plan->n, NULL, &q, parts, err, errlen);
    if (rc && x.oom) snprintf(err, errlen, "out of memory");
done:
    for (int j = 0; parts && j < plan->n; j++) attend_result_free(&parts[j]); /* lines left unjoined */
    free(sl), free(pre), free(sn), free(parts), free(left), free(ready);
    return rc;
}

int attend_translate(attend_model *am, const char *const *lines, const size_t *lens, int n,
                     const char *const *targets, const attend_params *p, attend_result *out, char *err,
                     size_t errlen) {
    attend_params defaults = attend_default_params();
    if (!p) p = &defaults;
    if (p->split != ATTEND_SPLIT_SENTENCES && p->split != ATTEND_SPLIT_NONE) {
        snprintf(err, errlen, "split %d: not an ATTEND_SPLIT_ value", p->split);
        return -1;
    }
    if (p->split == ATTEND_SPLIT_NONE || targets || n <= 0 || attend_get_config(am)->model_max_length <= 0)
        return api_translate_lines(am, lines, lens, n, targets, p, out, err, errlen);
    split_plan plan;
    const char *lang = p->split_lang ? p->split_lang : p->src_lang;
    int rc = make_plan(&plan, am, lines, lens, n, lang, err, errlen);
    if (!rc && plan.n == n) /* every line one sentence: as without splitting */
        rc = api_translate_lines(am, lines, lens, n, targets, p, out, err, errlen);
    else if (!rc)
        rc = translate_plan(am, lines, n, p, &plan, out, err, errlen);
    plan_free(&plan);
    return rc;
}
