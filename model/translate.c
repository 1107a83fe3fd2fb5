/* Encoder, decoder and greedy decoding for a packed batch of sentences. */
#include "translate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------------------------------
 * Helpers */

static void embed_row(float *dst, const at_matrix *e, int id, float scale, const float *pos, int d) {
    at_matrix_row(dst, e, id);
    for (int j = 0; j < d; j++) dst[j] = dst[j] * scale + pos[j];
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void scale_rows(float *x, size_t n, float s) {
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

/* Grow *p (elements of size es) from old to new capacity, keeping contents; 0 or -1. */
static int grow(void **p, size_t es, size_t new_n) {
    void *q = realloc(*p, es * new_n);
    if (!q) return -1;
    *p = q;
    return 0;
}

int marian_max_length(const marian_model *m, const marian_opts *opts) {
    int ml = opts && opts->max_length > 0 ? opts->max_length : m->c.max_length;
    /* decoder inputs take positions 0 .. ml-2, which must exist */
    if (ml > m->c.max_pos + 1) ml = m->c.max_pos + 1;
    return ml < 2 ? 2 : ml;
}

void marian_output_free(marian_output *o) {
    if (!o) return;
    free(o->ids);
    free(o->logits);
    free(o->logprob);
    free(o->enc_self);
    free(o->dec_self);
    free(o->cross);
    memset(o, 0, sizeof *o);
}

/* Per-sentence decoding state. */
typedef struct {
    int off, S;        /* rows of this sentence in the packed encoder output */
    int cap;           /* steps the caches and captures hold */
    int limit;         /* steps this sentence can take (the length limit, or the forced length) */
    float **self_k;    /* [dec_layers] -> [cap, d] */
    float **self_v;
    float *scratch;    /* heads * max(S, cap): attention score rows */
    float *probs;      /* heads * max(S, cap): one step's probabilities, when captured */
    int done;
} sent_state;

/* Resize a [L][H][rows][cols] capture whose rows (and maybe cols) grow from old to new. */
static float *regrid(float *old, int L, int H, int old_rows, int old_cols, int rows, int cols) {
    float *p = calloc((size_t)L * H * rows * cols, sizeof(float));
    if (!p) return NULL;
    if (old)
        for (int l = 0; l < L; l++)
            for (int h = 0; h < H; h++)
                for (int r = 0; r < old_rows; r++)
                    memcpy(p + (((size_t)l * H + h) * rows + r) * cols,
                           old + (((size_t)l * H + h) * old_rows + r) * old_cols,
                           sizeof(float) * (size_t)old_cols);
    free(old);
    return p;
}

static int ensure_capacity(const marian_model *m, const marian_opts *o, sent_state *s,
                           marian_output *out, int steps) {
    if (steps <= s->cap) return 0;
    const marian_config *c = &m->c;
    const int d = c->d_model, L = c->dec_layers, H = c->dec_heads;
    int cap = s->cap ? 2 * s->cap : steps; /* first call: the expected length, then doubling */
    if (cap < steps) cap = steps;
    if (cap > s->limit && steps <= s->limit) cap = s->limit;
    for (int l = 0; l < L; l++)
        if (grow((void **)&s->self_k[l], sizeof(float), (size_t)cap * d) ||
            grow((void **)&s->self_v[l], sizeof(float), (size_t)cap * d))
            return -1;
    int heads = c->dec_heads > c->enc_heads ? c->dec_heads : c->enc_heads;
    int width = cap > s->S ? cap : s->S;
    if (grow((void **)&s->scratch, sizeof(float), (size_t)heads * width)) return -1;
    if (o->want_attention && grow((void **)&s->probs, sizeof(float), (size_t)heads * width)) return -1;
    if (o->want_logits && grow((void **)&out->logits, sizeof(float), (size_t)cap * c->decoder_vocab_size))
        return -1;
    if (o->want_scores && grow((void **)&out->logprob, sizeof(float), (size_t)cap)) return -1;
    if (grow((void **)&out->ids, sizeof(int), (size_t)cap)) return -1;
    if (o->want_attention) {
        out->dec_self = regrid(out->dec_self, L, H, s->cap, s->cap, cap, cap);
        out->cross = regrid(out->cross, L, H, s->cap, s->S, cap, s->S);
        if (!out->dec_self || !out->cross) return -1;
    }
    s->cap = cap;
    return 0;
}

/* Shrink [L][H][cap][cols] captures to [L][H][n][cols'] once the length is known. */
static void finish_captures(const marian_model *m, const sent_state *s, marian_output *out) {
    const int L = m->c.dec_layers, H = m->c.dec_heads, n = out->n;
    if (!out->dec_self) return;
    float *self = regrid(NULL, L, H, 0, 0, n, n), *cross = regrid(NULL, L, H, 0, 0, n, s->S);
    if (!self || !cross) { /* keep the larger grids: still correct, only wasteful */
        free(self);
        free(cross);
        return;
    }
    for (int l = 0; l < L; l++)
        for (int h = 0; h < H; h++)
            for (int r = 0; r < n; r++) {
                memcpy(self + (((size_t)l * H + h) * n + r) * n,
                       out->dec_self + (((size_t)l * H + h) * s->cap + r) * s->cap, sizeof(float) * (size_t)n);
                memcpy(cross + (((size_t)l * H + h) * n + r) * s->S,
                       out->cross + (((size_t)l * H + h) * s->cap + r) * s->S, sizeof(float) * (size_t)s->S);
            }
    free(out->dec_self);
    free(out->cross);
    out->dec_self = self;
    out->cross = cross;
}

/* ---------------------------------------------------------------------------------------
 * Encoder */

/* X [total, d] packed embeddings in, final encoder states out. */
static int encode(const marian_model *m, float *X, const sent_state *st, int n, int total,
                  marian_output *out, int want_attention) {
    const marian_config *c = &m->c;
    const int d = c->d_model, H = c->enc_heads, hd = d / H;
    const size_t td = (size_t)total * d;
    float *Q = malloc(sizeof(float) * td), *K = malloc(sizeof(float) * td);
    float *V = malloc(sizeof(float) * td), *C = malloc(sizeof(float) * td);
    float *F = malloc(sizeof(float) * (size_t)total * c->enc_ffn);
    int ok = Q && K && V && C && F;
    const float qscale = 1.0f / sqrtf((float)hd);
    for (int l = 0; ok && l < c->enc_layers; l++) {
        const enc_layer *L = &m->enc[l];
        at_k()->linear(Q, X, &L->self_attn.q.w, L->self_attn.q.b, total);
        at_k()->linear(K, X, &L->self_attn.k.w, L->self_attn.k.b, total);
        at_k()->linear(V, X, &L->self_attn.v.w, L->self_attn.v.b, total);
        scale_rows(Q, td, qscale);
#pragma omp parallel for schedule(dynamic) if (n > 1 && at_threads() > 1)
        for (int i = 0; i < n; i++) {
            const size_t o = (size_t)st[i].off * d;
            float *probs = want_attention ? out[i].enc_self + (size_t)l * H * st[i].S * st[i].S : NULL;
            at_attention(C + o, d, Q + o, d, K + o, V + o, d, st[i].S, st[i].S, H, hd, 0, 0,
                         probs, st[i].scratch);
        }
        at_k()->linear(Q, C, &L->self_attn.o.w, L->self_attn.o.b, total);
        at_add_layernorm(X, Q, L->self_attn_norm.g, L->self_attn_norm.b, total, d, c->eps);
        at_k()->linear(F, X, &L->fc1.w, L->fc1.b, total);
        at_activate(F, (size_t)total * c->enc_ffn, c->act);
        at_k()->linear(Q, F, &L->fc2.w, L->fc2.b, total);
        at_add_layernorm(X, Q, L->ffn_norm.g, L->ffn_norm.b, total, d, c->eps);
    }
    free(Q);
    free(K);
    free(V);
    free(C);
    free(F);
    return ok ? 0 : -1;
}

/* ---------------------------------------------------------------------------------------
 * Greedy decoding */

/* Choose the next token from raw logits as HF's greedy search does: pad never, and only
 * </s> at the last allowed step when forced_eos is set. */
static int choose(const marian_config *c, const float *logits, int last_step, int ignore_eos) {
    if (last_step && c->forced_eos) return c->eos_id;
    /* argmax over the ids between the banned ones; an earlier id wins ties */
    int ban[2] = {c->pad_id, ignore_eos && !last_step ? c->eos_id : c->pad_id};
    if (ban[1] < ban[0]) {
        int t = ban[0];
        ban[0] = ban[1];
        ban[1] = t;
    }
    const int V = c->decoder_vocab_size;
    const int lo[3] = {0, ban[0] + 1, ban[1] + 1}, hi[3] = {ban[0], ban[1], V};
    int best = -1;
    for (int s = 0; s < 3; s++) {
        if (hi[s] <= lo[s]) continue;
        int i = lo[s] + at_argmax(logits + lo[s], hi[s] - lo[s]);
        if (best < 0 || logits[i] > logits[best]) best = i;
    }
    return best;
}

static float log_softmax_at(const float *x, int n, int i) {
    float mx = -INFINITY;
    for (int j = 0; j < n; j++) mx = x[j] > mx ? x[j] : mx;
    double sum = 0;
    for (int j = 0; j < n; j++) sum += exp((double)x[j] - mx);
    return (float)((double)x[i] - mx - log(sum));
}

int marian_translate_ids(const marian_model *m, const marian_source *src, int n,
                         const marian_opts *opts, marian_output *out, char *err, size_t errlen) {
    static const marian_opts no_opts = {0};
    const marian_opts *o = opts ? opts : &no_opts;
    const marian_config *c = &m->c;
    const int d = c->d_model, Vt = c->decoder_vocab_size, L = c->dec_layers;
    const int H = c->dec_heads, hd = d / H;
    const float escale = c->scale_embedding ? sqrtf((float)d) : 1.0f;
    const float qscale = 1.0f / sqrtf((float)hd);
    const int ml = marian_max_length(m, o);
    int total = 0, rc = -1;
    memset(out, 0, sizeof(*out) * (size_t)n);
    for (int i = 0; i < n; i++) {
        if (src[i].n < 1 || src[i].n > c->max_pos) {
            snprintf(err, errlen, "sentence %d: %d source tokens (1..%d allowed)", i, src[i].n, c->max_pos);
            return -1;
        }
        for (int j = 0; j < src[i].n; j++)
            if (src[i].ids[j] < 0 || src[i].ids[j] >= c->vocab_size) {
                snprintf(err, errlen, "sentence %d: source id %d outside the vocabulary", i, src[i].ids[j]);
                return -1;
            }
        for (int j = 0; src[i].forced && j < src[i].n_forced; j++)
            if (src[i].forced[j] < 0 || src[i].forced[j] >= Vt) {
                snprintf(err, errlen, "sentence %d: target id %d outside the vocabulary", i, src[i].forced[j]);
                return -1;
            }
        if (src[i].forced && (src[i].n_forced < 1 || src[i].n_forced > c->max_pos)) {
            snprintf(err, errlen, "sentence %d: %d forced target tokens (1..%d allowed)", i,
                     src[i].n_forced, c->max_pos);
            return -1;
        }
        total += src[i].n;
    }
    if (n == 0) return 0;

    sent_state *st = calloc((size_t)n, sizeof *st);
    float *X = malloc(sizeof(float) * (size_t)total * d), *posbuf = malloc(sizeof(float) * (size_t)d);
    float **ck = calloc((size_t)L, sizeof(float *)), **cv = calloc((size_t)L, sizeof(float *));
    int *active = malloc(sizeof(int) * (size_t)n), *tok = malloc(sizeof(int) * (size_t)n);
    float *x = NULL, *q = NULL, *kk = NULL, *vv = NULL, *ctx = NULL, *tmp = NULL, *ff = NULL, *logits = NULL;
    if (!st || !X || !posbuf || !ck || !cv || !active || !tok) goto oom;

    const double t_start = now();
    /* embeddings and per-sentence state */
    for (int i = 0, off = 0; i < n; i++) {
        st[i].off = off;
        st[i].S = src[i].n;
        st[i].self_k = calloc((size_t)L, sizeof(float *));
        st[i].self_v = calloc((size_t)L, sizeof(float *));
        int heads = c->dec_heads > c->enc_heads ? c->dec_heads : c->enc_heads;
        st[i].scratch = malloc(sizeof(float) * (size_t)heads * st[i].S);
        if (!st[i].self_k || !st[i].self_v || !st[i].scratch) goto oom;
        /* Caches sized before decoding for twice the source length: the step loop then
         * allocates only for unusually long outputs, and a short sentence does not reserve
         * the whole length limit (512 steps x 6 layers of keys and values for opus-mt). */
        st[i].limit = src[i].forced ? src[i].n_forced : ml - 1;
        int expect = 2 * src[i].n + 8;
        if (ensure_capacity(m, o, &st[i], &out[i], expect < st[i].limit ? expect : st[i].limit)) goto oom;
        if (o->want_attention) {
            out[i].enc_self = malloc(sizeof(float) * (size_t)c->enc_layers * c->enc_heads * st[i].S * st[i].S);
            if (!out[i].enc_self) goto oom;
        }
        for (int j = 0; j < src[i].n; j++)
            embed_row(X + (size_t)(off + j) * d, &m->enc_embed, src[i].ids[j], escale,
                      marian_position(m, j, posbuf), d);
        off += src[i].n;
    }
    if (encode(m, X, st, n, total, out, o->want_attention)) goto oom;

    /* cross-attention keys and values: once per sentence, for every decoder layer */
    for (int l = 0; l < L; l++) {
        ck[l] = malloc(sizeof(float) * (size_t)total * d);
        cv[l] = malloc(sizeof(float) * (size_t)total * d);
        if (!ck[l] || !cv[l]) goto oom;
        at_k()->linear(ck[l], X, &m->dec[l].cross_attn.k.w, m->dec[l].cross_attn.k.b, total);
        at_k()->linear(cv[l], X, &m->dec[l].cross_attn.v.w, m->dec[l].cross_attn.v.b, total);
    }

    const int ffn = c->dec_ffn;
    x = malloc(sizeof(float) * (size_t)n * d);
    q = malloc(sizeof(float) * (size_t)n * d);
    kk = malloc(sizeof(float) * (size_t)n * d);
    vv = malloc(sizeof(float) * (size_t)n * d);
    ctx = malloc(sizeof(float) * (size_t)n * d);
    tmp = malloc(sizeof(float) * (size_t)n * d);
    ff = malloc(sizeof(float) * (size_t)n * ffn);
    logits = malloc(sizeof(float) * (size_t)n * Vt);
    if (!x || !q || !kk || !vv || !ctx || !tmp || !ff || !logits) goto oom;

    const double t_decode = now();
    int B = n, steps = 0;
    for (int i = 0; i < n; i++) {
        active[i] = i;
        tok[i] = c->start_id;
    }
    for (int t = 0; B > 0; t++, steps++) {
        const float *pos = marian_position(m, t, posbuf);
        for (int b = 0; b < B; b++) {
            const int i = active[b];
            if (ensure_capacity(m, o, &st[i], &out[i], t + 1)) goto oom;
            embed_row(x + (size_t)b * d, &m->dec_embed, tok[i], escale, pos, d);
        }
        for (int l = 0; l < L; l++) {
            const dec_layer *Ly = &m->dec[l];
            /* masked self-attention over this sentence's cache */
            at_k()->linear(q, x, &Ly->self_attn.q.w, Ly->self_attn.q.b, B);
            at_k()->linear(kk, x, &Ly->self_attn.k.w, Ly->self_attn.k.b, B);
            at_k()->linear(vv, x, &Ly->self_attn.v.w, Ly->self_attn.v.b, B);
            scale_rows(q, (size_t)B * d, qscale);
#pragma omp parallel for schedule(dynamic) if (B > 1 && at_threads() > 1)
            for (int b = 0; b < B; b++) {
                sent_state *s = &st[active[b]];
                memcpy(s->self_k[l] + (size_t)t * d, kk + (size_t)b * d, sizeof(float) * (size_t)d);
                memcpy(s->self_v[l] + (size_t)t * d, vv + (size_t)b * d, sizeof(float) * (size_t)d);
                at_attention(ctx + (size_t)b * d, d, q + (size_t)b * d, d, s->self_k[l], s->self_v[l], d,
                             1, t + 1, H, hd, 1, t, o->want_attention ? s->probs : NULL, s->scratch);
                if (o->want_attention) /* [H][t+1] -> row t of each head's [cap][cap] grid */
                    for (int h = 0; h < H; h++)
                        memcpy(out[active[b]].dec_self + (((size_t)l * H + h) * s->cap + t) * s->cap,
                               s->probs + (size_t)h * (t + 1), sizeof(float) * (size_t)(t + 1));
            }
            at_k()->linear(tmp, ctx, &Ly->self_attn.o.w, Ly->self_attn.o.b, B);
            at_add_layernorm(x, tmp, Ly->self_attn_norm.g, Ly->self_attn_norm.b, B, d, c->eps);
            /* cross-attention over the sentence's encoder output */
            at_k()->linear(q, x, &Ly->cross_attn.q.w, Ly->cross_attn.q.b, B);
            scale_rows(q, (size_t)B * d, qscale);
#pragma omp parallel for schedule(dynamic) if (B > 1 && at_threads() > 1)
            for (int b = 0; b < B; b++) {
                sent_state *s = &st[active[b]];
                const size_t off = (size_t)s->off * d;
                at_attention(ctx + (size_t)b * d, d, q + (size_t)b * d, d, ck[l] + off, cv[l] + off, d,
                             1, s->S, H, hd, 0, 0, o->want_attention ? s->probs : NULL, s->scratch);
                if (o->want_attention)
                    for (int h = 0; h < H; h++)
                        memcpy(out[active[b]].cross + (((size_t)l * H + h) * s->cap + t) * s->S,
                               s->probs + (size_t)h * s->S, sizeof(float) * (size_t)s->S);
            }
            at_k()->linear(tmp, ctx, &Ly->cross_attn.o.w, Ly->cross_attn.o.b, B);
            at_add_layernorm(x, tmp, Ly->cross_attn_norm.g, Ly->cross_attn_norm.b, B, d, c->eps);
            /* feed-forward */
            at_k()->linear(ff, x, &Ly->fc1.w, Ly->fc1.b, B);
            at_activate(ff, (size_t)B * ffn, c->act);
            at_k()->linear(tmp, ff, &Ly->fc2.w, Ly->fc2.b, B);
            at_add_layernorm(x, tmp, Ly->ffn_norm.g, Ly->ffn_norm.b, B, d, c->eps);
        }
        at_k()->linear(logits, x, &m->out_proj, m->final_logits_bias, B);

        /* each sentence's choice reads its own logits row and writes its own output */
#pragma omp parallel for schedule(static) if (B > 1 && at_threads() > 1)
        for (int b = 0; b < B; b++) {
            const int i = active[b];
            const float *lg = logits + (size_t)b * Vt;
            marian_output *ob = &out[i];
            int next;
            if (src[i].forced) next = src[i].forced[t];
            else next = choose(c, lg, t == ml - 2, o->ignore_eos);
            if (o->want_logits) memcpy(ob->logits + (size_t)t * Vt, lg, sizeof(float) * (size_t)Vt);
            if (o->want_scores) ob->logprob[t] = log_softmax_at(lg, Vt, next);
            ob->ids[t] = next;
            ob->n = t + 1;
            tok[i] = next;
        }
        int keep = 0;
        for (int b = 0; b < B; b++) {
            const int i = active[b];
            marian_output *ob = &out[i];
            const int next = ob->ids[t];
            int done = src[i].forced ? t + 1 >= src[i].n_forced : (next == c->eos_id || t >= ml - 2);
            if (!done) {
                /* still running: keeps its place in the (compacted) active list */
                active[keep++] = i;
            } else if (o->want_attention) {
                finish_captures(m, &st[i], ob);
            }
        }
        B = keep;
    }
    if (o->timing) {
        o->timing->encode = t_decode - t_start;
        o->timing->decode = now() - t_decode;
        o->timing->steps = steps;
    }
    rc = 0;
    goto cleanup;
oom:
    snprintf(err, errlen, "out of memory translating a batch of %d sentences (%d source tokens)", n, total);
    for (int i = 0; i < n; i++) marian_output_free(&out[i]);
cleanup:
    if (st)
        for (int i = 0; i < n; i++) {
            for (int l = 0; st[i].self_k && l < L; l++) free(st[i].self_k[l]);
            for (int l = 0; st[i].self_v && l < L; l++) free(st[i].self_v[l]);
            free(st[i].self_k);
            free(st[i].self_v);
            free(st[i].scratch);
            free(st[i].probs);
        }
    for (int l = 0; ck && l < L; l++) free(ck[l]);
    for (int l = 0; cv && l < L; l++) free(cv[l]);
    free(ck);
    free(cv);
    free(st);
    free(X);
    free(posbuf);
    free(active);
    free(tok);
    free(x);
    free(q);
    free(kk);
    free(vv);
    free(ctx);
    free(tmp);
    free(ff);
    free(logits);
    return rc;
}
